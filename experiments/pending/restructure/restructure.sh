#!/usr/bin/env bash
# Issue 54: thinkj/pipeline/ as one package, thinkj/rewards/ split into designs/ and adapters/, one check_weights.
#   bash /tmp/restructure.sh [REPO] moves     # the git mv's (once; skips what is moved already)
#   bash /tmp/restructure.sh [REPO] rewrite   # the import / path / name rewrite (idempotent: re-run after a merge)
#   bash /tmp/restructure.sh [REPO]           # both
# The split of thinkj/pipeline.py into plan.py / run.py / __main__.py and of pipeline_learn.py into learn.py /
# evaluate.py / stage.py is hand work committed on the branch; a merge of newer main carries it.
set -euo pipefail
REPO=${1:-/work/wt54}
WHAT=${2:-all}
cd "$REPO"

mv_if() {  # git mv SRC DST unless SRC is gone already
  if [ -e "$1" ]; then mkdir -p "$(dirname "$2")"; git mv "$1" "$2"; fi
}

moves() {
  mv_if thinkj/pipeline.py thinkj/pipeline/run.py
  mv_if thinkj/run_settings.py thinkj/pipeline/settings.py
  mv_if thinkj/stage_runner.py thinkj/pipeline/stage_runner.py
  mv_if thinkj/pipeline_stage.py thinkj/pipeline/stage.py
  mv_if thinkj/pipeline_checks.py thinkj/pipeline/checks.py
  mv_if thinkj/pipeline_prep.py thinkj/pipeline/prep.py
  mv_if thinkj/pipeline_learn.py thinkj/pipeline/learn.py
  for f in judge upstream_thinkj grm xml_judge competition multi_objective pairwise_group pairwise_rm twins judge_http; do
    mv_if thinkj/rewards/$f.py thinkj/rewards/designs/$f.py
  done
  for f in verl verl_group verl_twin verl_kwargs trl; do
    mv_if thinkj/rewards/$f.py thinkj/rewards/adapters/$f.py
  done
  mv_if thinkj/rewards/group.py thinkj/rewards/adapters/trl_group.py
}

rewrite() {
  python3 - <<'PY'
import re
import subprocess
from pathlib import Path

ROOTS = ["thinkj", "tests", "data_prep", "scripts", "experiments", "configs", "docs", "README.md", "Makefile",
         "setup.py", "pyproject.toml"]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".toml", ".cfg", ".txt", ".sbatch", ".json", ""}
SKIP = {"experiments/LOG.md"}  # the log is history: it names the files as they were on its day

DESIGNS = ["judge", "upstream_thinkj", "grm", "xml_judge", "competition", "multi_objective", "pairwise_group",
           "pairwise_rm", "twins", "judge_http"]
ADAPTERS = {"verl": "verl", "verl_group": "verl_group", "verl_twin": "verl_twin", "verl_kwargs": "verl_kwargs",
            "trl": "trl", "group": "trl_group"}
MODULES = {  # old dotted module -> new
    "thinkj.pipeline_learn": "thinkj.pipeline.learn",
    "thinkj.pipeline_checks": "thinkj.pipeline.checks",
    "thinkj.pipeline_prep": "thinkj.pipeline.prep",
    "thinkj.pipeline_stage": "thinkj.pipeline.stage",
    "thinkj.stage_runner": "thinkj.pipeline.stage_runner",
    "thinkj.run_settings": "thinkj.pipeline.settings",
    **{f"thinkj.rewards.{d}": f"thinkj.rewards.designs.{d}" for d in DESIGNS},
    **{f"thinkj.rewards.{a}": f"thinkj.rewards.adapters.{b}" for a, b in ADAPTERS.items()},
}
PATHS = {o.replace(".", "/") + ".py": n.replace(".", "/") + ".py" for o, n in MODULES.items()}
PATHS["thinkj/pipeline.py"] = "thinkj/pipeline/plan.py"  # prose names it as "the stage list"

# Where each name of the old thinkj.pipeline / thinkj.pipeline_learn lives now (a name not listed: the module map).
PLAN = "thinkj.pipeline.plan"
RUN = "thinkj.pipeline.run"
HOMES = {
    "thinkj.pipeline": {
        **dict.fromkeys(["STAGE_SETTINGS", "ALWAYS_RUN", "STAGE_SEEDS", "LEARNING", "RL_ALGOS", "SOURCES", "validate",
                         "check_weight_settings", "plan", "record_value"], PLAN),
        **dict.fromkeys(["StageFailed", "merge_verl", "input_fingerprints", "write_record", "REDO_HINT", "_program",
                         "_step", "is_done", "run_pipeline", "run_recipe", "main"], RUN),
        **dict.fromkeys(["online_folder", "verl_seed_overrides", "check_learning_settings"], "thinkj.pipeline.learn"),
        **dict.fromkeys(["_with_settings", "_LOOPBACK_PORT"], PLAN),
        **dict.fromkeys(["_counts", "_details", "_run_stages"], RUN),
        **dict.fromkeys(["OFFLINE_BRANCH", "learning_stages"], "thinkj.pipeline.learn"),
        **dict.fromkeys(["eval_benchmark", "eval_stages"], "thinkj.pipeline.evaluate"),
        **dict.fromkeys(["_check_lf_overrides", "_check_verl_overrides", "_finite", "_one_of", "_positive_int", "_split",
                         "benchmark_data", "benchmark_inputs", "decontaminate_against"], "thinkj.pipeline.checks"),
        **dict.fromkeys(["Stage", "Where", "hf_args", "_opt"], "thinkj.pipeline.stage"),
        **dict.fromkeys(["BY_NAME", "DEFAULTS", "WEIGHT_SETTINGS", "resolve"], "thinkj.pipeline.settings"),
        "write_json": "thinkj.records",
        "settings": "thinkj.pipeline.settings",  # renamed env_settings (below)
        "check_names": "thinkj.pipeline.settings",
        "fingerprints": "thinkj.pipeline.stage_runner",
    },
    "thinkj.pipeline.learn": {
        **dict.fromkeys(["ROWS", "eval_folder", "eval_stages", "eval_benchmark"], "thinkj.pipeline.evaluate"),
        **dict.fromkeys(["Where", "opt", "bf16", "hf_args"], "thinkj.pipeline.stage"),
        "WEIGHT_SETTINGS": "thinkj.pipeline.settings",
    },
}
SUBMODULES = {"run", "stage", "stage_runner", "checks", "prep", "learn", "evaluate"}  # not plan / settings: see HOMES
RENAMED = {("thinkj.pipeline", "settings"): "env_settings", ("thinkj.pipeline", "_opt"): "opt",
           ("thinkj.online.trl_grpo", "check_weights"): "check_weights_with_twins"}
# prose: dotted names of the old thinkj.pipeline's functions (plan is left out: thinkj.pipeline.plan is a module now)
DOTTED = {f"thinkj.pipeline.{n}": f"{home}.{n}" for n, home in HOMES["thinkj.pipeline"].items()
          if n not in ("plan", "settings") and not home.endswith("." + n)}


def sub_modules(text: str) -> str:
    # the reference reward's verl entry left the design for the adapters (a design knows no engine)
    text = re.sub(r"pkg://thinkj\.rewards\.(?:designs\.)?pairwise_rm(?!\w)", "pkg://thinkj.rewards.adapters.verl_reference", text)
    text = re.sub(r"(?<![\w.])pairwise_rm\.compute_score", "verl_reference.compute_score", text)
    for old, new in MODULES.items():
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, text)
    for old, new in PATHS.items():
        text = re.sub(rf"(?<![\w/]){re.escape(old)}", new, text)
        text = re.sub(rf"(?<=\.\./){re.escape(old)}", new, text)
    # bare names in prose: pipeline_prep.derive_defaults, run_settings.resolve, "(pipeline_learn)"
    # (not where the file binds the name itself: `from thinkj import pipeline_prep` ... `pipeline_prep.check(s)`)
    def binds(name: str) -> bool:
        return re.search(rf"^\s*(from|import)\b[^\n]*\b{name}\b", text, re.M) is not None

    for name in ("learn", "prep", "checks", "stage"):
        if not binds(f"pipeline_{name}"):
            text = re.sub(rf"(?<![\w./])pipeline_{name}(?![\w])", f"pipeline.{name}", text)
    if not binds("run_settings"):
        text = re.sub(r"(?<![\w./])run_settings\.(?!json|py\b)(?=\w)", "settings.", text)
    for old, new in DOTTED.items():
        text = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, text)
    return text


FROM = re.compile(r"^(?P<indent>[ \t]*)from (?P<mod>[\w.]+) import (?P<names>\([^)]*\)|[^\n(]*?)(?P<tail>[ \t]*#[^\n]*)?$",
                  re.M)


def split_names(names: str) -> list[str]:
    return [n.strip() for n in names.strip("()").replace("\n", " ").split(",") if n.strip()]


def sub_from_imports(text: str, renamed: set[tuple[str, str]]) -> str:
    """`from M import a, b` where M's names now live in several modules -> one line per home."""

    def fix(m: re.Match) -> str:
        mod = m["mod"]
        tail = m["tail"] or ""
        names = split_names(m["names"])
        if mod == "thinkj" and any(n.split(" as ")[0] in ("pipeline_prep", "stage_runner", "run_settings") for n in names):
            moved = {"pipeline_prep": "prep", "stage_runner": "stage_runner", "run_settings": "settings"}
            out, rest = [], []
            for n in names:
                base = n.split(" as ")[0]
                if base in moved:
                    new, alias = moved[base], n.split(" as ")[-1].strip()
                    if new == "settings":  # `from thinkj.pipeline import settings` would read as the old function
                        out.append(f"import thinkj.pipeline.settings as {alias}")
                    else:
                        out.append(f"from thinkj.pipeline import {new}" + ("" if alias == new else f" as {alias}"))
                else:
                    rest.append(n)
            lines = ([f"from thinkj import {', '.join(rest)}"] if rest else []) + out
            return "\n".join(m["indent"] + line for line in lines) + tail
        if mod not in HOMES and all(m_ != mod for m_, _ in RENAMED):
            return m.group(0)
        groups: dict[str, list[str]] = {}
        for n in names:
            base, _, alias = n.partition(" as ")
            base, alias = base.strip(), alias.strip()
            home = HOMES.get(mod, {}).get(base, mod if mod != "thinkj.pipeline" or base in SUBMODULES else None)
            if home is None:
                raise SystemExit(f"no home known for {mod}.{base}")
            new = RENAMED.get((mod, base), base)
            if new != base and not alias:
                renamed.add((base, new))
            if alias and alias == new:
                alias = ""
            groups.setdefault(home, []).append(new + (f" as {alias}" if alias and alias != new else ""))
        if list(groups) == [mod] and all(RENAMED.get((mod, n.split(" as ")[0].strip())) is None for n in names):
            return m.group(0)
        lines = [f"from {home} import {', '.join(sorted(ns, key=lambda s: (not s[:1].isupper(), s)))}"
                 for home, ns in sorted(groups.items())]
        return "\n".join(m["indent"] + line for line in lines) + tail

    return FROM.sub(fix, text)


def rename_uses(text: str, renamed: set[tuple[str, str]]) -> str:
    for old, new in renamed:
        text = re.sub(rf"(?<![\w.]){old}\(", f"{new}(", text)
    return text


def files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *ROOTS],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    return [Path(p) for p in listed if p and p not in SKIP and Path(p).is_file() and Path(p).suffix in SUFFIXES
            and (Path(p).suffix or Path(p).name == "Makefile")]


changed = []
for path in files():
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        continue
    new = sub_modules(text)
    if path.suffix == ".py":
        renamed: set[tuple[str, str]] = set()
        new = sub_from_imports(new, renamed)
        # trl_grpo's own twins-aware check: its definition and calls in that module
        if path.as_posix() == "thinkj/online/trl_grpo.py":
            renamed.add(("check_weights", "check_weights_with_twins"))
            new = re.sub(r"(?<![\w.])def check_weights\(", "def check_weights_with_twins(", new)
        new = rename_uses(new, renamed)
    if new != text:
        path.write_text(new, encoding="utf-8")
        changed.append(str(path))
if changed:  # the rewritten imports in ruff's order (its isort rule); long lines it reports are mended by hand
    ruff = next((r for r in (".venv/bin/ruff", "/work/main/.venv/bin/ruff") if Path(r).exists()), None)
    if ruff:
        subprocess.run([ruff, "check", "--select", "I", "--fix", "-q", *[p for p in changed if p.endswith(".py")]],
                       check=False)
print(f"rewrote {len(changed)} files")
for p in changed:
    print("  " + p)
PY
}

case "$WHAT" in
  moves) moves ;;
  rewrite) rewrite ;;
  all) moves; rewrite ;;
  *) echo "usage: $0 [REPO] [moves|rewrite|all]" >&2; exit 2 ;;
esac
