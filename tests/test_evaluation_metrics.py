"""Benchmark metrics against hand-worked cases (every expected number is worked out in the comments)."""

from __future__ import annotations

import json

import pytest

from thinkj.evaluation.judgment_records import load_records, trials
from thinkj.evaluation.registry import read_judgments, score
from thinkj.evaluation.scoring_rules import (
    AUTOJ_GROUP_OF,
    REWARDBENCH_EXAMPLE_COUNTS,
    REWARDBENCH_ROWS,
    REWARDBENCH_SECTION_OF,
    REWARDBENCH_SECTIONS,
)
from thinkj.records import RecordError

FLIP = {"a": "b", "b": "a", "tie": "tie"}


def both(item, gold_original, original, swapped, **fields):
    """Two records of one comparison; verdicts are positions as displayed in each order."""
    return [{"item_id": item, "order": "original", "gold": gold_original, "verdict": original, **fields},
            {"item_id": item, "order": "swapped", "gold": FLIP[gold_original], "verdict": swapped, **fields}]


# ------------------------------------------------------------------------------------------ RewardBench

def test_rewardbench_spec_matches_the_official_tables():
    assert sum(len(s) for s in REWARDBENCH_SECTIONS.values()) == 23 == len(REWARDBENCH_SECTION_OF)
    assert set(REWARDBENCH_EXAMPLE_COUNTS) == set(REWARDBENCH_SECTION_OF)
    # math-prm is weighted as much as the six pooled HumanEvalPack subsets together
    code = sum(REWARDBENCH_EXAMPLE_COUNTS[s] for s in REWARDBENCH_SECTIONS["Reasoning"] if s.startswith("hep-"))
    assert REWARDBENCH_EXAMPLE_COUNTS["math-prm"] == code == 984


def rewardbench_case():
    return (both("1", "a", "a", "b", subset="alpacaeval-easy")  # right, right
            + both("2", "a", "b", "b", subset="alpacaeval-easy")  # wrong, right
            + both("3", "a", None, "b", subset="mt-bench-easy")  # unparsed, right
            + both("4", "a", "a", "b", subset="math-prm")  # right, right
            + both("5", "a", "b", "a", subset="hep-python"))  # wrong, wrong


def test_rewardbench_single_protocol_weights_subsets_by_official_counts():
    m = score("rewardbench", rewardbench_case())
    assert m["subsets"] == {"alpacaeval-easy": 75.0, "hep-python": 0.0, "math-prm": 100.0, "mt-bench-easy": 50.0}
    # Chat = (75 * 100 + 50 * 28) / (100 + 28) = 8900 / 128 = 69.53125
    assert m["sections"]["Chat"] == 69.53
    # Reasoning = (100 * 984 + 0 * 164) / (984 + 164) = 85.714...
    assert m["sections"]["Reasoning"] == 85.71
    assert m["sections_present"] == ["Chat", "Reasoning"]
    # Officially a missing section counts as 0: (69.53125 + 85.714 + 0 + 0) / 4 = 38.81 (the old mean of the
    # sections present said 77.62 -- a two-section run passing for a full one).
    assert m["overall"] == round((8900 / 128 + 98400 / 1148) / 4, 2) == 38.81
    assert m["complete"] is False and m["missing"][:2] == ["section Chat Hard", "section Safety"]
    assert "alpacaeval-easy: 2 of 100 items" in m["missing"]
    assert m["parse_failure"] == 10.0  # 1 of 10 records
    assert m["position_consistency"] == 60.0  # comparisons 1, 4, 5 agree with themselves; 2 flips, 3 unparsed


def test_rewardbench_pair_protocol_and_unparsed_half():
    m = score("rewardbench", rewardbench_case(), protocol="pair")
    assert m["subsets"] == {"alpacaeval-easy": 50.0, "hep-python": 0.0, "math-prm": 100.0, "mt-bench-easy": 0.0}
    assert m["sections"]["Chat"] == round(100 * (0.5 * 100) / 128, 2)  # 39.06
    half = score("rewardbench", rewardbench_case(), unparsed_half=True)
    assert half["subsets"]["mt-bench-easy"] == 75.0  # (0.5 + 1) / 2
    assert score("rewardbench", rewardbench_case(), "pair", True)["subsets"]["mt-bench-easy"] == 50.0  # min(0.5, 1)


def test_unparsed_half_gives_a_tie_half_as_rewardbench_does():
    # scripts/run_generative.py: a winner that is neither A nor B returns 0.5 -- a tie included (the old code: 0).
    records = both("1", "a", "tie", "tie", subset="alpacaeval-easy") + both("2", "a", "a", "b", subset="alpacaeval-easy")
    assert score("rewardbench", records)["subsets"]["alpacaeval-easy"] == 50.0  # (0 + 0 + 1 + 1) / 4
    assert score("rewardbench", records, unparsed_half=True)["subsets"]["alpacaeval-easy"] == 75.0  # (.5+.5+1+1)/4


def test_safety_weights_are_the_official_row_counts():
    # rewardbench/constants.py EXAMPLE_COUNTS: xstest-should-refuse 154, xstest-should-respond 250.
    assert REWARDBENCH_EXAMPLE_COUNTS["xstest-should-refuse"] == 154
    assert REWARDBENCH_EXAMPLE_COUNTS["xstest-should-respond"] == 250
    records = both("1", "a", "a", "b", subset="xstest-should-refuse") + both("2", "a", "b", "a", subset="xstest-should-respond")
    # Safety = (100 * 154 + 0 * 250) / (154 + 250) = 38.12 (the swapped weights gave 61.88)
    assert score("rewardbench", records)["sections"]["Safety"] == 38.12


def test_rewardbench_full_counts_are_complete_and_a_missing_item_is_not():
    records = [r for subset, rows in REWARDBENCH_ROWS.items() for k in range(rows)
               for r in both(f"{subset}:{k}", "a", "a", "b", subset=subset)]
    m = score("rewardbench", records)
    assert m["complete"] is True and m["missing"] == [] and m["overall"] == 100.0 and len(records) == 2 * 2985
    m = score("rewardbench", records[2:])
    assert m["complete"] is False and m["missing"] == ["alpacaeval-easy: 99 of 100 items"]


def test_rewardbench_math_and_pooled_code_weigh_equally():
    records = both("m", "a", "a", "b", subset="math-prm")
    records += [r for k, s in enumerate(REWARDBENCH_SECTIONS["Reasoning"][1:]) for r in both(f"c{k}", "a", "b", "a", subset=s)]
    assert score("rewardbench", records)["sections"]["Reasoning"] == 50.0  # math all right, all six code subsets wrong


def test_rewardbench_overall_is_the_mean_of_four_sections_and_ties_are_wrong():
    records = (both("1", "a", "a", "b", subset="alpacaeval-hard")  # Chat 100
               + both("2", "a", "tie", "tie", subset="llmbar-natural")  # Chat Hard 0: a tie is never the gold
               + both("3", "a", "a", "a", subset="donotanswer")  # Safety 50
               + both("4", "a", "a", "b", subset="hep-go")  # Reasoning 100
               + both("5", "a", "a", "b", subset="anthropic_helpful"))  # a prior set: reported, not in a section
    m = score("rewardbench", records)
    assert m["sections"] == {"Chat": 100.0, "Chat Hard": 0.0, "Safety": 50.0, "Reasoning": 100.0}
    assert m["overall"] == 62.5 and m["subsets"]["anthropic_helpful"] == 100.0


# ------------------------------------------------------------------------------------------ RM-Bench

def rm_item(domain, item, right):
    """One RM-Bench item: 9 comparisons, both orders; ``right(i, j)`` says whether cell (i, j) is judged right."""
    records = []
    for i in range(3):
        for j in range(3):
            verdicts = ("a", "b") if right(i, j) else ("b", "a")
            records += both(f"{domain}:{item}", "a", *verdicts, domain=domain, chosen_style=i, rejected_style=j)
    return records


def test_rmbench_cells_hard_normal_easy_and_pooled_safety():
    records = (rm_item("chat", 1, lambda i, j: i >= j)  # hard cells wrong, the rest right
               + rm_item("safety-refuse", 2, lambda i, j: True)
               + rm_item("safety-response", 3, lambda i, j: False))  # safety pools both: every cell 50
    m = score("rmbench", records)
    assert m["domains"] == {"chat": round(100 * 6 / 9, 2), "safety": 50.0}
    assert m["cells"]["chat"] == [[100.0, 0.0, 0.0], [100.0, 100.0, 0.0], [100.0, 100.0, 100.0]]
    assert m["cells"]["safety"] == [[50.0] * 3] * 3
    # over the four reported domains, math and code missing count 0: hard (0 + .5) / 4, normal (1 + .5) / 4
    assert (m["hard"], m["normal"], m["easy"]) == (12.5, 37.5, 37.5)
    assert m["overall"] == round(100 * (6 / 9 + 0.5) / 4, 2) == 29.17  # the old mean of those present: 58.33
    assert m["complete"] is False and m["missing"][:2] == ["domain math", "domain code"]
    assert m["domains_present"] == ["chat", "safety"]
    assert m["position_consistency"] == 100.0 and m["n_comparisons"] == 27


def test_rmbench_pair_protocol_needs_both_orders_right():
    records = rm_item("code", 7, lambda i, j: True)
    records[1]["verdict"] = "a"  # cell (0, 0): the swapped judgment (gold b) now wrong
    assert score("rmbench", records)["cells"]["code"][0][0] == 50.0
    pair = score("rmbench", records, protocol="pair")
    assert pair["cells"]["code"][0][0] == 0.0 and pair["normal"] == round(100 * 2 / 3 / 4, 2)
    with pytest.raises(ValueError, match="both orders"):
        trials(records[:-1], "pair")


# ------------------------------------------------------------------------------------------ Auto-J

def autoj_case():
    return (both("1", "a", "a", "b", scenario="code_generation")  # a then a: both equal the label
            + both("2", "a", "a", "a", scenario="code_generation")  # a then b: wrong, inconsistent
            + both("3", "tie", "a", "a", scenario="chitchat")  # a then b: wrong officially; tie-on-flip right
            + both("4", "tie", "tie", "tie", scenario="chitchat")  # tie twice: right, consistent
            + both("5", "b", None, "a", scenario="ranking")  # unparsed order: wrong
            + both("6", "b", "b", "a", scenario="ranking"))  # b then b: right


def test_autoj_agreement_is_the_official_correct_both():
    m = score("autoj", autoj_case())
    assert m["agreement"] == 50.0  # items 1, 4, 6 (pairwise_eval.py correct_both)
    assert m["agreement_rule"] == "auto-j pairwise: both orders equal the label (pairwise_eval.py correct_both)"
    assert m["agreement_tie_on_flip"] == round(100 * 4 / 6, 2)  # items 1, 3, 4, 6
    assert m["consistency"] == 50.0  # items 1, 4, 6
    assert m["scenarios"] == {"Code": 50.0, "General Communication": 50.0, "NLP Tasks": 50.0}
    assert m["n_items"] == 6 and m["parse_failure"] == round(100 / 12, 2)
    assert m["complete"] is False and m["missing"] == ["6 of 1392 items"]
    assert score("autoj", autoj_case(), unparsed_half=True)["agreement"] == 50.0  # not part of Auto-J's rule


def test_autoj_a_judge_that_always_says_a_scores_zero():
    # Shown (a) in both orders = response 1, then response 2: never both orders equal to the label. The old
    # tie-on-flip agreement gave it every tie item (1 of 3 here, 26.8 on the real set).
    records = [{**r, "scenario": "chitchat"} for r in both("1", "a", "a", "a") + both("2", "b", "a", "a")
               + both("3", "tie", "a", "a")]
    m = score("autoj", records)
    assert m["agreement"] == 0.0 and m["agreement_tie_on_flip"] == 33.33 and m["consistency"] == 0.0


def test_autoj_never_tie_judge_is_bounded_by_73_2_on_the_real_set():
    from thinkj.evaluation.loaders import load_autoj
    from thinkj.paths import shared_data_dir

    path = shared_data_dir() / "auto-j" / "testdata_pairwise.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} absent (the real Auto-J test set lives in ../shared/data)")
    pairs = load_autoj(path)
    # A judge that is right on every non-tie label in both orders and never says tie.
    records = [r for p in pairs for r in both(p.id, p.label, p.label if p.label != "tie" else "a",
                                               FLIP[p.label] if p.label != "tie" else "a", scenario=p.meta["record"]["scenario"])]
    m = score("autoj", records)
    assert sum(p.label == "tie" for p in pairs) == 373 and len(pairs) == 1392
    assert m["agreement"] == round(100 * (1392 - 373) / 1392, 2) == 73.2 and m["complete"] is True


def test_autoj_scenarios_cover_the_58_of_the_test_set():
    assert len(AUTOJ_GROUP_OF) == 58 and len(set(AUTOJ_GROUP_OF.values())) == 8


# ------------------------------------------------------------------------------------------ synthetic and I/O

def test_synthetic_accuracy_and_consistency():
    records = both("x", "b", "b", "a", subset="synthetic") + both("y", "a", "a", "a", subset="synthetic")
    m = score("synthetic", records)
    assert m["accuracy"] == 75.0 and m["position_consistency"] == 50.0
    assert score("synthetic", records, protocol="pair")["accuracy"] == 50.0


def test_bad_record_names_file_line_and_field(tmp_path):
    path = tmp_path / "j.jsonl"
    rows = both("1", "a", "a", "b", subset="hep-go")
    rows[1]["verdict"] = "c"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RecordError, match=r"j\.jsonl, line 2, field 'verdict'"):
        load_records(path)
    rows[1]["verdict"], rows[1]["benchmark"] = "b", "autoj"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(RecordError, match="line 2, field 'benchmark'"):
        read_judgments("rewardbench", path)


def test_one_order_unknown_domain_and_bad_style_are_refused(tmp_path):
    path = tmp_path / "rm.jsonl"
    rows = both("chat:1", "a", "a", "b", domain="chat", chosen_style=0, rejected_style=1)
    path.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(RecordError, match=r"rm\.jsonl, line 1, field 'order': .*only its original order"):
        read_judgments("rmbench", path)
    for field, value in (("domain", None), ("domain", "poetry"), ("chosen_style", 3), ("rejected_style", -1)):
        bad = [dict(r) for r in rows]
        bad[1][field] = value
        path.write_text("\n".join(json.dumps(r) for r in bad) + "\n")
        with pytest.raises(RecordError, match=f"line 2, field '{field}'"):
            read_judgments("rmbench", path)
        with pytest.raises(RecordError, match=f"field '{field}'"):
            score("rmbench", bad)
    with pytest.raises(RecordError, match="only its swapped order"):
        score("synthetic", [{**rows[1], "subset": "s"}])


def test_truncated_and_too_long_are_counted_apart_from_parse_failures():
    records = (both("1", "a", None, "b", subset="s") + both("2", "a", None, None, subset="s")
               + both("3", "a", "a", "b", subset="s"))
    records[0]["truncated"] = True  # <think> cut off by the budget
    records[2]["too_long"] = records[3]["too_long"] = True  # prompt + budget over the context: never generated
    m = score("synthetic", records)
    assert (m["truncated"], m["parse_failure"], m["n_too_long"]) == (round(100 / 6, 2), 0.0, 2)
    assert m["accuracy"] == 50.0  # 3 of 6 judgments right; the too-long item scores as no verdict
    assert m["complete"] is False and m["missing"] == ["1 item(s) too long for the model's context (not judged)"]


def test_eval_score_names_the_rule_of_every_number_and_completeness(tmp_path):
    from typer.testing import CliRunner

    from thinkj.evaluation.cli import app

    path = tmp_path / "autoj.judgments.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in autoj_case()) + "\n")
    result = CliRunner().invoke(app, ["score", "autoj", str(path), "--protocol", "pair"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["agreement_rule"] == "auto-j pairwise: both orders equal the label (pairwise_eval.py correct_both)"
    assert out["protocol"] == "pair" and out["protocol_rule"].startswith("pair: ")
    assert out["complete"] is False and out["missing"] == ["6 of 1392 items"]
    for bench, records in (("rewardbench", rewardbench_case()), ("synthetic", both("x", "a", "a", "b", subset="s")),
                           ("rmbench", rm_item("chat", 1, lambda i, j: True))):
        other = score(bench, records)
        assert not [k for k, v in other.items() if isinstance(v, (int, float, dict, list)) and not isinstance(v, bool)
                    and not k.startswith("n_") and not k.endswith("_present") and k != "missing" and f"{k}_rule" not in other]
    numbers = [k for k, v in out.items() if isinstance(v, (int, float, dict)) and not isinstance(v, bool)
               and not k.startswith("n_")]
    assert all(f"{k}_rule" in out for k in numbers), [k for k in numbers if f"{k}_rule" not in out]
