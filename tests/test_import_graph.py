"""The ``thinkj`` package's import graph has no cycles, every reward is registered in one place, and the layout holds:
the pipeline is one package that only the entry points import, reward designs know no engine, and the engine configs
name adapter modules that exist.

The graph is read from the source with ``ast``: module-level and function-level imports alike (a deferred import
still ties two modules together), ``import a.b`` as an edge to ``a.b`` and ``from a import b`` as an edge to the
submodule ``a.b`` when there is one, else to ``a``. Importing ``a.b`` also runs ``a/__init__.py``; that implicit
edge is left out, or every package whose ``__init__`` re-exports its submodules would count as a cycle.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "thinkj"

# Modules allowed to sit on a cycle: a known cycle may be listed here, module by module, while it is taken apart.
# Empty: thinkj.evaluation's cycles (judgebench <-> metrics, rewardbench2_run <-> run) are gone, so every module of
# the package must stay off cycles.
ALLOWED_ON_CYCLES: frozenset[str] = frozenset()


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package``."""
    modules = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module name a ``from ... import`` names (relative imports resolved against ``module``)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its body)."""
    modules = module_files(package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names if alias.name in modules)
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    if target in modules:
                        graph[name].add(target)
                    elif source in modules:
                        graph[name].add(source)
        graph[name].discard(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_builder_sees_every_import_form(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import f\n")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")  # function-level, submodule named by `from`
    (pkg / "b.py").write_text("import pkg.sub.c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from ..a import f\nfrom . import d\n")  # relative imports
    (pkg / "sub" / "d.py").write_text("from pkg import VALUE\n")  # a name of pkg/__init__.py: an edge to pkg
    graph = import_graph(pkg)
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.sub.c"}, "pkg.sub": set(),
                     "pkg.sub.c": {"pkg.a", "pkg.sub.d"}, "pkg.sub.d": {"pkg"}}
    assert cycles(graph) == [["pkg", "pkg.a", "pkg.b", "pkg.sub.c", "pkg.sub.d"]]


def test_no_import_cycles_in_thinkj():
    graph = import_graph(PACKAGE)
    assert "thinkj.rewards.registry" in graph and len(graph) > 100  # the real package was read
    outside = [c for c in cycles(graph) if not set(c) <= ALLOWED_ON_CYCLES]
    assert not outside, f"import cycles: {outside}"


# Package-level edges allowed to close a loop between packages, each commented where it is made. The evaluation CLI
# asks data selection's overlap rules (which read the benchmarks through thinkj.evaluation) before `eval run`.
ALLOWED_BETWEEN_PACKAGES: frozenset[tuple[str, str]] = frozenset({("thinkj.evaluation.cli", "thinkj.data.overlap")})


def package_of(module: str) -> str:
    """``thinkj.data.overlap`` -> ``thinkj.data``; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]], allowed: frozenset[tuple[str, str]] = frozenset()
                  ) -> dict[str, set[str]]:
    """Package -> the packages its modules import, leaving out the module edges in ``allowed``."""
    packages: dict[str, set[str]] = {}
    for module, deps in graph.items():
        packages.setdefault(package_of(module), set()).update(
            package_of(d) for d in deps if package_of(d) != package_of(module) and (module, d) not in allowed)
    return packages


def test_the_packages_stand_in_layers():
    # Broken on purpose (thinkj.data.critic_data importing thinkj.offline.baselines again; the rewards registry
    # importing thinkj.data.xml_judge_task): each closes a loop of packages and fails here.
    graph = import_graph(PACKAGE)
    assert all(pair[1] in graph.get(pair[0], ()) for pair in ALLOWED_BETWEEN_PACKAGES), "a stale allowance"
    loops = cycles(package_graph(graph, ALLOWED_BETWEEN_PACKAGES))
    edges = sorted((m, d) for loop in loops for m, deps in graph.items() for d in deps
                   if package_of(m) in loop and package_of(d) in loop and package_of(m) != package_of(d)
                   and (m, d) not in ALLOWED_BETWEEN_PACKAGES)
    assert not loops, f"packages importing each other: {loops}; through {edges}"


def test_no_import_cycles_in_thinkj_rewards():
    # Stated on its own so that the allow-list above can never cover a rewards cycle.
    graph = import_graph(PACKAGE)
    assert not [c for c in cycles(graph) if any(m.startswith("thinkj.rewards") for m in c)]


def test_the_pipeline_is_one_package_that_only_the_entry_points_import():
    # Broken on purpose (a pipeline_x.py at the top of thinkj/, an import of thinkj.pipeline.plan from
    # thinkj.data.cli): each fails here.
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert not [n for n in top if n.startswith("pipeline") or n in ("stage_runner.py", "run_settings.py")], top
    graph = import_graph(PACKAGE)
    assert {"thinkj.pipeline.plan", "thinkj.pipeline.run", "thinkj.pipeline.settings"} <= set(graph)
    users = {m for m, deps in graph.items()
             if not m.startswith("thinkj.pipeline") and any(d.startswith("thinkj.pipeline") for d in deps)}
    assert users <= {"thinkj.cli", "thinkj.sweep.recipe_runs"}, f"the pipeline is imported from below: {users}"


def test_reward_designs_know_no_engine():
    """A design (``thinkj.rewards.designs``) neither registers itself nor imports an engine adapter; the adapters
    (``thinkj.rewards.adapters``) are imported by no other part of ``thinkj.rewards``."""
    graph = import_graph(PACKAGE)
    designs = {m for m in graph if m.startswith("thinkj.rewards.designs.")}
    assert {"thinkj.rewards.designs.judge", "thinkj.rewards.designs.twins"} <= designs
    assert not {(m, d) for m in designs for d in graph[m]
                if d.startswith("thinkj.rewards.adapters") or d in ("thinkj.rewards", "thinkj.rewards.registry")}
    rest = {m for m in graph if m.startswith("thinkj.rewards") and not m.startswith("thinkj.rewards.adapters")}
    assert not {(m, d) for m in rest for d in graph[m] if d.startswith("thinkj.rewards.adapters")}


def _defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any((isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name)
               or (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets))
               for node in tree.body)


def test_the_configs_name_modules_that_exist():
    """verl imports a reward by module path (``pkg://thinkj.rewards.adapters.verl``): every such path in configs/,
    commented-out examples included, is an adapter module; every ``thinkj.<module>:<NAME>`` names a definition."""
    modules = module_files(PACKAGE)
    seen = []
    for path in sorted((PACKAGE.parent / "configs").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        for module in re.findall(r"pkg://(thinkj\.[\w.]+)", text):
            seen.append(module)
            assert module in modules and module.startswith("thinkj.rewards.adapters."), f"{path}: pkg://{module}"
        for module, name in re.findall(r"\b(thinkj\.[\w.]+):(\w+)", text):
            assert module in modules and _defines(modules[module], name), f"{path}: {module}:{name}"
    assert {"thinkj.rewards.adapters.verl", "thinkj.rewards.adapters.verl_twin",
            "thinkj.rewards.adapters.verl_group"} <= set(seen)


def test_rewards_are_registered_only_by_the_registry():
    callers = []
    for name, path in module_files(PACKAGE).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) in (
                    "register_preset", "register_group_reward"):
                callers.append(name)
    assert set(callers) == {"thinkj.rewards.registry"}


@pytest.mark.parametrize("first", ["thinkj.rewards.presets", "thinkj.rewards.designs.xml_judge",
                                   "thinkj.rewards.adapters.trl_group", "thinkj.rewards.adapters.trl",
                                   "thinkj.rewards.adapters.verl", "thinkj.rewards.designs.judge"])
def test_every_reward_is_found_whichever_module_is_imported_first(first):
    from thinkj.rewards.registry import GROUP_REWARDS, PRESETS

    code = (f"import {first}\n"
            "import json\n"
            "from thinkj.rewards import get_preset\n"
            "from thinkj.rewards.adapters.trl_group import get_group_reward\n"
            f"presets = {sorted(PRESETS)!r}\n"
            f"groups = {sorted(GROUP_REWARDS)!r}\n"
            "print(json.dumps([[get_preset(n).name for n in presets], [get_group_reward(n).name for n in groups]]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [sorted(PRESETS), sorted(GROUP_REWARDS)]
    assert {"thinkj_qwen", "xml_judge", "competition", "multi_objective"} <= set(PRESETS)
    assert {"xml_judge", "grm_listwise", "thinkj_pairwise", "thinkj_round_robin", "multi_objective"} <= set(GROUP_REWARDS)
