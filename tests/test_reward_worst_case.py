"""Rewards never raise, never return a non-finite number and stay fast on pathological ~100 KB completions.

On the old code ``xml_judge`` took 12-30 s on 14 K repeated ``<notes>`` (a lazy DOTALL pattern rescanning from
every unclosed tag), ``multi_objective`` raised on integers over 4,300 digits (Python's int-string limit, a crashed
verl step) and its integer pattern backtracked quadratically on long digit runs.
"""

from __future__ import annotations

import math
import time

import pytest
from worst_case.reward import ground_truth, worst_case_inputs

from thinkj.rewards import PRESETS, get_preset
from thinkj.rewards.designs.multi_objective import parse_scores
from thinkj.rewards.designs.xml_judge import parse_xml_judgement

INPUTS = worst_case_inputs()
LIMIT_S = 1.0  # the benchmark's target is 50 ms; this bound leaves room for a shared, loaded CI machine


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_survives_every_pathological_completion(preset):
    reward, gt = get_preset(preset), ground_truth(preset)
    keys = None
    for label, text in INPUTS.items():
        start = time.perf_counter()
        out = reward(text, gt)
        elapsed = time.perf_counter() - start
        assert elapsed < LIMIT_S, (preset, label, elapsed)
        numbers = {k: v for k, v in out.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        assert all(math.isfinite(v) for v in numbers.values()), (preset, label, numbers)
        keys = keys or set(out)
        assert set(out) == keys, (preset, label)  # the same keys for every input (verl stacks them)


def test_huge_integers_are_parsed_without_raising():
    assert parse_scores("9" * 5000) == [10 ** 18]  # clamped: no score is that large, and int() would raise
    assert parse_scores("-" + "7" * 20 + " 3") == [-(10 ** 18), 3]
    assert get_preset("multi_objective")("3 " + "9" * 10_000 + " 4 2 1", [3, 3, 4, 2, 1])["mae"] == 0.0


def test_integer_rule_is_unchanged():
    assert parse_scores("3, 4.5, 3rd, v2, 3a4, -2, x-1, 10.") == [3, 3, -2, 1, 10]


def test_xml_judgement_reads_the_same_and_fast():
    good = "<notes>the first keeps the meaning</notes>\n<judgement> A </judgement>"
    assert parse_xml_judgement(good) == ("a", True, "the first keeps the meaning")
    assert parse_xml_judgement("<notes>x</notes><judgement>A</judgement><judgement>B</judgement>")[0] == "none"
    assert parse_xml_judgement("<notes>" * 14_000)[2] == ""
    start = time.perf_counter()
    parse_xml_judgement("<notes>" * 14_000 + "</notes><judgement>B</judgement>")
    assert time.perf_counter() - start < LIMIT_S
