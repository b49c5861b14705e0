"""The verdict parser on pathological inputs (linear time, finite numbers) and the other judges' verdict forms."""

from __future__ import annotations

import math
import time

import pytest
from worst_case.verdict import LIMIT_S, pathological_inputs

from thinkj.prompts import AnswerFormat
from thinkj.verdict_parser import parse_verdict

FORMATS = (AnswerFormat(), AnswerFormat(strength="forbidden", scores=True), AnswerFormat(think=False))


def _best_time(text: str, fmt: AnswerFormat, strict: bool, repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):  # CPU time, best of 3: the bound is about the parser, not about a busy shared machine
        start = time.process_time()
        parse_verdict(text, fmt, strict=strict)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.slow
def test_every_pathological_100kb_input_parses_within_50_ms():
    # The old lenient pattern took 122 s on 'response' + 100K spaces (two \s* competing for the same run).
    slow = []
    for name, text in pathological_inputs().items():
        for fmt in FORMATS:
            for strict in (True, False):
                seconds = _best_time(text, fmt, strict, repeat=1)
                if seconds > LIMIT_S:
                    seconds = _best_time(text, fmt, strict)  # measure again before calling it slow
                if seconds > LIMIT_S:
                    slow.append(f"{name} strict={strict}: {1000 * seconds:.1f} ms")
    assert not slow, slow


@pytest.mark.slow
def test_the_public_rewards_run_within_50_ms_and_stay_finite():
    from thinkj.rewards import get_preset

    presets = [get_preset(name) for name in ("cot_binary", "strength_public", "margin_public", "thinkj_subtractive")]
    slow = []
    for name, text in pathological_inputs().items():
        for preset in presets:
            best = math.inf
            for _ in range(2):
                start = time.process_time()
                result = preset(text, {"label": "a", "strength": 2})
                best = min(best, time.process_time() - start)
                if best <= LIMIT_S:
                    break
            assert math.isfinite(result["score"]), (preset.name, name)
            if best > LIMIT_S:
                slow.append(f"{preset.name} on {name}: {1000 * best:.1f} ms")
    assert not slow, slow


def test_parse_never_returns_non_finite_numbers():
    huge = "<think>x</think>\nTherefore, the quality scores for Response (a) and Response (b) are " \
           f"[[{'9' * 400}]] and [[{'1' * 400}]], respectively."
    for strict in (True, False):
        verdict = parse_verdict(huge, AnswerFormat(strength="forbidden", scores=True), strict=strict)
        assert verdict.choice == "none" and verdict.scores is None and verdict.reason == "score is not a finite number"
    for text in pathological_inputs(size=5_000).values():
        for fmt in FORMATS:
            verdict = parse_verdict(text, fmt, strict=False)
            assert verdict.scores is None or all(math.isfinite(x) for x in verdict.scores)
            assert verdict.strength is None or abs(verdict.strength) < 10 ** 32


@pytest.mark.parametrize("text, choice", [
    ("Feedback: (b) misses the point. [RESULT] A", "a"),  # Prometheus (RewardBench model_modifier prometheus)
    ("The first is fine. [RESULT] B", "b"),
    ("Response 1 is better.", "a"),
    ("**Response 2** is better than response 1.", "b"),
    ("Output (a)", "a"),  # OffsetBias: the bare answer
    ("Some reasoning.\nOutput (2)", "b"),
    ("[[B]]", "b"),
])
def test_lenient_reads_the_forms_rewardbench_reads(text, choice):
    assert parse_verdict(text, AnswerFormat(think=False), strict=False).choice == choice


@pytest.mark.parametrize("text", ["[RESULT] A", "Response 1 is better.", "Output (a)"])
def test_strict_mode_is_unchanged(text):
    assert parse_verdict(f"<think>t</think>\n{text}", AnswerFormat(strength="forbidden"), strict=True).choice == "none"


def test_result_needs_a_bare_letter_and_mentions_are_not_verdicts():
    fmt = AnswerFormat(think=False)
    assert parse_verdict("[RESULT] Both are fine", fmt, strict=False).choice == "none"
    assert parse_verdict("Output (a) has a bug, but overall it is fine.", fmt, strict=False).choice == "none"


def test_lenient_reads_the_public_score_tags():
    fmt = AnswerFormat(strength="forbidden", scores=True)
    text = "<think>t</think>\nTherefore, the scores are <Score 1>30</Score 1> and <Score 2>80</Score 2>."
    verdict = parse_verdict(text, fmt, strict=False)
    assert verdict.choice == "b" and verdict.scores == (30.0, 80.0)
    assert parse_verdict(text, fmt, strict=True).choice == "none"  # strict mode reads the paper's sentence only
