"""The GPU cluster install resolves: pip's dry run of the README's command with requirements/constraints-gpu.txt, for
Linux x86_64 on Python 3.11 and 3.12, reading package metadata only (``--use-feature=fast-deps``; a plain dry run
downloads about 1 GB of wheels from an index that serves no PEP 658 metadata). About 40 s per Python here, run side by
side. Needs the package index: skipped with the reason where it cannot be reached, except under ``CI=true``.

Shown to fail when a pin drifts: with ``vllm==0.23.0`` in the constraints the 3.11 resolution reports vllm 0.23.0,
and the assertion below names it (run by hand on 2026-11-26; see the commit message).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "requirements" / "constraints-gpu.txt"
# the README's cluster install (scripts/setup_gpu_env.sh runs it)
INSTALL = ["-e", f"{ROOT}[train,embed,gpu,dev]"]
# the versions the configs, the launchers and the docs are written for: a change here is a decision, not a refresh
KEY_VERSIONS = {"torch": "2.11.0", "vllm": "0.24.0", "transformers": "5.5.4", "verl": "0.9.1", "llamafactory": "0.9.5"}
PYTHONS = ("3.11", "3.12")


def _name(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def read_pins(path: Path) -> dict[str, str]:
    pins = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and name.strip() and version.strip(), f"{path}:{number}: not NAME==VERSION: {line!r}"
        pins[_name(name.strip())] = version.strip()
    return pins


def interpreter(version: str) -> str | None:
    """A working CPython of ``version`` on this machine: this one, ``pythonX.Y`` on PATH, or a pyenv install (a pyenv
    shim on PATH may name a version that is not selected, so each candidate is asked for its version)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [shutil.which(f"python{version}"), *sorted(glob.glob(f"{root}/versions/{version}.*/bin/python"))]
    for candidate in filter(None, candidates):
        try:
            said = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            continue
        if said == version:
            return candidate
    return None


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: this check must run)")
    pytest.skip(reason)


def index_reachable() -> str | None:
    """None when pip's index lists vllm 0.24.0, else why not."""
    probe = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "vllm", "--retries", "1", "--timeout", "15"],
                           capture_output=True, text=True, timeout=120)
    if KEY_VERSIONS["vllm"] not in probe.stdout:
        return f"the package index cannot be reached or lists no vllm {KEY_VERSIONS['vllm']}: " + \
               " ".join((probe.stderr or probe.stdout).split())[-200:]
    return None


def dry_run(python: str, report: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--dry-run", "--ignore-installed",
                           "--use-feature=fast-deps", "--quiet", "--report", str(report), "-c", str(CONSTRAINTS),
                           *INSTALL], capture_output=True, text=True, timeout=600, cwd=ROOT)


def resolved(report: Path) -> tuple[dict[str, str], dict]:
    """Name -> version of everything the install brings, and thinkj's own metadata as pip read it."""
    items = json.loads(report.read_text())["install"]
    thinkj = next(item["metadata"] for item in items if item["metadata"]["name"] == "thinkj")
    return {_name(item["metadata"]["name"]): item["metadata"]["version"] for item in items}, thinkj


def test_the_setup_script_runs_the_checked_install():
    script = (ROOT / "scripts" / "setup_gpu_env.sh").read_text()
    assert 'pip install -q -c requirements/constraints-gpu.txt -e ".[train,embed,gpu,dev]"' in script
    assert "flash-attn==$FLASH_ATTN_VERSION\" --no-build-isolation" in script and "FLASH_ATTN_VERSION=2.8.3" in script


def test_constraints_pin_the_key_versions():
    pins = read_pins(CONSTRAINTS)
    for name, version in KEY_VERSIONS.items():
        assert pins.get(name) == version, f"{CONSTRAINTS.name}: {name}=={pins.get(name)}, the stack is written for {version}"
    assert "flash-attn" not in pins  # no wheel on PyPI: a separate --no-build-isolation step, never part of this install


@pytest.mark.timeout(900)
def test_cluster_install_resolves_on_python_311_and_312(tmp_path):
    pythons = {version: interpreter(version) for version in PYTHONS}
    missing = [version for version, path in pythons.items() if path is None]
    if missing:
        _unavailable(f"no Python {', '.join(missing)} interpreter here (pythonX.Y on PATH or pyenv)")
    problem = index_reachable()
    if problem:
        _unavailable(problem)
    pins = read_pins(CONSTRAINTS)
    with ThreadPoolExecutor(len(PYTHONS)) as pool:  # pip waits on the network most of the time: both at once
        runs = dict(zip(PYTHONS, pool.map(lambda v: dry_run(pythons[v], tmp_path / f"{v}.json"), PYTHONS)))
    for version, run in runs.items():
        assert run.returncode == 0, f"Python {version}: the cluster install does not resolve:\n{run.stderr[-3000:]}"
        got, thinkj = resolved(tmp_path / f"{version}.json")
        assert got.pop("thinkj") == "0.1.0"
        # setup.py tells the truth: LlamaFactory 0.9.5 needs >= 3.11, verl 0.9.1 < 3.13; flash-attn only as an extra
        assert thinkj["requires_python"] == ">=3.11,<3.13"
        assert [d for d in thinkj["requires_dist"] if d.startswith("flash-attn")] == ['flash-attn==2.8.3; extra == "flash"']
        drift = {name: got.get(name) for name, want in KEY_VERSIONS.items() if got.get(name) != want}
        assert not drift, f"Python {version}: key versions resolved to {drift}, the stack is written for {KEY_VERSIONS}"
        # every package the install brings is pinned: nothing is left to the resolver's choice (or its backtracking)
        unpinned = sorted(set(got) - set(pins))
        assert not unpinned, f"Python {version}: resolved but not pinned in {CONSTRAINTS.name}: {unpinned}"
        assert {name: got[name] for name in got if got[name] != pins[name]} == {}
