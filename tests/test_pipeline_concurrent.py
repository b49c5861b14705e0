"""Two cells of a reward-weight sweep started at once on one RUN_DIR, as `thinkj sweep --launcher ray` without
`--wait` or a Slurm array over the grid starts them: two real `thinkj run` processes of the tiny recipe (TRL GRPO, one
step; the real stages, engines and scripted teacher). The stages they share run once, the second process waiting for
the first and skipping each; each cell's own online and eval stages run in its own folder; both tables are filled.
Without the stage locks the second process runs the shared stages into the same files at the same time.

    python -m pytest -q tests/test_pipeline_concurrent.py    # ~2-3 min on 2 cores
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
SHARED = ("model", "task", "load", "difficulty", "dedup", "decontaminate", "traces", "clip", "seed_set", "judge_sft")


def _cell(run_dir: Path, w_str: str) -> subprocess.Popen:
    thinkj = Path(os.environ.get("PYTHON") or sys.executable).parent / "thinkj"
    env = {k: v for k, v in os.environ.items() if k not in ("W_STR", "W_FMT", "W_ACC", "SEED", "RUN_DIR")}
    return subprocess.Popen([str(thinkj), "run", "configs/recipes/tiny-cpu.yaml", "--set", f"run_dir={run_dir}",
                             "--set", "rl_engine=trl", "--set", "rl_steps=1", "--set", f"w_str={w_str}"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_two_cells_started_together_share_their_stages_and_each_trains_its_own(tmp_path):
    run_dir = tmp_path / "run"
    cells = {w: _cell(run_dir, w) for w in ("0.0", "0.5")}
    outs = {w: proc.communicate(timeout=840)[0] for w, proc in cells.items()}
    for w, proc in cells.items():
        (tmp_path / f"cell{w}.log").write_text(outs[w])
        assert proc.returncode == 0, f"cell w_str={w}:\n{outs[w][-5000:]}"
    for stage in SHARED:  # each shared stage's command ran once: its log has one command line
        log = (run_dir / "logs" / f"{stage}.log").read_text()
        assert log.count("\n$ ") == 1, f"{stage} ran {log.count(chr(10) + '$ ')} times"
    waited = [line for text in outs.values() for line in text.splitlines() if "waiting for it to finish" in line]
    assert waited, "neither cell waited for the other"
    skipped = {w: {line.split()[2].rstrip(":") for line in outs[w].splitlines() if line.startswith("# skip ")}
               for w in outs}
    assert sum(stage in skipped[w] for w in outs for stage in SHARED) == len(SHARED)  # each skipped by one cell
    for w, other in (("0.0", "0.5"), ("0.5", "0.0")):  # each cell's own stages log apart (they ran side by side)
        for stage in ("online", "eval_synthetic"):
            log = (run_dir / "logs" / f"online_trl_grpo_thinkj_qwen_w_str{w}" / f"{stage}.log").read_text()
            assert log.count("\n$ ") == 1 and f"w_str={w}" in log and f"w_str={other}" not in log, (w, stage)
    for w in outs:
        online = run_dir / "train" / f"online_trl_grpo_thinkj_qwen_w_str{w}"
        assert json.loads((online / "thinkj_online_done.json").read_text())["steps"] == 1
        results = run_dir / "eval" / f"{online.name}_model" / "synthetic" / "synthetic.results.json"
        assert json.loads(results.read_text())["complete"] is True
        times = json.loads((run_dir / "logs" / online.name / "stage_times.json").read_text())  # each cell's own
        assert "online" in times["ran"] and set(times["skipped"]) == skipped[w], (w, times)
    table = (run_dir / "tables" / "tablerehearsal.md").read_text()
    assert "| 0.0 |" in table and "| 0.5 |" in table  # the last cell's table stage saw both cells
