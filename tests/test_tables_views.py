"""`thinkj tables rewardbench2` and `thinkj tables judgebench`: our runs only, from results documents built with the
real scorers (score_rewardbench2, score_judgebench) on hand-made judgment records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from thinkj.evaluation.judgebench import PAIRS_PER_MODEL, score_judgebench
from thinkj.evaluation.rewardbench2 import SUBSET_COUNTS, score_rewardbench2
from thinkj.records import RecordError
from thinkj.tables import SPECS, render_table
from thinkj.tables.cli import app
from thinkj.tables.results import collect_results

FOUR_WAY = ("Factuality", "Precise IF", "Math", "Safety", "Focus")


def document(benchmark: str, metrics: dict, time: str = "2026-03-01T00:00:00Z", **tags) -> dict:
    """A results document as `thinkj eval run` writes it: complete at the top, metrics, tags, provenance."""
    return {"benchmark": benchmark, "complete": metrics["complete"], "metrics": metrics, "tags": tags,
            "provenance": {"time": time, "model_path": "/models/judge", "data": {"limit": None}}}


def write(folder: Path, name: str, doc: dict) -> Path:
    path = folder / f"{name}.results.json"
    path.write_text(json.dumps(doc))
    return path


def row_of(markdown: str, *labels: str) -> list[str]:
    for line in markdown.splitlines():
        parts = [p.strip() for p in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and parts[:len(labels)] == list(labels):
            return parts[len(labels):]
    raise AssertionError(f"row {labels} not in\n{markdown}")


def notes_of(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("* ")]


# ------------------------------------------------------------------------------------------------ RewardBench 2

def four_way(item: str, subset: str, right: bool) -> dict:
    return {"item_id": item, "subset": subset, "mode": "four", "placement": 0, "choice": "A" if right else "B"}


def ratings(item: str, values: list[int], k: int) -> list[dict]:
    return [{"item_id": item, "subset": "Ties", "mode": "ratings", "response": i, "n_responses": len(values),
             "num_correct": k, "rating": r} for i, r in enumerate(values)]


def full_rewardbench2() -> list[dict]:
    """Every prompt of the test split: every 4th best-of-4 item judged wrong; every Ties prompt accurate."""
    records = [four_way(f"{s}-{i}", s, right=i % 4 != 0) for s in FOUR_WAY for i in range(SUBSET_COUNTS[s])]
    for n in range(SUBSET_COUNTS["Ties"] // 2):
        records += ratings(f"ref:{n}", [8, 5, 3], 1) + ratings(f"tied:{n}", [9, 7, 4, 2], 2)
    return records


def partial_rewardbench2() -> list[dict]:
    return [four_way("1", "Factuality", True), four_way("2", "Factuality", False), four_way("3", "Math", True),
            *ratings("ref:1", [8, 5, 3], 1), *ratings("tied:1", [9, 7, 4, 2], 2)]


def round_robin_focus() -> list[dict]:
    """One Focus item by our pairwise prompt on every pair of its answers (not an official mode)."""
    verdicts = [(0, 1, "a"), (1, 0, "b"), (0, 2, "tie"), (2, 0, "b"), (0, 3, None), (3, 0, "b"),
                (1, 2, "a"), (2, 1, "a"), (1, 3, "a"), (3, 1, "b"), (2, 3, "a"), (3, 2, "a")]
    return [{"item_id": "9", "subset": "Focus", "mode": "round_robin", "order": "original", "shown_a": a, "shown_b": b,
             "n_responses": 4, "num_correct": 1, "verdict": v} for a, b, v in verdicts]


def test_rewardbench2_view_six_subsets_overall_and_marks(tmp_path):
    full = score_rewardbench2(full_rewardbench2())
    assert full["complete"] is True and full["official"] is True
    ties = 100 * (1.0 + 0.01 * math.tanh(0.5))  # every term 1, plus the tanh margin: above 100, as upstream
    exact = {s: 100 * (SUBSET_COUNTS[s] - math.ceil(SUBSET_COUNTS[s] / 4)) / SUBSET_COUNTS[s] for s in FOUR_WAY}
    right = {s: round(v, 2) for s, v in exact.items()}  # the scorer reports two decimals, the table one
    assert full["subsets"]["Ties"] == pytest.approx(ties, abs=0.01) and full["subsets"]["Ties"] > 100
    write(tmp_path, "full", document("rewardbench2", full, model="Qwen2.5-7B-Instruct", method="online"))
    partial = score_rewardbench2(partial_rewardbench2())
    write(tmp_path, "partial", document("rewardbench2", partial, model="Qwen2.5-7B-Instruct", method="base"))
    robin = score_rewardbench2(round_robin_focus())
    assert robin["official"] is False
    write(tmp_path, "robin", document("rewardbench2", robin, model="tiny"))
    write(tmp_path, "other", document("judgebench", score_judgebench(judgebench_records(4)), model="tiny"))

    rendered = render_table("rewardbench2", collect_results([tmp_path]), tmp_path / "out", formats=("md", "latex"))
    md = rendered.markdown
    assert "Our runs only: the Think-J paper has no RewardBench 2 table" in md
    assert "| model | method | Factuality | Precise IF | Math | Safety | Focus | Ties | Overall |" in md
    # rows: one per (model, method) among the RewardBench 2 results, sorted; the JudgeBench result is not one
    assert rendered.grid.rows == [("Qwen2.5-7B-Instruct", "base"), ("Qwen2.5-7B-Instruct", "online"), ("tiny", "")]
    overall = (sum(exact.values()) + ties) / 6
    assert row_of(md, "Qwen2.5-7B-Instruct", "online") == [f"{right[s]:.1f}" for s in FOUR_WAY] + [f"{ties:.1f}",
                                                                                                  f"{overall:.1f}"]
    base = row_of(md, "Qwen2.5-7B-Instruct", "base")
    assert base == ["50.0*", "—", "100.0*", "—", "—", f"{ties:.1f}*", f"{partial['overall']:.1f}*"]
    assert row_of(md, "tiny", "") == ["—", "—", "—", "—", "100.0*", "—", f"{100 / 6:.1f}*"]

    notes = notes_of(md)
    assert "Marked (*)" in md and len(notes) == 4 + 2
    robin_note = next(n for n in notes if n.startswith("* tiny [Focus]:"))
    assert "not official (mode round_robin)" in robin_note and "robin.results.json" in robin_note
    # an incomplete run says what is missing (metrics.missing) when the scorer records it, else just "incomplete"
    expected = "incomplete: " + "; ".join(partial["missing"]) if partial.get("missing") else "incomplete ("
    assert all(expected in n for n in notes if "[Ties]" in n and "Qwen" in n)
    assert not any("online" in n for n in notes)  # the complete, official run is not marked

    assert "Our runs only" in rendered.latex and r"\par{\footnotesize Marked (*)" in rendered.latex
    assert (tmp_path / "out" / "tablerewardbench2_rewardbench2.png").exists()


def test_rewardbench2_older_file_without_missing_is_marked_from_complete_alone(tmp_path):
    metrics = score_rewardbench2(partial_rewardbench2())
    metrics.pop("missing", None)  # written before the scorer listed what is missing
    write(tmp_path, "old", document("rewardbench2", metrics, model="tiny"))
    md = render_table("rewardbench2", collect_results([tmp_path])).markdown
    assert row_of(md, "tiny", "")[0] == "50.0*"
    assert all(": incomplete (" in n for n in notes_of(md))


def test_rewardbench2_limit_run_is_marked_with_the_limit(tmp_path):
    metrics = score_rewardbench2(full_rewardbench2())
    doc = document("rewardbench2", metrics, model="tiny")
    doc["complete"], doc["provenance"]["data"]["limit"] = False, 1865  # a --limit run is never complete
    write(tmp_path, "limited", doc)
    md = render_table("rewardbench2", collect_results([tmp_path])).markdown
    assert row_of(md, "tiny", "")[0] == f"{metrics['subsets']['Factuality']:.1f}*"
    assert len(notes_of(md)) == 7 and all("incomplete: --limit 1865" in n for n in notes_of(md))


def test_rewardbench2_ties_outside_its_range_is_refused(tmp_path):
    metrics = score_rewardbench2(full_rewardbench2())
    metrics["subsets"]["Ties"] = 102.0
    write(tmp_path, "bad", document("rewardbench2", metrics, model="tiny"))
    with pytest.raises(RecordError, match=r"bad\.results\.json, field 'metrics\.subsets\.Ties': 102.0 is not in \[-1, 101\]"):
        render_table("rewardbench2", collect_results([tmp_path]))


# ---------------------------------------------------------------------------------------------------- JudgeBench

CATEGORY_OF = ("knowledge", "reasoning", "math", "coding")


def judgebench_records(n_pairs: int, wrong_every: int = 0) -> list[dict]:
    """Both orders of ``n_pairs`` GPT-4o pairs, categories in turn; every ``wrong_every``-th pair judged wrong twice."""
    records = []
    for k in range(n_pairs):
        base = {"benchmark": "judgebench", "item_id": f"p{k}", "category": CATEGORY_OF[k % 4],
                "response_model": "gpt-4o-2024-05-13"}
        wrong = wrong_every and k % wrong_every == 0
        records += [{**base, "order": "original", "gold": "a", "verdict": "b" if wrong else "a"},
                    {**base, "order": "swapped", "gold": "b", "verdict": "a" if wrong else "b"}]
    return records


def test_judgebench_view_categories_overall_and_incomplete_mark(tmp_path):
    full = score_judgebench(judgebench_records(PAIRS_PER_MODEL["gpt-4o-2024-05-13"], wrong_every=5))
    assert full["complete"] is True
    write(tmp_path, "full", document("judgebench", full, model="Think-J-Qwen-2.5-32B"))
    partial = score_judgebench(judgebench_records(3))  # no coding pair, 3 of 350
    write(tmp_path, "partial", document("judgebench", partial, model="Think-J-Qwen-2.5-32B", method="base"))
    rendered = render_table("judgebench", collect_results([tmp_path]), tmp_path / "out")
    md = rendered.markdown
    assert "Our runs only: the Think-J paper has no JudgeBench table" in md
    assert "| model | method | Knowledge | Reasoning | Math | Coding | Overall |" in md
    # every 5th pair wrong: k % 5 == 0 falls on each category once in 20 pairs
    full_row = row_of(md, "Think-J-Qwen-2.5-32B", "")
    assert full_row == [f"{full['categories'][c]:.1f}" for c in CATEGORY_OF] + ["80.0"]
    assert row_of(md, "Think-J-Qwen-2.5-32B", "base") == ["100.0*", "100.0*", "100.0*", "—", "100.0*"]
    notes = notes_of(md)
    assert len(notes) == 4 and all("partial.results.json" in n for n in notes)
    expected = "incomplete: " + "; ".join(partial["missing"]) if partial.get("missing") else "incomplete ("
    assert all(expected in n for n in notes)
    assert (tmp_path / "out" / "tablejudgebench_judgebench.png").exists()

    older = tmp_path / "older"
    older.mkdir()
    partial.pop("missing", None)
    write(older, "partial", document("judgebench", partial, model="judge"))
    assert all(": incomplete (" in n for n in notes_of(render_table("judgebench", collect_results([older])).markdown))


def test_views_from_the_command_line_and_listed(tmp_path):
    write(tmp_path, "jb", document("judgebench", score_judgebench(judgebench_records(8)), model="judge"))
    result = CliRunner().invoke(app, ["judgebench", "rewardbench2", "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Table (judgebench)" in result.output and "100.0*" in result.output
    assert "Table (rewardbench2)" in result.output and "Filled from 0 results file(s)" in result.output
    listing = CliRunner().invoke(app, ["--list"]).output
    assert "rewardbench2" in listing and "judgebench" in listing
    assert not SPECS["rewardbench2"].paper and not SPECS["judgebench"].paper


def test_view_columns_are_the_scorers_own_names():
    from thinkj.evaluation.judgebench import CATEGORIES
    from thinkj.evaluation.rewardbench2 import SUBSETS
    from thinkj.tables.layouts import JUDGEBENCH_CATEGORIES, RB2_SUBSETS

    assert RB2_SUBSETS == SUBSETS and JUDGEBENCH_CATEGORIES == tuple(CATEGORIES)
