"""TRL GRPO judging a held-out set during training (thinkj/online/trl_eval.py): two steps on the tiny judge with
``--val-data`` (a parquet from ``thinkj data verl-parquet --val-out``) and ``--eval-steps 1``. ``eval_judge/*`` must be
in ``trainer_state.json`` at steps 0, 1 and 2 and equal what this test recomputes from ``eval_samples.jsonl``:
verdicts re-parsed from the completions, golds, orders and comparisons read from the parquet (the samples are in
its row order). Break tried once: ORDER_NAMES reversed in thinkj/online/heldout.py fails the order check."""

from __future__ import annotations

import json

import pytest
from test_verl_cpu_validation import recompute_stats

from thinkj.records import read_jsonl, write_jsonl
from thinkj.rewards.adapters.verl import compute_score
from thinkj.synthetic.fruit_task import make_pairs

METRICS = ("acc", "acc_original", "acc_swapped", "pair_acc", "a_share")


@pytest.mark.slow
def test_trl_grpo_logs_held_out_metrics_equal_to_its_samples(judge, tmp_path):
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from thinkj.data.cli import app as data_app
    from thinkj.offline.cli import train_app as app

    write_jsonl(tmp_path / "pairs.jsonl", [p.to_dict() for p in make_pairs(16, seed=1) if p.label != "tie"])
    split = CliRunner().invoke(data_app, ["verl-parquet", str(tmp_path / "pairs.jsonl"), str(tmp_path / "train.parquet"),
                                          "--val-out", str(tmp_path / "val.parquet"), "--val-fraction", "0.25"])
    assert split.exit_code == 0, split.output
    result = CliRunner().invoke(app, ["rl", "--engine", "trl", "--algo", "grpo", "--model", str(judge),
                                      "--data", str(tmp_path / "train.parquet"), "--val-data", str(tmp_path / "val.parquet"),
                                      "--eval-steps", "1", "--out", str(tmp_path / "out"), "--steps", "2", "--lr", "1e-4",
                                      "--num-generations", "4", "--prompts-per-step", "2",
                                      "--max-completion-length", "96", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    history = json.loads((tmp_path / "out" / "trainer_state.json").read_text())["log_history"]
    logged = {h["step"]: {k.split("/", 1)[1]: v for k, v in h.items() if k.startswith("eval_judge/")}
              for h in history if any(k.startswith("eval_judge/") for k in h)}
    assert sorted(logged) == [0, 1, 2]
    rows = pq.read_table(tmp_path / "val.parquet").to_pylist()
    samples = [rec for _, rec in read_jsonl(tmp_path / "out" / "eval_samples.jsonl")]
    for step, metrics in logged.items():
        at = [s for s in samples if s["step"] == step]
        assert len(at) == len(rows)
        preds = [compute_score(solution_str=s["completion"], ground_truth=r["reward_model"]["ground_truth"]).get("pred")
                 for s, r in zip(at, rows)]
        for sample, row in zip(at, rows):  # the callback's order and comparison are the parquet's
            assert (sample["order"], sample["twin"]) == (("original", "swapped")[row["extra_info"]["order"]],
                                                         row["extra_info"]["twin"])
        expected = recompute_stats(preds, rows)
        print(json.dumps({"step": step, **metrics}))
        assert set(METRICS) <= set(metrics)
        for name in METRICS:
            assert metrics[name] == pytest.approx(expected[name], abs=1e-9), (step, name)
