"""verl 0.9.1's real trainer on CPU validating on a held-out set, the check: training and validation parquets written
by ``thinkj data verl-parquet --val-out`` (a held-out share of the pairs, both orders of each comparison), 2 steps
with ``trainer.test_freq=1`` and validation before training. The held-out judge metrics
(``val-judge/<data_source>/...``, thinkj/online/verl_hooks.py) must be in verl's step log at steps 0, 1 and 2 and
equal what :func:`check_held_out_metrics` recomputes from verl's own validation dump
(``trainer.validation_data_dir``): verdicts re-parsed from the dumped outputs, each dumped row matched to its parquet
row by its prompt text (its order and comparison come from the parquet, not from the hook's keys).

``make test`` runs the check on tests/test_verl_cpu_twins.py's ``grpo_consistent`` run (one verl run for both;
validation there samples ``val_kwargs.n = rollout.n = 4`` greedy verdicts a row). This file's own plain GRPO run
(``val_kwargs.n = 1``) is opt-in (``-m opt_in``); so is the verl GRPO canary (tests/test_rl_canary.py), which runs
the check on its 60-step run (validated every 10 steps on 64 held-out comparisons in both orders).

Break tried once: the hook naming order 0 "swapped" and order 1 "original" (ORDER_NAMES reversed in
thinkj/online/heldout.py) fails the order check against the parquet (the logged acc_original and acc_swapped
trade places: 0.857 / 0.571 after step 2 instead of 0.571 / 0.857). ``pair_acc`` as the mean of the two orders'
accuracies fails tests/test_heldout_validation.py's hand values (0.75 instead of 0.5), tried once. Cost of the
plain run: 102 s of verl (144 s with the judge's fine-tune) on 2 shared cores, peak 9.8 GB RSS.

    python -m pytest -q tests/test_verl_cpu_validation.py -m opt_in
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from test_verl_cpu_train import DATA_SOURCE, recomputed_rewards, train  # judge: conftest's

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # a verl run (the judge is shared with the engine tests)
METRICS = ("acc", "acc_original", "acc_swapped", "pair_acc", "a_share")


def write_held_out_parquets(out: Path, *extra: str) -> dict[str, Path]:
    """Training and held-out parquets of the fruit task's pairs by ``thinkj data verl-parquet --val-out`` (a quarter
    held out, whole questions, both orders); ``extra``: more options (``--twins`` for grpo_consistent)."""
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    write_jsonl(out / "pairs.jsonl", [p for p in make_pairs(24, seed=31) if p.label != "tie"])
    cmd = [sys.executable, "-m", "thinkj.cli", "data", "verl-parquet", str(out / "pairs.jsonl"), str(out / "train.parquet"),
           "--val-out", str(out / "val.parquet"), "--val-fraction", "0.25", "--seed", "1", *extra]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["val"]["rows"] == 2 * summary["val"]["pairs"] and summary["val"]["gold_a_share"] == 0.5
    return {"train": out / "train.parquet", "val": out / "val.parquet"}


@pytest.fixture(scope="module")
def held_out_data(tmp_path_factory) -> dict[str, Path]:
    return write_held_out_parquets(tmp_path_factory.mktemp("verl_val_data"))


def _user_text(prompt: list[dict]) -> str:
    return next(m["content"] for m in reversed(prompt) if m["role"] == "user")


def recompute_stats(preds: list, rows: list[dict]) -> dict[str, float]:
    """The held-out metrics of verdicts ``preds`` given to the parquet ``rows`` (aligned), counted here from the
    rows' golds, orders and comparisons."""
    right = [p == r["reward_model"]["ground_truth"]["label"] for p, r in zip(preds, rows)]
    orders = [("original", "swapped")[r["extra_info"]["order"]] for r in rows]
    by_twin: dict[str, dict[str, list[bool]]] = defaultdict(lambda: {"original": [], "swapped": []})
    for hit, order, row in zip(right, orders, rows):
        by_twin[row["extra_info"]["twin"]][order].append(hit)
    assert all(s["original"] and s["swapped"] for s in by_twin.values())
    share = {twin: {o: sum(h) / len(h) for o, h in sides.items()} for twin, sides in by_twin.items()}
    return {"acc": sum(right) / len(right),
            "acc_original": sum(r for r, o in zip(right, orders) if o == "original") / orders.count("original"),
            "acc_swapped": sum(r for r, o in zip(right, orders) if o == "swapped") / orders.count("swapped"),
            "pair_acc": sum(s["original"] * s["swapped"] for s in share.values()) / len(share),
            "a_share": sum(p == "a" for p in preds) / len(preds)}


def recompute(dump: list[dict], val_rows: list[dict]) -> dict[str, float]:
    """The held-out metrics of one validation from its dumped outputs and the parquet rows they were asked about
    (each dumped row found by its prompt text)."""
    texts = [_user_text(list(r["prompt"])) for r in val_rows]
    preds = [r.get("pred") for r in recomputed_rewards(dump, {})]
    matched = []
    for sample in dump:
        match = [i for i, text in enumerate(texts) if text in sample["input"]]
        assert len(match) == 1, (len(match), sample["input"][-300:])
        row = val_rows[match[0]]
        gold = row["reward_model"]["ground_truth"]["label"]
        assert sample["gts"]["label"] == gold
        order = ("original", "swapped")[row["extra_info"]["order"]]
        # the hook's keys in the dump name the parquet's order, comparison and gold
        assert (sample["val_order"], sample["val_twin"], sample["val_gold"]) == (order, row["extra_info"]["twin"], gold)
        matched.append(row)
    assert len({r["extra_info"]["twin"] for r in matched}) == len(val_rows) // 2  # every comparison was judged
    return recompute_stats(preds, matched)


def check_held_out_metrics(rows: list[dict], dump_dir: Path, val_parquet: Path, train_parquet: Path,
                           steps: list[int], n: int = 1) -> dict[int, dict[str, float]]:
    """verl's logged ``val-judge/*`` metrics at ``steps`` equal those recomputed from its validation dump (``n``
    verdicts a held-out row: ``val_kwargs.n``); returns them per step. ``make test`` runs it on the
    ``grpo_consistent`` run of tests/test_verl_cpu_twins.py (n = 4); the verl GRPO canary (tests/test_rl_canary.py)
    and this file's opt-in plain GRPO run (n = 1) too."""
    import pyarrow.parquet as pq

    val_rows = pq.read_table(val_parquet).to_pylist()
    train_questions = {_user_text(list(r["prompt"])) for r in pq.read_table(train_parquet).to_pylist()}
    # the held-out set: both orders of whole questions the run never trains on
    assert not train_questions & {_user_text(list(r["prompt"])) for r in val_rows}
    logged: dict[int, dict[str, float]] = defaultdict(dict)
    for row in rows:
        for key, value in row["data"].items():
            if key.startswith(f"val-judge/{DATA_SOURCE}/"):
                logged[row["step"]][key.rsplit("/", 1)[1]] = value
            elif key == f"val-core/{DATA_SOURCE}/acc/mean@{n}":
                logged[row["step"]]["verl_acc"] = value
    assert sorted(logged) == steps, sorted(logged)
    for step, metrics in logged.items():
        dump = [json.loads(line) for line in open(dump_dir / f"{step}.jsonl")]
        assert len(dump) == n * len(val_rows)  # val_kwargs.n greedy verdicts per held-out row
        expected = recompute(dump, val_rows)
        print(json.dumps({"step": step, **metrics}))
        assert set(METRICS) <= set(metrics), (step, sorted(metrics))
        for name in METRICS:
            assert metrics[name] == pytest.approx(expected[name], abs=1e-9), (step, name, metrics, expected)
        assert metrics["acc"] == pytest.approx(metrics["verl_acc"], abs=1e-9)  # verl's own mean of the reward's acc
    return dict(logged)


@pytest.mark.opt_in  # make test runs the check on tests/test_verl_cpu_twins.py's run (val n = 4): one verl run less
def test_held_out_validation_metrics_equal_the_dump(judge, held_out_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_validation") / "grpo"
    dump_dir = out / "validation"
    run = train("grpo", judge, held_out_data, out, "actor_rollout_ref.rollout.n=4", "trainer.test_freq=1",
                "trainer.val_before_train=True", f"trainer.validation_data_dir={dump_dir}")
    # before training and after each of the 2 steps
    check_held_out_metrics(run["rows"], dump_dir, held_out_data["val"], held_out_data["train"], [0, 1, 2])
