"""RL canaries: RL with the Think-J reward must raise held-out accuracy on a task the init judge has not learnt, and
the same run with shuffled gold labels must not (thinkj/online/canary.py has the task and the init judge).

The paired test is fixed in advance: greedy verdicts on 64 held-out pairs in both orders (128 judgments), before and
after, one-sided exact McNemar p < 0.05 (``canary_task.improved``).
"""

from __future__ import annotations

import pytest

from thinkj.online.canary import canary_rl_pairs, paired_test
from thinkj.stats import mcnemar_exact


def test_paired_test_counts_changed_judgments_and_is_one_sided():
    before = [True] * 40 + [False] * 60
    after = [True] * 40 + [True] * 12 + [False] * 48  # 12 gained, none lost
    result = paired_test(before, after)
    assert (result["gained"], result["lost"]) == (12, 0)
    assert result["p_one_sided"] == pytest.approx(0.5 ** 12)
    assert result["p_two_sided"] == pytest.approx(mcnemar_exact(12, 0))
    # a drop of the same size is never an improvement
    assert paired_test(after, before)["p_one_sided"] == pytest.approx(1.0)
    assert paired_test(before, before)["p_one_sided"] == 1.0
    with pytest.raises(ValueError, match="equally long"):
        paired_test(before, after[:-1])


def test_shuffled_gold_keeps_responses_and_balance_and_breaks_the_rule():
    right = canary_rl_pairs(200, seed=3)
    shuffled = canary_rl_pairs(200, seed=3, shuffle_gold=True)
    assert [(p.response_a, p.response_b) for p in right] == [(p.response_a, p.response_b) for p in shuffled]
    assert sum(p.label == "a" for p in shuffled) == 100
    agree = sum(p.label == q.label for p, q in zip(right, shuffled))
    assert 70 < agree < 130  # independent of the rule: about half agree
