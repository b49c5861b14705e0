"""verl 0.9.1's real trainer on CPU with configs/verl/grpo_consistent.yaml for 2 steps: both orders of every
comparison in each step, the twin reward manager's consistency term, the grpo_twin advantage (the run stops if the
hook that passes the twin keys is not installed in the trainer's driver) and the position diagnostics in verl's
own step log. It is also ``make test``'s verl run for what every algorithm shares (tests/test_verl_cpu_train.py's
checks, whose own runs are opt-in): a weight override reaching verl's reward (``W_STR=0``), the weight sync, verl's
checkpoint merged to a Hugging Face folder and evaluated by ``thinkj eval run``; and for the held-out validation
(tests/test_verl_cpu_validation.py's check: validated before training and after each step on parquets written by
``thinkj data verl-parquet --twins --val-out``, the logged metrics equal to those recomputed from verl's dump). Run
sizes as tests/test_verl_cpu_train.py's.

    python -m pytest -q tests/test_verl_cpu_twins.py
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from test_verl_cpu_train import check_common, merge_and_evaluate, recomputed_rewards, train  # judge: conftest's
from test_verl_cpu_validation import check_held_out_metrics, write_held_out_parquets

from thinkj.rewards import get_preset
from thinkj.rewards.designs.twins import consistency_terms
from thinkj.synthetic.fruit_task import make_pairs

FLIP = {"a": "b", "b": "a"}
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a verl run (the judge is shared with the other engine tests)


@pytest.fixture(scope="module")
def twin_data(tmp_path_factory) -> dict[str, Path]:
    return write_held_out_parquets(tmp_path_factory.mktemp("verl_twins"), "--twins")


def test_grpo_consistent_two_steps_on_cpu(judge, twin_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_grpo_consistent") / "run"
    # 2 comparisons x 2 orders a step, 4 rollouts each: the twin manager waits for 8 per comparison
    # W_STR=0: a weight override reaches verl's reward here too (score = acc + format + consistency)
    dump_dir = out / "validation"
    run = train("grpo_consistent", judge, twin_data, out, "actor_rollout_ref.rollout.n=4", "trainer.test_freq=1",
                "trainer.val_before_train=True", f"trainer.validation_data_dir={dump_dir}", W_STR="0")
    first, last = check_common(run, {**get_preset("thinkj_qwen").defaults, "w_str": 0.0, "w_con": 1.0}, val_n=4)
    # held out: before training and after each of the 2 steps, 4 greedy verdicts a row (val_kwargs.n = rollout.n)
    check_held_out_metrics(run["rows"], dump_dir, twin_data["val"], twin_data["train"], [0, 1, 2], n=4)
    assert any(s["strength"] > 0 for s in run["samples"])  # right verdicts with a strength term, paid 0
    steps = {1: first, 2: last}  # finite losses and a non-zero gradient: checked by check_common
    samples = run["samples"]
    assert len(samples) == 2 * 2 * 2 * 4  # 2 steps x 2 comparisons x 2 orders x 4 rollouts
    # every rollout's gold is its pair's label in the stored order and the flipped label in the swapped one: fails
    # with PreferencePair.swapped keeping the label (the reward and the dump agree with the wrong gold), tried once
    labels = {p.id: p.label for p in make_pairs(24, seed=31)}
    for sample in samples:
        label = labels[sample["twin"].split(":", 1)[1]]
        assert sample["gts"]["label"] == (label if sample["order"] == 0 else FLIP[label]), sample
    for step, metrics in steps.items():
        # position diagnostics in verl's own step log, recomputed from the step's dumped outputs (verdicts parsed by
        # the pure reward function) and golds; each step holds both orders, so half the golds are (a)
        rows = [s for s in samples if s["step"] == step]
        preds = [r.get("pred") for r in recomputed_rewards(rows, {"w_str": 0.0})]
        golds = [s["gts"]["label"] for s in rows]
        assert metrics["pos/gold_a_share"] == 0.5
        assert metrics["pos/a_share"] == pytest.approx(sum(p == "a" for p in preds) / len(preds))
        for side in ("a", "b"):
            hits = [p == g for p, g in zip(preds, golds) if g == side]
            assert metrics[f"pos/acc_gold_{side}"] == pytest.approx(sum(hits) / len(hits)), (step, side)
    assert any("pos/flip_rate" in m for m in steps.values())
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for sample in samples:
        assert sample["twin_size"] == 8.0 and sample["twin_missing"] == 0.0
        groups[(sample["step"], sample["twin"])].append(sample)
    assert len(groups) == 4 and all(sorted(s["order"] for s in g) == [0.0] * 4 + [1.0] * 4 for g in groups.values())
    for group in groups.values():  # the consistency term recomputed from the dumped verdicts, and the score
        golds = [s["gts"]["label"] for s in group]
        terms = consistency_terms([s["pred"] for s in group], golds, [s["twin"] for s in group],
                                  [int(s["order"]) for s in group])
        for sample, term in zip(group, terms):
            assert sample["consistency"] == pytest.approx(term["consistency"])
            assert sample["score"] == pytest.approx(sample["acc"] + sample["format"] + sample["consistency"], abs=1e-6)
    merge_and_evaluate(judge, run, first, last)
