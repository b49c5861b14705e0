from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinkj.prompts import AnswerFormat, get_template, judge_output, scores_sentence
from thinkj.verdict_parser import parse_verdict

GOOD = ("<think>\nResponse (a) answers the question.\n</think>\n"
        "Therefore, Response (a) is better, and the preference strength is [[2]].")

# (text, strict choice, strength, well-formed, reason fragment)
STRICT_CASES = [
    (GOOD, "a", 2, True, ""),
    (GOOD.replace("(a) is better, and", "(b) is better, and"), "b", 2, True, ""),
    ("  <think>x</think>\n\nTherefore, Response (b) is better, and the preference strength is [[3]].  \n", "b", 3, True, ""),
    # the verdict inside the thinking never counts
    ("<think>Therefore, Response (b) is better.</think>\nTherefore, Response (a) is better, and the preference "
     "strength is [[1]].", "a", 1, True, ""),
    ("<think>Therefore, Response (b) is better, and the preference strength is [[3]].</think>", "none", None, False,
     "no verdict"),
    ("Therefore, Response (a) is better, and the preference strength is [[2]].", "none", None, False, "no <think>"),
    ("<think>long reasoning that never ends", "none", None, False, "unclosed"),
    ("", "none", None, False, "empty"),
    ("   \n ", "none", None, False, "empty"),
    ("<think>x</think>\nTherefore, Response (a) is better, and the preference strength is [[4]].", "a", 4, False,
     "out of range"),
    ("<think>x</think>\nTherefore, Response (a) is better, and the preference strength is [[0]].", "a", 0, False,
     "out of range"),
    ("<think>x</think>\nTherefore, Response (a) is better, and the preference strength is [[high]].", "a", None,
     False, "not a number"),
    ("<think>x</think>\nTherefore, Response (a) is better.", "a", None, False, "no preference strength"),
    ("<think>x</think>\nTherefore, **Response (A)** is better, and the preference strength is [[2]].", "a", 2,
     False, "template"),
    ("<think>x</think>\ntherefore,   response ( b )  is better, and the preference strength is [[ 2 ]].", "b", 2,
     False, "template"),
    ("<think>x</think>\nResponse (a) is better. Therefore, Response (b) is better, and the preference strength is "
     "[[2]].", "none", None, False, "conflicting"),
    ("<think>x</think>\nResponse (a) is better.\nTherefore, Response (a) is better, and the preference strength is "
     "[[2]].", "a", 2, False, "several"),
    ("<think></think>\nTherefore, Response (a) is better, and the preference strength is [[2]].", "a", 2, False,
     "empty thinking"),
    ("<think>a</think><think>b</think>\nTherefore, Response (a) is better, and the preference strength is [[2]].",
     "a", 2, False, "more than one"),
    ("preamble <think>a</think>\nTherefore, Response (a) is better, and the preference strength is [[2]].", "a", 2,
     False, "before <think>"),
    ("<think>è 中文 🙂</think>\nTherefore, Response (b) is better, and the preference strength is [[1]].", "b", 1,
     True, ""),
    ("<think>x</think>\nI cannot decide.", "none", None, False, "no verdict"),
]


@pytest.mark.parametrize("text,choice,strength,well_formed,reason", STRICT_CASES)
def test_strict_table(text, choice, strength, well_formed, reason):
    verdict = parse_verdict(text)
    assert (verdict.choice, verdict.strength, verdict.well_formed) == (choice, strength, well_formed), verdict
    assert reason in verdict.reason


LENIENT_CASES = [
    ("Response (a) is better.", "a"),
    ("After comparing, **Response B** is better than A.", "b"),
    ("<THINK>hmm, maybe a</THINK> Output (b) is better", "b"),
    ("[[A]]", "a"),
    ("My verdict: [[C]]", "tie"),
    ("It is a tie: both responses are equally good.", "tie"),
    ("<think>Response (a) is better</think>", "none"),
    ("<think>unclosed, response (a) is better", "none"),
    ("Response (a) is better. No wait, Response (b) is better.", "none"),
    ("no verdict here", "none"),
]


@pytest.mark.parametrize("text,choice", LENIENT_CASES)
def test_lenient_table(text, choice):
    assert parse_verdict(text, strict=False).choice == choice


def test_cot_and_direct_formats():
    cot = get_template("judge_cot_v2").answer
    assert parse_verdict("<think>x</think>\nTherefore, Response (b) is better.", cot).well_formed
    bad = parse_verdict("<think>x</think>\nTherefore, Response (b) is better, and the preference strength is [[2]].", cot)
    assert bad.choice == "b" and not bad.well_formed and "unexpected" in bad.reason
    direct = get_template("direct_v2").answer
    assert parse_verdict("Therefore, Response (a) is better.", direct).well_formed
    assert not parse_verdict("<think>x</think>Therefore, Response (a) is better.", direct).well_formed


def test_double_scores():
    fmt = AnswerFormat(think=True, strength="forbidden", scores=True)
    v = parse_verdict(f"<think>x</think>\n{scores_sentence(30, 50)}", fmt)
    assert (v.choice, v.scores, v.well_formed) == ("b", (30.0, 50.0), True)
    v = parse_verdict(f"<think>x</think>\n{scores_sentence(70, 70)}", fmt)
    assert v.choice == "tie"
    v = parse_verdict("<think>x</think>\nscores are [[130]] and [[5]]", fmt)
    assert v.choice == "a" and not v.well_formed and "out of range" in v.reason
    assert parse_verdict("<think>x</think>\nno scores", fmt).choice == "none"


def test_round_trip_with_prompt_helpers():
    for choice in "ab":
        for strength in (1, 2, 3):
            v = parse_verdict(judge_output("some thinking", choice, strength))
            assert (v.choice, v.strength, v.well_formed) == (choice, strength, True)


def test_megabyte_of_junk_is_fast_and_safe():
    import time

    junk = ("<think>" + "Response (a) is better " * 40000 + "</think>\n" + "x" * 1_000_000
            + "\nTherefore, Response (b) is better, and the preference strength is [[3]].")
    start = time.perf_counter()
    v = parse_verdict(junk)
    assert v.choice == "b" and v.strength == 3
    assert time.perf_counter() - start < 1.0
    assert parse_verdict("<" * 1_000_000).choice == "none"


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=400) | st.binary(max_size=50).map(lambda b: b.decode("latin-1")))
def test_never_raises_on_any_string(text):
    for strict in (True, False):
        v = parse_verdict(text, strict=strict)
        assert v.choice in ("a", "b", "tie", "none")
        assert v.well_formed is False or v.choice != "none"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.sampled_from(["a", "b"]), st.integers(-5, 9))
def test_verdict_inside_thinking_never_counts(thinking, choice, strength):
    thinking = thinking.replace("</think>", "").replace("<think>", "")
    text = f"<think>{thinking} Therefore, Response ({choice}) is better.</think>\nI am not sure."
    assert parse_verdict(text).choice == "none"
