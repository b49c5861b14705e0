"""Group rewards from pairwise verdicts (thinkj.rewards.designs.pairwise_group) on scripted verdicts, rewards worked by hand:
both orders, flips as ties, unparsed answers, failures, strength weights, anchors, knockout, Bradley-Terry, cost."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from thinkj.rewards.designs.group_order import content_order
from thinkj.rewards.designs.pairwise_group import (
    REF,
    OrderVerdict,
    bradley_terry,
    group_rewards,
    judge_calls,
    read_answer,
    swap_average,
)

A, B, C, D = "good good", "good", "bad", "good good good"  # merit 2, 1, -1, 3


class Scripted:
    """Verdicts from a rule on the shown-first / shown-second texts; records every ordered request."""

    def __init__(self, rule=None):
        self.rule = rule or merit_rule
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, pairs):
        self.asked += pairs
        return [self.rule(a, b) for a, b in pairs]


def merit(text: str) -> int:
    return text.count("good") - text.count("bad")


def merit_rule(a: str, b: str) -> OrderVerdict:
    if "FAIL" in a + b:
        return OrderVerdict("failed")
    diff = merit(a) - merit(b)
    if diff == 0:
        return OrderVerdict("tie")
    return OrderVerdict("a" if diff > 0 else "b", min(3, abs(diff)))


def run(texts, judge, **kw):
    return asyncio.run(group_rewards(texts, judge, **kw))


def test_swap_average_rules():
    a3, b1, tie, none, failed = (OrderVerdict("a", 3), OrderVerdict("b", 1), OrderVerdict("tie"), OrderVerdict("none"),
                                 OrderVerdict("failed"))
    # X first says (a) = X, Y first says (b) = X: X wins in both orders
    assert swap_average(a3, b1).value == 1.0
    assert swap_average(a3, b1, weight_strength=True).value == pytest.approx((1.0 + (0.5 + 0.5 / 3)) / 2)
    # both orders pick the response shown first: a flip, counted as a tie whatever the strengths
    flip = swap_average(a3, OrderVerdict("a", 1), weight_strength=True)
    assert (flip.value, flip.flipped) == (0.5, True)
    assert swap_average(a3, tie).value == 0.75 and not swap_average(a3, tie).flipped
    half = swap_average(none, b1)
    assert (half.value, half.unparsed) == (0.75, 1)
    assert swap_average(failed, a3).failed and swap_average(a3, failed).failed
    assert swap_average(OrderVerdict("a", 9), OrderVerdict("b", None), weight_strength=True).value == pytest.approx(
        0.5 + 0.5 / 3)  # out-of-range or missing strength counts as 1


def test_read_answer_uses_the_shared_parser():
    assert read_answer("<think>x</think>\nTherefore, Response (b) is better, and the preference strength is [[3]].") == \
        OrderVerdict("b", 3)
    assert read_answer("no verdict here").choice == "none"
    assert read_answer("It is a tie.").choice == "tie"
    assert read_answer(None).choice == "failed"


def test_round_robin_hand_worked():
    scores, wins, comps = run([A, B, C], Scripted())
    assert scores == [1.0, 0.5, 0.0] and wins == scores
    # strengths: A-B differ by 1 (s=1), A-C by 3 (s=3), B-C by 2 (s=2)
    scores, _, _ = run([A, B, C], Scripted(), weight_strength=True)
    v_ab, v_ac, v_bc = 0.5 + 0.5 / 3, 1.0, 0.5 + 1 / 3
    assert scores == pytest.approx([(v_ab + v_ac) / 2, (1 - v_ab + v_bc) / 2, (2 - v_ac - v_bc) / 2])


def test_position_bias_is_cancelled_and_ties_cost_nothing():
    biased = Scripted(lambda a, b: OrderVerdict("a", 3))
    scores, _, comps = run([A, B, C], biased)
    assert scores == [0.5, 0.5, 0.5] and all(c.flipped for c in comps)
    judge = Scripted()
    scores, _, comps = run([A, A, C], judge)
    assert scores == [0.75, 0.75, 0.0]  # the identical pair is a tie
    assert len(judge.asked) == 4 and not comps[0].judged  # 2 pairs x 2 orders; A-A never sent


def test_failures_are_left_out_never_scored():
    scores, _, comps = run([A, B, "bad FAIL"], Scripted())
    assert scores == [1.0, 0.0, 0.5]  # the failing completion has no comparison left: no evidence, 0.5
    assert sum(c.failed for c in comps) == 2
    scores, _, _ = run(["good FAIL", B, C], Scripted())
    assert scores == [0.5, 1.0, 0.0]


def test_anchor_first_and_reference():
    # content order of [A, "meh", B] is B, A, meh (SHA-256 770e.., dcaf.., f652..): B is the anchor, whatever its place
    assert content_order([A, "meh", B]) == [2, 0, 1]
    scores, _, _ = run([A, "meh", B], Scripted(), scheme="anchor", anchor="first")
    assert scores == [1.0, 0.0, 0.5]  # the anchor gets its record against the others: mean(0, 1)
    judge = Scripted()
    scores, _, comps = run([A, C, B], judge, scheme="anchor", anchor="reference", reference=B)
    assert scores == [1.0, 0.0, 0.5] and len(judge.asked) == 4 and {c.y for c in comps} == {REF}
    with pytest.raises(ValueError, match="reference"):
        run([A], Scripted(), scheme="anchor", anchor="reference")
    with pytest.raises(ValueError, match="scheme"):
        run([A], Scripted(), scheme="swiss")


def test_knockout_bracket_byes_and_ties():
    # the bracket is seeded in content order: C, B, D, A (SHA-256 2f05.., 770e.., ad66.., dcaf..)
    assert content_order([C, A, B, D]) == [0, 2, 3, 1]
    judge = Scripted()
    scores, _, comps = run([C, A, B, D], judge, scheme="knockout")
    # round 1: B beats C, D beats A; final: D beats B. Two rounds.
    assert scores == [0.0, 0.0, 0.5, 1.0] and len(comps) == 3 and len(judge.asked) == 6
    scores, _, _ = run([A, C, B], Scripted(), scheme="knockout")
    # seeds C, B, A: round 1: B beats C, A has a bye (a win); final: A beats B
    assert scores == [1.0, 0.0, 0.5]
    scores, _, _ = run([B, B], Scripted(), scheme="knockout")
    assert scores == [0.5, 0.5]
    assert run([A], Scripted(), scheme="knockout")[0] == [0.5]


@pytest.mark.parametrize("scheme,anchor", [("knockout", "first"), ("anchor", "first")])
def test_a_groups_rewards_do_not_depend_on_the_order_its_members_arrive_in(scheme, anchor):
    """verl hands a group's rollouts to the reward manager in the order they finish: every order, same rewards."""
    texts = [C, A, B, D, "meh", "good bad"]
    base = dict(zip(texts, run(texts, Scripted(), scheme=scheme, anchor=anchor)[0]))
    for perm in itertools.permutations(range(len(texts))):
        order = [texts[i] for i in perm]
        assert dict(zip(order, run(order, Scripted(), scheme=scheme, anchor=anchor)[0])) == base
    # identical texts may trade rewards with arrival; the rewards they share do not change
    dup = [A, B, C, B]
    shares = sorted(run(dup, Scripted(), scheme=scheme, anchor=anchor)[0])
    assert all(sorted(run([dup[i] for i in p], Scripted(), scheme=scheme, anchor=anchor)[0]) == shares
               for p in itertools.permutations(range(4)))


@pytest.mark.parametrize("g", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("scheme,anchor", [("round_robin", "first"), ("anchor", "first"), ("anchor", "reference"),
                                           ("knockout", "first")])
def test_stated_cost_is_the_requests_made(g, scheme, anchor):
    texts = ["good " * k + "x" * k for k in range(g)]  # all distinct
    judge = Scripted()
    run(texts, judge, scheme=scheme, anchor=anchor, reference="reference text")
    assert len(judge.asked) == judge_calls(g, scheme, anchor)


def test_bradley_terry_fit():
    scores, wins, comps = run([A, B, C, D], Scripted(), bradley_terry_fit=True)
    assert wins == pytest.approx([2 / 3, 1 / 3, 0.0, 1.0])
    assert sorted(range(4), key=scores.__getitem__) == [2, 1, 0, 3] and all(0 < s < 1 for s in scores)
    p = bradley_terry([0, 1, 2, 3], comps)
    # the fit is the regularised MLE: each item's wins equal its expected wins (incl. the virtual tied game)
    for i in range(4):
        expected = 1.0 * p[i] / (p[i] + 1.0) + sum(
            p[i] / (p[i] + p[c.y if c.x == i else c.x]) for c in comps if i in (c.x, c.y))
        won = 0.5 + sum(c.value if c.x == i else 1 - c.value for c in comps if i in (c.x, c.y))
        assert expected == pytest.approx(won, rel=1e-6)
    ties, _, _ = run([B, B, B], Scripted(), bradley_terry_fit=True)
    assert ties == pytest.approx([0.5] * 3)
    one, _, _ = run([A], Scripted(), scheme="anchor", anchor="reference", reference=B, bradley_terry_fit=True)
    assert 0.5 < one[0] < 1.0
