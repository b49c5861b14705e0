"""Benchmark loaders and metrics on the real RM-Bench and Auto-J files, plus bad-row errors."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from conftest import shared_data

from thinkj.evaluation.registry import load_benchmark, score
from thinkj.evaluation.rows import take_items
from thinkj.evaluation.scoring_rules import AUTOJ_GROUP_OF
from thinkj.records import RecordError


def records_from(pairs, judge):
    """Judgment records of a rule-based judge: ``judge(view_label)`` -> verdict, for both orders."""
    out = []
    for pair in pairs:
        for order, view in (("original", pair), ("swapped", pair.swapped())):
            out.append({"item_id": pair.meta["record"]["item_id"], "order": order, "gold": view.label,
                        "verdict": judge(view.label), **pair.meta["record"]})
    return out


def test_rmbench_real_files_load_and_score():
    pairs = load_benchmark("rmbench", shared_data("rm-bench"))
    items = {p.meta["record"]["item_id"] for p in pairs}
    assert len(items) == 129 + 228 + 284 + 157 and len(pairs) == 9 * len(items)
    domains = Counter(p.meta["record"]["domain"] for p in pairs)
    assert domains == {"chat": 9 * 129, "code": 9 * 228, "safety-refuse": 9 * 284, "safety-response": 9 * 157}
    styles = Counter((p.meta["record"]["chosen_style"], p.meta["record"]["rejected_style"]) for p in pairs)
    assert len(styles) == 9 and set(styles.values()) == {len(items)}
    assert all(p.label == "a" for p in pairs)

    oracle = score("rmbench", records_from(pairs, lambda gold: gold))
    # no math file: the official overall counts the missing domain as 0, and the result says it is incomplete
    assert oracle["overall"] == 75.0 and oracle["domains_present"] == ["chat", "code", "safety"]
    assert oracle["domains"] == {"chat": 100.0, "code": 100.0, "safety": 100.0}
    assert oracle["complete"] is False and oracle["missing"] == ["domain math"]
    always_a = records_from(pairs, lambda gold: "a")  # right in every original order, wrong in every swapped one
    single, pair = score("rmbench", always_a), score("rmbench", always_a, protocol="pair")
    assert single["hard"] == single["normal"] == single["easy"] == single["overall"] == 37.5  # 3 x 50 / 4
    assert pair["overall"] == 0.0 and single["position_consistency"] == 0.0


def test_autoj_real_file_loads_and_scores():
    pairs = load_benchmark("autoj", shared_data("auto-j", "testdata_pairwise.jsonl"))
    assert len(pairs) == 1392
    assert Counter(p.label for p in pairs) == {"a": 520, "b": 499, "tie": 373}
    assert {p.meta["record"]["scenario"] for p in pairs} <= set(AUTOJ_GROUP_OF)
    always_a = score("autoj", records_from(pairs, lambda gold: "a"))
    # "a" in both orders names different responses: never both orders right (Auto-J's correct_both); the
    # tie-on-flip reading turns every item into a tie and is right on the 373 ties
    assert always_a["agreement"] == 0.0 and always_a["agreement_tie_on_flip"] == round(100 * 373 / 1392, 2) == 26.8
    assert always_a["consistency"] == 0.0 and len(always_a["scenarios"]) == 8
    oracle = score("autoj", records_from(pairs, lambda gold: gold))
    assert oracle["agreement"] == oracle["agreement_tie_on_flip"] == oracle["consistency"] == 100.0
    assert oracle["complete"] is True


def test_limit_spreads_items_over_groups():
    pairs = load_benchmark("autoj", shared_data("auto-j", "testdata_pairwise.jsonl"), limit=58)
    assert len({p.meta["record"]["scenario"] for p in pairs}) == 58  # one item per scenario
    rm = take_items(load_benchmark("rmbench", shared_data("rm-bench")), 4, "domain")
    assert {p.meta["record"]["domain"] for p in rm} == {"chat", "code", "safety-refuse", "safety-response"}


def test_bad_rows_name_file_row_and_field(tmp_path):
    bad = tmp_path / "chat_filtered.json"
    bad.write_text(json.dumps([{"id": 1, "prompt": "q", "chosen": ["x", "y", "z"], "rejected": ["x", "y", "z"]},
                               {"id": 2, "prompt": "q", "chosen": ["x", "y"], "rejected": ["x", "y", "z"]}]))
    with pytest.raises(RecordError, match=r"chat_filtered\.json, line 2, field 'chosen'"):
        load_benchmark("rmbench", bad)
    other = tmp_path / "misc.json"
    other.write_text(json.dumps([{"id": 1, "prompt": "q", "chosen": ["x"] * 3, "rejected": ["y"] * 3}]))
    with pytest.raises(RecordError, match="field 'domain'"):
        load_benchmark("rmbench", other)
    autoj = tmp_path / "autoj.jsonl"
    autoj.write_text(json.dumps({"scenario": "chitchat", "label": 3, "prompt": "q", "response 1": "x",
                                 "response 2": "y"}) + "\n")
    with pytest.raises(RecordError, match=r"autoj\.jsonl, line 1, field 'label'"):
        load_benchmark("autoj", autoj)
    rb = tmp_path / "rb.jsonl"
    rb.write_text(json.dumps({"id": 1, "prompt": "q", "chosen": "x", "rejected": 5, "subset": "hep-go"}) + "\n")
    with pytest.raises(RecordError, match="line 1, field 'rejected'"):
        load_benchmark("rewardbench", rb)


def test_rewardbench_parquet_in_hub_schema(tmp_path):
    """The hub's RewardBench files are parquet with extra columns; a local copy loads the same way."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"prompt": "Name a fruit.", "chosen": "apple", "chosen_model": "m1", "rejected": "tiger",
             "rejected_model": "m2", "subset": subset, "id": k} for k, subset in enumerate(["hep-go", "math-prm"])]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "filtered.parquet")
    pairs = load_benchmark("rewardbench", tmp_path)
    assert [p.meta["record"] for p in pairs] == [{"item_id": "0", "subset": "hep-go"}, {"item_id": "1", "subset": "math-prm"}]
    assert all(p.label == "a" and p.response_a == "apple" and p.messages[-1]["role"] == "user" for p in pairs)


def test_datasets_path_reads_the_same_items_as_the_local_reader(tmp_path):
    """Normal use reads by hub name or URL through `datasets.load_dataset`; a file:// URL exercises that path offline."""
    rows = open(shared_data("auto-j", "testdata_pairwise.jsonl"), encoding="utf-8").readlines()[:20]
    local = tmp_path / "autoj.jsonl"
    local.write_text("".join(rows), encoding="utf-8")
    via_datasets = load_benchmark("autoj", f"file://{local}")
    assert len(via_datasets) == 20 and via_datasets == load_benchmark("autoj", local)
