"""verl 0.9.1's real trainer on CPU with configs/verl/grpo_consistent.yaml for 2 steps: both orders of every
comparison in each step, the twin reward manager's consistency term, the grpo_twin advantage (the run stops if the
hook that passes the twin keys is not installed in the trainer's driver) and the position diagnostics in verl's
own step log. It is also ``make test``'s verl run for what every algorithm shares (tests/test_verl_cpu_train.py's
checks, whose own runs are opt-in): a weight override reaching verl's reward (``W_STR=0``), the weight sync, verl's
checkpoint merged to a Hugging Face folder and evaluated by ``thinkj eval run``. Run sizes as that file's.

    python -m pytest -q tests/test_verl_cpu_twins.py
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from test_verl_cpu_train import check_common, merge_and_evaluate, train  # the tiny judge: conftest's fixture

from thinkj.rewards import get_preset
from thinkj.rewards.twins import consistency_terms

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a verl run (the judge is shared with the other engine tests)


@pytest.fixture(scope="module")
def twin_data(tmp_path_factory) -> dict[str, Path]:
    from thinkj.demo.tiny_task import make_pairs
    from thinkj.export.verl import write_verl_parquet

    out = tmp_path_factory.mktemp("verl_twins")
    write_verl_parquet(out / "train.parquet", [p for p in make_pairs(24, seed=31) if p.label != "tie"][:8], twins=True)
    write_verl_parquet(out / "val.parquet", [p for p in make_pairs(12, seed=32) if p.label != "tie"][:2], split="val",
                       twins=True)
    return {"train": out / "train.parquet", "val": out / "val.parquet"}


def test_grpo_consistent_two_steps_on_cpu(judge, twin_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_grpo_consistent") / "run"
    # 2 comparisons x 2 orders a step, 4 rollouts each: the twin manager waits for 8 per comparison
    # W_STR=0: a weight override reaches verl's reward here too (score = acc + format + consistency)
    run = train("grpo_consistent", judge, twin_data, out, "actor_rollout_ref.rollout.n=4", W_STR="0")
    first, last = check_common(run, {**get_preset("thinkj_qwen").defaults, "w_str": 0.0, "w_con": 1.0}, val_n=4)
    assert any(s["strength"] > 0 for s in run["samples"])  # right verdicts with a strength term, paid 0
    steps = {1: first, 2: last}  # finite losses and a non-zero gradient: checked by check_common
    for metrics in steps.values():
        # position diagnostics in verl's own step log; each step holds both orders, so half the golds are (a)
        assert metrics["pos/gold_a_share"] == 0.5
        assert 0.0 <= metrics["pos/a_share"] <= 1.0 and {"pos/acc_gold_a", "pos/acc_gold_b"} <= set(metrics)
    assert any("pos/flip_rate" in m for m in steps.values())
    samples = run["samples"]
    assert len(samples) == 2 * 2 * 2 * 4  # 2 steps x 2 comparisons x 2 orders x 4 rollouts
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
