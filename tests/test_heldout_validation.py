"""Held-out validation of an RL run, without an engine run: the metrics (thinkj/online/heldout.py), the held-out
split (``thinkj data verl-parquet --val-out``), the verl hooks that carry each row's order into validation and add
the metrics to verl's, and the curves panel. tests/test_verl_cpu_validation.py runs them inside verl's trainer."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
from typer.testing import CliRunner

from thinkj.online.heldout import judge_stats, order_name

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TWINS = ["t1", "t1", "t2", "t2"]
ORDERS = ["original", "swapped", "original", "swapped"]
GOLDS = ["a", "b", "b", "a"]


# ---------------------------------------------------------------------------------------------------- the metrics
def test_judge_stats_per_order_pair_accuracy_and_a_share():
    # t1 right in both orders; t2 right only in its original order
    stats = judge_stats(["a", "b", "b", "b"], GOLDS, TWINS, ORDERS)
    assert stats == {"acc": 0.75, "a_share": 0.25, "acc_original": 1.0, "acc_swapped": 0.5, "pair_acc": 0.5}
    # a position-constant judge: half right overall, never right in both orders of a comparison
    constant = judge_stats(["a"] * 4, GOLDS, TWINS, ORDERS)
    assert constant["acc"] == 0.5 and constant["pair_acc"] == 0.0 and constant["a_share"] == 1.0
    # unparsed verdicts are wrong, and are no "(a)"
    assert judge_stats(["", "", "b", "a"], GOLDS, TWINS, ORDERS)["acc"] == 0.5


def test_judge_stats_with_several_verdicts_per_row_and_without_orders():
    # two verdicts per row: t1 original 1/2 right, swapped 2/2 -> both right with chance 1/2; t2: 0 x 1 -> 0
    preds = ["a", "b", "b", "b", "a", "a", "a", "a"]
    golds = ["a", "a", "b", "b", "b", "b", "a", "a"]
    twins = ["t1"] * 4 + ["t2"] * 4
    orders = ["original", "original", "swapped", "swapped"] * 2
    stats = judge_stats(preds, golds, twins, orders)
    assert stats["pair_acc"] == 0.25 and stats["acc_original"] == 0.25 and stats["acc_swapped"] == 1.0
    # rows written without --twins: no order, so no per-order or pair keys
    assert set(judge_stats(["a", "b"], ["a", "a"], ["", ""], ["", ""])) == {"acc", "a_share"}
    # one order only: no pair accuracy
    assert "pair_acc" not in judge_stats(["a", "b"], ["a", "a"], ["t1", "t2"], ["original", "original"])
    with pytest.raises(ValueError, match="2 verdicts, 1 golds"):
        judge_stats(["a", "b"], ["a"], ["t", "t"], ["original", "swapped"])
    assert order_name({"twin": "3:x", "order": 1}) == ("3:x", "swapped")
    assert order_name({"index": 3}) == ("", "") and order_name(None) == ("", "")


# -------------------------------------------------------------------------------------------------- held-out split
def _pairs(n_questions: int, per_question: int):
    from thinkj.records import PreferencePair

    return [PreferencePair(f"q{q}-{k}", "s", [{"role": "user", "content": f"question {q}"}], f"A{k}", f"B{k}",
                           "a" if (q + k) % 2 else "b") for q in range(n_questions) for k in range(per_question)]


def test_hold_out_takes_whole_questions_by_a_fixed_seed():
    from thinkj.errors import ThinkJError
    from thinkj.export.verl import hold_out

    pairs = _pairs(10, 3)
    train, held = hold_out(pairs, 0.2, seed=0)
    assert len(held) == 6 and len(train) == 24  # 2 questions of 3 pairs reach round(0.2 x 30)
    assert not {p.instruction for p in train} & {p.instruction for p in held}
    assert hold_out(list(reversed(pairs)), 0.2, seed=0)[1] == list(reversed(held))  # the file's order changes nothing
    assert {p.id for p in hold_out(pairs, 0.2, seed=1)[1]} != {p.id for p in held}  # another seed, other questions
    assert len(hold_out(pairs, 0.01, seed=0)[1]) == 3  # at least one pair: its whole question
    with pytest.raises(ThinkJError, match="takes every pair"):
        hold_out(_pairs(1, 4), 0.5)
    with pytest.raises(ThinkJError, match="between 0 and 1"):
        hold_out(pairs, 0.0)


def test_verl_parquet_val_out_writes_both_orders_of_the_held_out_pairs(tmp_path):
    import pyarrow.parquet as pq

    from thinkj.data.cli import app
    from thinkj.records import write_jsonl

    write_jsonl(tmp_path / "pairs.jsonl", _pairs(10, 3))
    train, val = tmp_path / "train.parquet", tmp_path / "val.parquet"
    result = CliRunner().invoke(app, ["verl-parquet", str(tmp_path / "pairs.jsonl"), str(train),
                                      "--val-out", str(val), "--val-fraction", "0.2"])
    assert result.exit_code == 0, result.output
    summary = json.loads(next(line for line in result.output.splitlines() if line.startswith("{")))
    assert summary["rows"] == 24 and summary["val"]["pairs"] == 6 and summary["val"]["rows"] == 12
    rows = pq.read_table(val).to_pylist()
    assert [r["extra_info"]["order"] for r in rows] == [0, 1] * 6 and {r["extra_info"]["split"] for r in rows} == {"val"}
    for first, second in zip(rows[::2], rows[1::2]):  # each comparison in both orders, the gold following its response
        assert first["extra_info"]["twin"] == second["extra_info"]["twin"]
        assert {first["reward_model"]["ground_truth"]["label"], second["reward_model"]["ground_truth"]["label"]} == {"a", "b"}
    held_ids = {r["extra_info"]["id"] for r in rows}
    assert not held_ids & {r["extra_info"]["id"] for r in pq.read_table(train).to_pylist()}
    same = CliRunner().invoke(app, ["verl-parquet", str(tmp_path / "pairs.jsonl"), str(train), "--val-out",
                                    str(train)])
    assert same.exit_code != 0 and "is OUT itself" in str(same.exception)
    bad = CliRunner().invoke(app, ["verl-parquet", str(tmp_path / "pairs.jsonl"), str(train), "--val-out",
                                   str(val), "--val-fraction", "1"])
    assert bad.exit_code != 0 and "--val-fraction" in str(bad.exception)


# ------------------------------------------------------------------------------------------------------ verl hooks
def _validation_batch(validate: bool):
    import torch
    from verl import DataProto

    batch = DataProto.from_dict(
        tensors={"rm_scores": torch.tensor([[1.0], [0.0], [1.0], [0.0]])},
        non_tensors={"pred": np.array(["a", "a", "b", "b"], dtype=object),
                     "reward_model": np.array([{"ground_truth": {"label": g, "strength": 1}} for g in GOLDS], dtype=object),
                     "extra_info": np.array([{"twin": t, "order": i % 2} for i, t in enumerate(TWINS)], dtype=object)},
        meta_info={"reward_extra_keys": ["pred"], **({"validate": True} if validate else {})})
    return batch


def test_verl_validation_gets_order_keys_and_held_out_metrics():
    from verl.trainer.ppo import ray_trainer

    from thinkj.online import verl_hooks

    verl_hooks.install(ray_trainer)
    _, training = ray_trainer.extract_reward(_validation_batch(False))
    assert set(training) == {"pred"}  # a training step's extra info is verl's own
    _, extra = ray_trainer.extract_reward(_validation_batch(True))
    assert extra["val_order"].tolist() == ORDERS and extra["val_twin"].tolist() == TWINS
    assert extra["val_gold"].tolist() == GOLDS
    # as verl's _validate hands them on: lists per key, and the reward's acc
    infos = {"reward": [1.0, 0.0, 1.0, 0.0], "acc": [1.0, 0.0, 1.0, 0.0], **{k: v.tolist() for k, v in extra.items()}}
    sources = np.array(["src"] * 4, dtype=object)
    metrics = ray_trainer.RayPPOTrainer._val_metrics_update(None, sources, ["u1", "u2", "u3", "u4"], infos, [])
    assert metrics["val-core/src/acc/mean@1"] == 0.5  # verl's own, unchanged
    ours = {k.rsplit("/", 1)[1]: v for k, v in metrics.items() if k.startswith("val-judge/src/")}
    assert ours == judge_stats(["a", "a", "b", "b"], GOLDS, TWINS, ORDERS)
    assert ours["pair_acc"] == 0.0 and ours["acc_original"] == 1.0 and ours["acc_swapped"] == 0.0
    assert not any("val_order" in k or "val_gold" in k for k in metrics)
    # a reward without verdicts adds nothing
    assert verl_hooks.validation_metrics(sources, {k: v for k, v in infos.items() if k != "pred"}) == {}


def test_hook_refuses_a_trainer_whose_validate_no_longer_calls_extract_reward():
    from verl.trainer.ppo import ray_trainer

    from thinkj.online import verl_hooks

    class Trainer:  # fit as verl's, _validate without the call the hook wraps
        fit = ray_trainer.RayPPOTrainer.fit

        def _validate(self):
            return self._val_metrics_update()

        def _val_metrics_update(self):
            return {}

    module = types.SimpleNamespace(compute_advantage=lambda *a: None, compute_data_metrics=lambda *a: {},
                                   extract_reward=lambda b: b, RayPPOTrainer=Trainer)
    with pytest.raises(verl_hooks.StaleHook, match=r"_validate no longer contains 'extract_reward\(test_batch\)'"):
        verl_hooks.install(module)


# ----------------------------------------------------------------------------------------------------------- curves
def test_curves_plot_the_held_out_panel_from_verl_and_trl_logs(tmp_path):
    from thinkj.offline.cli import train_app as app
    from thinkj.online.curves import held_out, load_metrics, plot_curves

    log = tmp_path / "logs" / "thinkj" / "grpo.jsonl"
    log.parent.mkdir(parents=True)
    with open(log, "w") as fh:
        for step in range(3):
            data = {"critic/score/mean": 0.5 + 0.1 * step} if step else {}
            data.update({f"val-judge/thinkj/pairwise_judge/{k}": 0.25 + 0.25 * step for k in
                         ("acc", "acc_original", "acc_swapped", "pair_acc", "a_share")})
            fh.write(json.dumps({"step": step, "data": data}) + "\n")
    series = held_out(load_metrics(log))
    assert list(series) == ["acc_original", "acc_swapped", "pair_acc", "a_share"]
    assert series["pair_acc"] == ("val-judge/thinkj/pairwise_judge/pair_acc", [(0, 0.25), (1, 0.5), (2, 0.75)])
    result = CliRunner().invoke(app, ["curves", str(tmp_path / "logs"), "--out", str(tmp_path / "c.png")])
    assert result.exit_code == 0, result.output
    assert "held-out judge (both orders): val-judge/thinkj/pairwise_judge/acc_swapped (3 points)" in result.output
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG_MAGIC
    trl = {"eval_judge/acc_original": [(2, 0.5)], "eval_judge/a_share": [(2, 0.5)]}
    assert list(held_out(trl)) == ["acc_original", "a_share"]
    assert plot_curves(trl, tmp_path / "trl.png").read_bytes()[:8] == PNG_MAGIC  # held-out series alone still plot
    assert held_out({"critic/score/mean": [(1, 1.0)]}) == {}


def test_trl_held_out_rows_need_both_orders_and_a_whole_eval_step(tmp_path):
    """Fails with held_out_rows reading the file without twins (tried once: the one-order parquet passed)."""
    from thinkj.errors import ThinkJError
    from thinkj.export.verl import write_verl_parquet
    from thinkj.online.trl_grpo import GRPORun, held_out_rows
    from thinkj.records import RecordError, write_jsonl

    write_verl_parquet(tmp_path / "plain.parquet", _pairs(2, 2), split="val")  # one order only
    run = GRPORun(model="m", data="d", out_dir="o", eval_data=str(tmp_path / "plain.parquet"))
    with pytest.raises(RecordError, match=r"plain.parquet.*extra_info.twin"):
        held_out_rows(run)
    write_jsonl(tmp_path / "pairs.jsonl", _pairs(2, 2))  # a JSONL is written in both orders
    rows = held_out_rows(GRPORun(model="m", data="d", out_dir="o", eval_data=str(tmp_path / "pairs.jsonl")))
    assert [r["order"] for r in rows] == [0, 1] * 4 and all(order_name(r)[1] for r in rows)
    with pytest.raises(ThinkJError, match="--eval-steps"):
        held_out_rows(GRPORun(model="m", data="d", out_dir="o", eval_data=str(tmp_path / "pairs.jsonl"), eval_steps=0))
