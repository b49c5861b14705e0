"""The benchmark registry: one table that the generic evaluation code reads, and the contract every scorer keeps
(``complete`` and ``missing`` beside the metrics, so a partial run can always say what it lacks)."""

from __future__ import annotations

import pytest

from thinkj.errors import ThinkJError, UnknownNameError
from thinkj.evaluation.registry import BENCHMARKS, get_benchmark, load_benchmark, score


def _pair_records(**fields):
    return [{"item_id": "1", "order": "original", "gold": "a", "verdict": "a", **fields},
            {"item_id": "1", "order": "swapped", "gold": "b", "verdict": "a", **fields}]


MINIMAL_RECORDS = {
    "rewardbench": _pair_records(subset="alpacaeval-easy"),
    "rmbench": _pair_records(domain="chat", chosen_style=0, rejected_style=1),
    "autoj": _pair_records(scenario="chitchat"),
    "synthetic": _pair_records(subset="facts"),
    "judgebench": _pair_records(category="math", source="livebench-math", response_model="gpt-4o-2024-05-13"),
    "rewardbench2": [{"item_id": "1", "subset": "Math", "mode": "four", "placement": 2, "choice": "C"}],
}


def test_every_registered_benchmark_has_records_here():
    assert set(MINIMAL_RECORDS) == set(BENCHMARKS)


@pytest.mark.parametrize("name", sorted(MINIMAL_RECORDS))
def test_every_scorer_reports_complete_and_what_is_missing(name):
    metrics = score(name, MINIMAL_RECORDS[name])
    assert isinstance(metrics["missing"], list) and all(isinstance(m, str) for m in metrics["missing"])
    assert metrics["complete"] is (not metrics["missing"])
    # one comparison is never a whole benchmark, except for a PreferencePair set, which has no official size
    assert metrics["complete"] is (name == "synthetic")


def test_unknown_benchmark_names_the_registered_ones():
    with pytest.raises(UnknownNameError, match="unknown benchmark 'rewardbench3'.*judgebench"):
        get_benchmark("rewardbench3")
    with pytest.raises(UnknownNameError):
        score("rewardbench3", MINIMAL_RECORDS["rewardbench"])


def test_items_that_are_not_pairs_have_their_own_runner():
    rb2 = get_benchmark("rewardbench2")
    assert not rb2.pairs and rb2.run is not None and "rb2_four_v1" in rb2.templates
    with pytest.raises(ThinkJError, match="not pairs"):
        load_benchmark("rewardbench2", "unused.jsonl")
    assert all(get_benchmark(n).pairs and get_benchmark(n).run is None for n in BENCHMARKS if n != "rewardbench2")
