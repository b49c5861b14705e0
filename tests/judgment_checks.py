"""An evaluation's results file checked against what it claims to score, for the end-to-end tests.

    from judgment_checks import check_synthetic_results   # tests/ is on sys.path in a test module

The check does not trust the run's own fields: the gold of every record comes from the pairs file (the swapped
order's flipped), the verdict is parsed again from the raw output, and the accuracy is recomputed from those.
A range check (``0 <= accuracy <= 100``) passes for any number; this fails when a verdict is misread, the metric
is miscounted or a gold is wrong (an unflipped swapped gold is refused by the scorer itself: exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FLIP = {"a": "b", "b": "a", "tie": "tie"}


def check_synthetic_results(out: Path, pairs_file: Path, n_pairs: int) -> dict[str, Any]:
    """``<out>/synthetic.{judgments.jsonl,results.json}`` of ``thinkj eval run synthetic --data pairs_file``: both
    orders of all ``n_pairs`` pairs, right golds and verdicts, and the metrics recomputed. Returns the metrics."""
    from thinkj.prompts import get_template
    from thinkj.verdict_parser import parse_verdict

    labels = {row["id"]: row["label"] for row in map(json.loads, pairs_file.read_text().splitlines())}
    records = [json.loads(line) for line in (out / "synthetic.judgments.jsonl").read_text().splitlines()]
    items = {r["item_id"] for r in records}
    assert len(items) == n_pairs and items <= set(labels)
    assert sorted((r["item_id"], r["order"]) for r in records) == sorted(
        (i, o) for i in items for o in ("original", "swapped"))
    right = 0
    for r in records:
        gold = labels[r["item_id"]] if r["order"] == "original" else FLIP[labels[r["item_id"]]]
        assert r["gold"] == gold, r
        assert isinstance(r["output"], str) and r["output"], r  # the model really generated text
        verdict = parse_verdict(r["output"], get_template(r["template"]).answer, strict=False)
        assert r["verdict"] == (verdict.choice if verdict.parsed else None), r
        right += r["verdict"] == gold
    metrics = json.loads((out / "synthetic.results.json").read_text())["metrics"]
    assert metrics["n_trials"] == len(records) and metrics["n_correct"] == right
    assert metrics["accuracy"] == pytest.approx(100.0 * right / len(records), abs=0.01)
    return metrics
