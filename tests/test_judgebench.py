"""JudgeBench: the net-over-both-orders rule of ScalerLab/JudgeBench utils/metrics.py with hand-worked numbers,
loader errors, and ``thinkj eval run|score`` on the tiny model. Fixtures are rows in JudgeBench's data/*.jsonl
schema that the tests write (no hub here).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from thinkj.errors import ThinkJError
from thinkj.evaluation.cli import app
from thinkj.evaluation.judgebench import CATEGORIES, load_judgebench, pair_points
from thinkj.evaluation.registry import load_benchmark, score
from thinkj.records import RecordError, write_jsonl

runner = CliRunner()


def test_pair_points_net_rule():
    # label a; second argument is the swapped order's verdict mapped back to the original positions
    assert pair_points("a", "a", "a") == 2
    assert pair_points("a", "tie", "a") == 1  # right once, tie once: net 1 > 0, correct
    assert pair_points("a", "b", "a") == 0  # inconsistent: net 0, not correct
    assert pair_points(None, "a", "a") == 1  # an unparsable order counts 0
    assert pair_points("b", None, "a") == -1
    assert pair_points("tie", "tie", "b") == 0


def _records(pair_id, category, gold, original, swapped):
    """Records as ``thinkj eval run`` writes them: gold and verdict in each order's displayed positions."""
    flip = {"a": "b", "b": "a", "tie": "tie", None: None}
    source = {"knowledge": "mmlu-pro-physics"}.get(category, CATEGORIES[category])
    base = {"benchmark": "judgebench", "item_id": pair_id, "source": source, "category": category,
            "response_model": "gpt-4o-2024-05-13"}
    return [{**base, "order": "original", "gold": gold, "verdict": original},
            {**base, "order": "swapped", "gold": flip[gold], "verdict": swapped}]


def test_score_hand_worked():
    records = (_records("k1", "knowledge", "a", "a", "b")      # both orders pick A: +2, correct
               + _records("k2", "knowledge", "b", "a", "b")    # picks A, then (swapped "b") A again: -2
               + _records("r1", "reasoning", "a", "a", "a")    # A then B (swapped "a" = original b): 0, wrong
               + _records("m1", "math", "b", None, "a")        # none, then B: +1, correct
               + _records("c1", "coding", "a", "tie", "tie"))  # 0, wrong
    got = score("judgebench", records)
    assert got["accuracy"] == 40.0  # 2 of 5 pairs, pooled (not a mean of categories)
    assert got["categories"] == {"knowledge": 50.0, "reasoning": 0.0, "math": 100.0, "coding": 0.0}
    assert got["complete"] is False and "net is > 0" in got["accuracy_rule"] and "metrics.py" in got["accuracy_rule"]
    assert got["missing"] == ["gpt-4o-2024-05-13: 5 of 350 pairs"]
    assert got["consistency"] == 60.0  # k1, k2 and c1 (tie, tie) agree across orders; r1 flips, m1 unparsed
    with pytest.raises(ThinkJError, match="unparsed-half"):
        score("judgebench", records, unparsed_half=True)
    with pytest.raises(ThinkJError, match="both orders"):
        score("judgebench", records[:-1])


def write_judgebench_fixture(path):
    """Four pairs, one per category, in JudgeBench's data/*.jsonl schema."""
    rows = [("mmlu-pro-math", "What is 7*6?\n(A) 42 (B) 48", "The answer is (A).", "The answer is (B).", "A>B"),
            ("livebench-reasoning", "All cats are animals; Tom is a cat. Is Tom an animal?", "No.", "Yes.", "B>A"),
            ("livebench-math", "What is 12/4?", "3", "4", "A>B"),
            ("livecodebench", "Write a Python expression for 2 squared.", "2*2*2", "2**2", "B>A")]
    write_jsonl(path, [{"pair_id": f"p{k}", "original_id": str(k), "source": source, "question": q,
                        "response_model": "gpt-4o-2024-05-13", "response_A": a, "response_B": b, "label": label}
                       for k, (source, q, a, b, label) in enumerate(rows)])
    return path


def test_loader_and_bad_rows(tmp_path):
    path = write_judgebench_fixture(tmp_path / "jb.jsonl")
    pairs = load_judgebench(path)
    assert [p.label for p in pairs] == ["a", "b", "a", "b"]
    assert [p.meta["record"]["category"] for p in pairs] == ["knowledge", "reasoning", "math", "coding"]
    assert len(load_benchmark("judgebench", str(path), limit=2)) == 2
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    write_jsonl(path, rows[:1] + [{**rows[1], "label": "A=B"}])
    with pytest.raises(RecordError, match=r"jb.jsonl, line 2, field 'label'"):
        load_judgebench(path)
    write_jsonl(path, [{**rows[0], "source": "arena-hard"}])
    with pytest.raises(RecordError, match=r"line 1, field 'source'"):
        load_judgebench(path)


@pytest.mark.slow
def test_eval_run_then_score_on_tiny_model(tmp_path, tiny_model_dir):
    data = write_judgebench_fixture(tmp_path / "jb.jsonl")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "judgebench", "--model", str(tiny_model_dir), "--data", str(data),
                                 "--max-new-tokens", "6", "--out", str(out), "--batch-size", "16"])
    assert result.exit_code == 0, (result.output, result.exception)
    records = [json.loads(line) for line in open(out / "judgebench.judgments.jsonl")]
    assert len(records) == 8 and {r["category"] for r in records} == {"knowledge", "reasoning", "math", "coding"}
    metrics = json.loads((out / "judgebench.results.json").read_text())["metrics"]
    assert metrics["n_pairs"] == 4 and metrics["complete"] is False and set(metrics["categories"]) == {
        "knowledge", "reasoning", "math", "coding"}
    scored = runner.invoke(app, ["score", "judgebench", str(out / "judgebench.judgments.jsonl")])
    assert scored.exit_code == 0, scored.output
    assert json.loads(scored.output) == metrics


@pytest.mark.slow
def test_eval_run_with_limit_writes_an_incomplete_result_naming_what_is_missing(tmp_path, tiny_model_dir):
    data = write_judgebench_fixture(tmp_path / "jb.jsonl")
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", "judgebench", "--model", str(tiny_model_dir), "--data", str(data),
                                 "--limit", "2", "--max-new-tokens", "4", "--out", str(out)])
    assert result.exit_code == 0, (result.output, result.exception)
    document = json.loads((out / "judgebench.results.json").read_text())
    assert document["complete"] is False and document["metrics"]["complete"] is False
    missing = document["metrics"]["missing"]
    assert missing[0] == "--limit 2" and "gpt-4o-2024-05-13: 2 of 350 pairs" in missing
    assert sum(m.startswith("category ") for m in missing) == 2  # two of the four categories were not judged
