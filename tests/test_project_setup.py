"""The set-up every checkout promises: README's two commands, CI running exactly the test one, ignored caches."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make_dry_run(target: str) -> list[str]:
    # Under `make test` the parent make's variables would make this one print "Entering directory" lines.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_readme_opens_with_demo_and_test_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    first_block = re.search(r"```bash\n(.*?)```", readme, re.S)
    assert first_block, "README has no bash block"
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert ci == ["make test"]


def test_both_commands_build_the_env_first() -> None:
    for target, runs in (("demo", "thinkj run configs/recipes/smollm2-cpu.yaml"), ("test", "-m pytest")):
        steps = _make_dry_run(target)
        assert steps[0] == "bash scripts/setup_cpu_env.sh", steps
        assert runs in steps[-1], steps
    assert "--durations=10" in steps[-1] and "s of wall time" in steps[-1]  # every CI log ends with both


def test_xdist_groups_name_test_files_that_exist() -> None:
    from xdist_groups import GROUPS, unit_of  # tests/ is on sys.path

    for group, names in GROUPS.items():
        for name in names:
            assert (ROOT / "tests" / name).is_file(), (group, name)  # a renamed file would leave its group silently
            assert unit_of(f"tests/{name}::test_x[1::2]") == group
    assert unit_of("tests/test_stats.py::test_wilson_known_values") == "tests/test_stats.py"


def test_caches_and_outputs_are_ignored() -> None:
    ignored = set((ROOT / ".gitignore").read_text().split())
    assert {".venv", ".cache/", "runs/"} <= ignored  # .venv may be a symlink to a shared env
    makefile = (ROOT / "Makefile").read_text()
    for var in ("HF_HOME", "VLLM_CACHE_ROOT", "MPLCONFIGDIR", "RAY_TMPDIR"):
        assert re.search(rf"export {var} \?= \$\(CURDIR\)/\.cache/", makefile), var
