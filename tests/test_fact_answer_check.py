"""The facts task's rule check on free-form answers, and the position-constant judge that is the judge-as-reward
experiment's negative control (a real server on 127.0.0.1 through ``thinkj_pairwise``)."""

from __future__ import annotations

import pytest

from thinkj.errors import ThinkJError
from thinkj.synthetic.fact_answer_check import answer_kind, states_fact, values_named
from thinkj.synthetic.fact_task import REFUSAL, Fact, facts, make_pairs
from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer

KENYA = Fact("capital", "Kenya", "Nairobi")
HOURS = Fact("count", "hours are in a day", "twenty-four")
ROOSTER = Fact("sound", "rooster", "cock-a-doodle-doo")


@pytest.mark.parametrize("fact,answer,kind", [
    (KENYA, "The capital of Kenya is Nairobi.", "right"),
    (KENYA, "Nairobi is Kenya's capital city, not Mombasa.", "right"),  # Mombasa is no capital in the table
    (KENYA, "The capital of Kenya is Lima.", "wrong value"),
    (KENYA, "It might be Lima, or maybe Nairobi.", "several values"),
    (KENYA, "Kenya is a country in East Africa.", "no value"),
    (KENYA, REFUSAL, "no value"),
    (HOURS, "There are 24 hours in a day.", "right"),
    (HOURS, "A day has twenty four hours.", "right"),  # not also "four"
    (HOURS, "There are four hours in a day.", "wrong value"),
    (HOURS, "There are 240 hours.", "no value"),
    (ROOSTER, "A rooster says cock-a-doodle-doo!", "right"),
])
def test_answer_kinds(fact, answer, kind):
    assert answer_kind(answer, fact) == kind
    assert states_fact(answer, fact) is (kind == "right")


def test_the_task_own_answers_pass_and_its_bad_kinds_fail():
    for fact in facts("train") + facts("test"):
        assert states_fact(fact.answer, fact), fact
    for pair in make_pairs(200, seed=1, split="test"):
        fact = next(f for f in facts("test") if f.question == pair.instruction)
        good, bad = (pair.response_a, pair.response_b) if pair.label == "a" else (pair.response_b, pair.response_a)
        assert states_fact(good, fact) and not states_fact(bad, fact), (good, bad)
    assert values_named("Paris or Rome", Fact("capital", "France", "Paris")) == ["Paris", "Rome"]


def test_position_constant_judge_gives_ties_through_thinkj_pairwise():
    from thinkj.rewards.adapters.trl_group import get_group_reward

    with pytest.raises(ThinkJError, match="always"):
        TeacherConfig(always="c")
    with TeacherServer(TeacherConfig(always="a"), model="judge") as server:
        reward = get_group_reward("thinkj_pairwise")
        out = reward.score("What is the capital of Kenya?", [KENYA.answer, "Lima.", "I don't know."], [None] * 3,
                           base_url=server.base_url, api_key_env=None, retries=1, backoff_s=0.01, timeout_s=10)
    assert [r["score"] for r in out] == [0.5, 0.5, 0.5]
    assert out[0]["flip_rate"] == 1.0 and out[0]["unparsed_rate"] == 0.0 and out[0]["judge_calls"] == 6
