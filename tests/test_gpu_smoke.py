"""scripts/gpu_smoke.sh: the one-GPU smoke checks, rehearsed with DEVICE=cpu on this machine (opt-in: about two
minutes on 2 cores), and its set-up refusing a Python without torch in one line (default run, a few seconds)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_smoke.sh"


def test_a_python_without_torch_is_refused_in_one_line(tmp_path):
    venv.create(tmp_path / "bare", with_pip=False)
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env={**os.environ, "PYTHON": str(tmp_path / "bare" / "bin" / "python"), "DEVICE": "cpu",
                              "OUT": str(tmp_path / "out"), "SMOKE_VENV": str(tmp_path / "venv")})
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1].startswith("FAIL setup: ") and "lacks torch transformers" in run.stderr
    assert not (tmp_path / "venv").exists() and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.opt_in
@pytest.mark.timeout(900)
@pytest.mark.skipif("'opt_in' not in (config.option.markexpr or '')",
                    reason="a few minutes of SFT, generation and TRL on 2 cores: select with -m opt_in")
def test_smoke_checks_pass_on_cpu(tmp_path):
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=850, cwd=ROOT,
                         env={**os.environ, "DEVICE": "cpu", "OUT": str(tmp_path / "out"), "PYTHON": sys.executable})
    lines = [line for line in run.stdout.splitlines() if re.match(r"(PASS|FAIL|INFO) ", line)]
    print("\n".join(lines))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert [line.split(":")[0] for line in lines if not line.startswith("INFO")] == [
        "PASS sft", "PASS hf-judge-bf16", "PASS trl-grpo", "PASS sampling"]
    assert "weights torch.bfloat16 on cpu" in run.stdout
