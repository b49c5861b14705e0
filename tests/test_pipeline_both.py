"""The demo's shape through the pipeline, at tiny scale: ``LEARNING=both`` with TRL, the four rows and ``compare``.

``make demo`` is ``thinkj run configs/recipes/smollm2-cpu.yaml``; this runs the same stage list on the tiny recipe
with the smollm2 recipe's learning and evaluation settings (~40 s on 2 cores): the critic's wrong-side data, the
offline pool outside the seed set, critic SFT, critic-guided DPO, TRL GRPO from the SFT judge with held-out pairs
judged during RL (RL_VAL_FRACTION), the evaluation of base / init / offline / online, ``compare`` and the demo table.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SETS = ["learning=both", "rl_engine=trl", "rl_steps=2", "trl_overrides=learning_rate=5e-4 max_completion_length=32",
        "eval_rows=base init offline online", "tables=demo", "in_process=true", "critic_wrong_side_every=2",
        "offline_pairs=outside_seed_set", "rl_val_fraction=0.25", "seed=0"]


def _run(run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    sets = [x for item in [*SETS, f"run_dir={run_dir}", *extra] for x in ("--set", item)]
    return subprocess.run([sys.executable, "-m", "thinkj.cli", "run", "configs/recipes/tiny-cpu.yaml", *sets],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("both") / "run"
    proc = _run(run_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run_dir, proc.stdout


def test_every_stage_of_both_branches_runs_and_the_rows_are_compared(finished):
    run_dir, out = finished
    times = json.loads((run_dir / "logs" / "stage_times.json").read_text())
    for stage in ("critic_data", "offline_pool", "critic_sft", "offline", "rl_split", "online", "eval_base_synthetic",
                  "eval_init_synthetic", "eval_offline_synthetic", "eval_online_synthetic", "compare", "tables"):
        assert stage in times["ran"], stage
    assert "merge" not in times["ran"]  # TRL writes the HF model itself
    compared = json.loads((run_dir / "compare" / "compare.json").read_text())
    assert list(compared["rows"]) == ["base", "init", "offline", "online"]
    assert {r["n_judgments"] for r in compared["rows"].values()} == {40}  # 20 held-out pairs, both orders
    assert set(compared["comparisons"]) == {"init_vs_base", "offline_vs_init", "online_vs_init"}
    assert "Held-out pairs, judged in both orders" in out and "offline vs init" in out  # printed at the end
    table = (run_dir / "tables" / "tabledemo.md").read_text()
    for row in ("base", "init", "offline", "online"):
        assert f"| {row} " in table, row
    # the offline pool leaves out the seed set's pairs; the critic saw wrong-side examples
    pool = {json.loads(line)["id"] for line in (run_dir / "data" / "offline_pool" / "pairs.jsonl").open()}
    seed_set = {json.loads(line)["id"] for line in (run_dir / "data" / "seed_set" / "rl_pairs.jsonl").open()}
    assert pool and not pool & seed_set
    info = json.loads((run_dir / "data" / "critic_data" / "dataset_info.json").read_text())
    assert set(info) == {"thinkj_critic_sft", "thinkj_critic_wrong_side"}


def test_held_out_pairs_are_judged_during_rl_and_kept_out_of_its_training_data(finished):
    import pandas as pd

    run_dir, _ = finished
    split = run_dir / "data" / "rl_split"
    train, val = pd.read_parquet(split / "rl_train.parquet"), pd.read_parquet(split / "rl_val.parquet")
    assert len(val) and len(train)
    prompts = lambda frame: {json.dumps(p, default=str) for p in frame["prompt"]}  # noqa: E731
    assert not prompts(train) & prompts(val)
    state = json.loads((run_dir / "train" / "online_trl_grpo_thinkj_qwen" / "trainer_state.json").read_text())
    logged = {k for entry in state["log_history"] for k in entry}
    assert {"eval_judge/acc_original", "eval_judge/acc_swapped", "eval_judge/pair_acc", "eval_judge/a_share"} <= logged


def test_a_changed_dpo_setting_is_refused_but_leaves_the_online_branch_alone(finished, tmp_path):
    """The online branch does not depend on the offline branch's settings (OFFLINE_BRANCH): a new DPO override
    is refused at the offline stage, naming it, and a dry run with the online settings changed plans a new online
    folder beside the first."""
    import shutil

    run_dir, _ = finished
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    proc = _run(copy, "dpo_overrides=max_steps=5")
    assert proc.returncode != 0 and "DPO_OVERRIDES" in proc.stdout + proc.stderr
    dry = _run(copy, "w_str=0.0", "dry_run=1")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "online_trl_grpo_thinkj_qwen_w_str0.0" in dry.stdout
