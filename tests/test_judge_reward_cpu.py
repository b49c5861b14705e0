"""The end-to-end CPU run's task (experiments/judge_reward_cpu.py): the rule check, and judge SFT targets that the
shared verdict parser reads as well-formed and that agree with the rule. (The run itself: experiments/LOG.md.)"""

from __future__ import annotations

import random

import pytest
from conftest import load_script

from thinkj.prompts import get_template
from thinkj.verdict_parser import parse_verdict

experiment = load_script("experiments/judge_reward_cpu.py")
REFUSAL, judge_pair, rule_ok, task = experiment.REFUSAL, experiment.judge_pair, experiment.rule_ok, experiment.task

ITEM = {"prompt": "Name a fruit. Choose one of: tiger, plum, drill, red.", "category": "fruit",
        "options": ["tiger", "plum", "drill", "red"], "right": "plum"}


@pytest.mark.parametrize("answer,ok", [("Plum.", True), ("The answer is plum.", True), ("plums", False),
                                       ("Tiger.", False), ("Plum or tiger.", False), ("I like fruit.", False),
                                       (REFUSAL, False), ("Sure! Plum is a fruit.", True)])
def test_rule_check(answer, ok):
    assert rule_ok(answer, ITEM) is ok


def test_task_has_exactly_one_right_option():
    rng = random.Random(1)
    for _ in range(50):
        item = task(rng)
        assert item["right"] in item["options"] and len(set(item["options"])) == 4
        assert item["category"] in item["prompt"] and rule_ok(item["right"] + ".", item)


def test_judge_targets_are_well_formed_and_follow_the_rule():
    rng = random.Random(0)
    fmt = get_template("judge_strength_v1").answer
    for i in range(60):
        item = task(rng)
        label = "ab"[i % 2]
        pair, target = judge_pair(rng, item, label, f"t{i}")
        verdict = parse_verdict(target, fmt, strict=True)
        assert verdict.well_formed and verdict.choice == label and verdict.strength == pair.strength
        better = pair.response_a if label == "a" else pair.response_b
        worse = pair.response_b if label == "a" else pair.response_a
        assert rule_ok(better, item) and not rule_ok(worse, item)
