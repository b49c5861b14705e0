"""RL canaries: TRL GRPO with the Think-J reward must raise the held-out probability of the right verdict on a task
the init judge has only partly learnt, and the same run with shuffled gold labels must not (thinkj/online/canary.py
has the task, the init judge, the metric and the test).

The test (``sign_test``): per held-out pair (64), the teacher-forced probability of the right verdict letter, both
orders combined so that a mere change of side cancels (``position_free``), after vs before RL; one-sided exact sign
test p < 0.05 AND mean rise >= 0.05.
Breaks tried: the accuracy term's sign flipped in thinkj/rewards/judge.py (the right arm then fails: mean fell);
golds shuffled (the control arm, below). Seed 0 runs by default (~2-3 min on 2 cores); seed 1 with ``-m "rl_canary and opt_in"``.
"""

from __future__ import annotations

import math

import pytest

from thinkj.online.canary import (
    INFORMATIVE,
    INIT_STEPS,
    canary_arm,
    canary_rl_pairs,
    format_only_judge,
    paired_test,
    position_free,
    sign_test,
    verdict_probabilities,
)
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


def test_sign_test_needs_both_a_consistent_and_a_large_enough_rise():
    before = [0.5] * 20
    assert sign_test(before, [0.6] * 20)["learned"]  # 20 ups: p = 2**-20, rise 0.1
    small = sign_test(before, [0.51] * 20)
    assert small["p_one_sided"] < 0.05 and not small["learned"]  # consistent but under the least rise
    mixed = sign_test(before, [0.9] * 11 + [0.45] * 9)
    assert mixed["rise"] > 0.05 and not mixed["learned"]  # a large mean carried by few items: p ~ 0.41
    assert sign_test(before, before)["p_one_sided"] == 1.0
    assert sign_test([0.6] * 20, before)["p_one_sided"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="equally long"):
        sign_test(before, before[:-1])


def test_position_free_ignores_a_change_of_side_and_sees_content():
    # right letter: 'a' in the original order, 'b' in the swapped one; a judge leaning to 'a' by log-odds c
    def orders(content: float, side: float) -> list[float]:
        return [1 / (1 + math.exp(-(content + side))), 1 / (1 + math.exp(-(content - side)))]

    assert position_free(orders(1.0, 0.0)) == pytest.approx(position_free(orders(1.0, 3.0)))
    assert position_free(orders(2.0, 3.0))[0] > position_free(orders(1.0, 0.0))[0]
    assert position_free(orders(0.0, 2.0)) == pytest.approx([0.5])
    with pytest.raises(ValueError, match="both orders"):
        position_free([0.5])


def test_shuffled_gold_keeps_responses_and_balance_and_breaks_the_rule():
    right = canary_rl_pairs(200, seed=3)
    shuffled = canary_rl_pairs(200, seed=3, shuffle_gold=True)
    assert [(p.response_a, p.response_b) for p in right] == [(p.response_a, p.response_b) for p in shuffled]
    assert sum(p.label == "a" for p in shuffled) == 100
    agree = sum(p.label == q.label for p, q in zip(right, shuffled))
    assert 70 < agree < 130  # independent of the rule: about half agree


@pytest.mark.slow
@pytest.mark.rl_canary
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.opt_in)])
def test_trl_grpo_learns_the_canary_and_not_the_shuffled_control(tmp_path, seed):
    from thinkj.models.tiny import build_tiny_model

    tiny = build_tiny_model(tmp_path / "tiny", seed=seed)
    init = format_only_judge(tiny, tmp_path / "init", seed=seed, steps=INIT_STEPS,
                             informative=INFORMATIVE)
    before = verdict_probabilities(init)
    free = position_free(before)
    assert 0.55 < sum(free) / len(free) < 0.9  # the init has the content binding, but far from certain
    right = canary_arm(init, tmp_path, seed=seed, before=before)
    control = canary_arm(init, tmp_path, seed=seed, shuffle_gold=True, before=before)
    print(f"seed {seed}: right {right}\ncontrol {control}")
    assert right["learned"], f"RL on the right golds did not learn the canary: {right}"
    assert not control["learned"], f"RL on shuffled golds passed the canary test: {control}"
    assert control["rise"] < right["rise"]
