"""scripts/gpu_device_run.sh, the steps a session lent a GPU runs after the kit's install, rehearsed whole with
DEVICE=cpu on this machine with the project's venv (opt-in: 8-10 minutes on 2 cores): verl GRPO with a checkpoint
and its merge to Hugging Face, the merged model judged by the hf and vLLM backends (CPU build here), TRL GRPO in two
batch layouts, LlamaFactory SFT and DPO with ZeRO-3 on 2 CPU processes (gloo). What it cannot show: CUDA, NCCL,
DeepSpeed on a GPU, the kit's vLLM 0.24 wheel."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_device_run.sh"


@pytest.mark.slow
@pytest.mark.opt_in
@pytest.mark.timeout(1500)  # 8-10 minutes; conftest.py skips opt_in tests unless -m opt_in selects them
def test_device_run_steps_pass_on_cpu(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    shared = str(SHARED_DATA) if (SHARED_DATA / "auto-j").is_dir() else ""
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=1400, cwd=ROOT,
                         env={**os.environ, "DEVICE": "cpu", "KIT_ENV": "", "PYTHON": sys.executable,
                              "RUNS": str(runs), "OUT": str(out), "SHARED_DATA": shared, "STEP_TIMEOUT": "900"})
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    passed = [line.split(":")[0].removeprefix("PASS ") for line in run.stdout.splitlines()
              if line.startswith("PASS ") and not line.startswith("PASS total")]
    assert passed[:5] == ["env", "prep", "prep-parquet", "verl", "verl-merge"] and passed[-3:] == ["trl", "sft", "dpo"]
    assert "INFO eval: model " + str(runs / "verl-hf") in run.stdout  # the merged verl model is the one judged
    compare = (runs / "eval-compare.log").read_text()
    for backend in ("hf", "vllm"):
        judged = re.search(rf"^synthetic {backend}: (\d+) judgments .* failed calls (\d+)", compare, re.M)
        assert judged and int(judged.group(1)) == 64 and judged.group(2) == "0", compare
    assert re.search(r"same verdict on \d+ of 64 judgments", compare), compare
    rows = json.loads((runs / "trl.json").read_text())
    assert [row["setting"] for row in rows] == ["gpu_hf", "gpu_before"]
    assert [row["layout"]["micro_batch"] for row in rows] == [4, 8]
    # what a device call returns (8 files at most): the summary, with each step's key lines, and one archive of logs
    assert sorted(p.name for p in out.iterdir()) == ["logs.tar.gz", "summary.txt"]
    summary = (out / "summary.txt").read_text()
    assert summary.strip() == run.stdout.strip()
    for key in ("  triton ", "  verl step 3 timing_s/step ", "  synthetic: the two backends give the same verdict",
                "  engine ", "  train_loss "):
        assert key in summary, key
    with tarfile.open(out / "logs.tar.gz") as archive:
        names = archive.getnames()
    assert {"./verl.log", "./eval-compare.log", "./trl.json", "./sft.log", "./dpo.log"} <= set(names), names
    assert any(n.startswith("./verl/logs/") and n.endswith(".jsonl") for n in names), names
    assert not [n for n in names if n.startswith(("./cache", "./work", "./verl-hf", "./verl/checkpoints"))], names
    assert (out / "logs.tar.gz").stat().st_size < 16 * 2**20
