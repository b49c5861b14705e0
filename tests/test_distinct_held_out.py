"""Held-out sets of distinct comparisons (issue 53, item 2): every generated task's test split draws no comparison
twice, says how many distinct questions and comparisons it can make, refuses more with the numbers, and keeps the
items of a draw that had no repeat."""

from __future__ import annotations

import random

import pytest

from thinkj.errors import ThinkJError
from thinkj.synthetic import constraint_task, distinct, fact_task, fruit_task
from thinkj.synthetic.tasks import TASKS, get_task


def _key(pair) -> tuple[str, frozenset[str]]:
    return pair.instruction, frozenset((pair.response_a, pair.response_b))


def test_every_task_reports_its_held_out_capacity():
    facts = get_task("facts").capacity("test")
    # a question names one held-out fact: 43 of them (SPLIT_SEED's partition)
    assert facts["questions"] == len(fact_task.facts("test")) == 43
    # by hand, per fact: wrong (one per other value of its family), refusal, off-topic (one per fact of another
    # family), hedge (each other value, in either order)
    pool = fact_task.facts("test")
    by_hand = 0
    for fact in pool:
        others = len({f.value for f in pool if f.family == fact.family} - {fact.value})
        by_hand += others + 1 + sum(f.family != fact.family for f in pool) + 2 * others
    assert facts["comparisons"] == by_hand == 2313
    # fruit: 4 phrasings x 10 fruits x (50 other words + refusal + 10 repeats + 50 x 10 hedges)
    assert get_task("fruit").capacity("test") == {"questions": 4, "comparisons": 4 * 10 * (50 + 1 + 10 + 500)}
    constraints = get_task("constraints").capacity("test")
    assert constraints["questions"] == constraint_task.split_report()["test_items"] == 20640
    assert constraints["comparisons"] == 480 * (3 * 480 + 3 * 12 * 480 + 10 * 480 + 3 * 10 * 480)
    assert set(TASKS) == {"fruit", "facts", "constraints"}  # a new task gets its rows here


def test_constraint_capacity_is_the_same_for_every_subject_it_multiplies():
    pool = constraint_task.subjects("test")
    first = constraint_task.capacity("test", pool[0])
    for subject in (pool[1], pool[len(pool) // 2], pool[-1]):
        assert constraint_task.capacity("test", subject) == first


@pytest.mark.parametrize("name,n", [("facts", 2313), ("fruit", 11000), ("constraints", 3000)])
def test_the_test_split_draws_no_comparison_twice(name, n):
    """Up to the whole capacity (facts); half of fruit's (its last rare hedges cost ~15 s of rejections); the
    constraints task's 18 M comparisons are sampled at 3,000."""
    task = get_task(name)
    assert n <= task.capacity("test")["comparisons"]
    for seed in (0, 1):
        pairs = task.make_pairs(n, seed, "test")
        assert len(pairs) == n and len({_key(p) for p in pairs}) == n
        assert sum(p.label == "a" for p in pairs) == (n + 1) // 2
        assert all(task.rule_verdict(p) == p.label for p in pairs[:300])
    if n == task.capacity("test")["comparisons"]:  # the whole capacity: every question is asked
        assert len({p.instruction for p in pairs}) == task.capacity("test")["questions"]


@pytest.mark.parametrize("name", ["facts", "fruit", "constraints"])
def test_more_than_the_capacity_is_refused_with_the_numbers(name):
    task = get_task(name)
    cap = task.capacity("test")
    with pytest.raises(ThinkJError, match=rf"can make {cap['comparisons']} distinct comparisons over "
                                          rf"{cap['questions']} questions; {cap['comparisons'] + 1} were asked for"):
        task.make_pairs(cap["comparisons"] + 1, 0, "test")


def test_thinkj_data_task_refuses_a_held_out_set_larger_than_the_task_can_make(tmp_path):
    from typer.testing import CliRunner

    from thinkj.data.cli import app

    result = CliRunner().invoke(app, ["task", "facts", str(tmp_path / "t"), "--train", "4", "--test", "2314"])
    assert result.exit_code != 0
    assert "2313 distinct comparisons over 43 questions; 2314 were asked for" in result.output + str(result.exception)


def _plain_stream(seed: int, n: int, rng_seed: str, draw, key) -> list:
    """What a with-replacement draw gives, its repeats dropped: the labels are shuffled first, as make_pairs does."""
    rng = random.Random(rng_seed)
    rng.shuffle((["a", "b"] * (n // 2 + 1))[:n])
    seen, out = set(), []
    while len(out) < n:
        k = key(draw(rng))
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_held_out_draw_is_the_plain_stream_without_its_repeats(seed):
    """Rejection on the same stream: a draw that had no repeat keeps every item, one that had keeps the order of the
    rest (so the demo's and the canaries' sets change only where they repeated)."""
    n = 150
    pairs = fact_task.make_pairs(n, seed, split="test")
    want = _plain_stream(seed, n, f"{seed}-test", fact_task._draw(fact_task.facts("test")), fact_task._key)
    assert [_key(p) for p in pairs] == want
    pairs = fruit_task.split_pairs(64, seed, "test")
    want = _plain_stream(seed, 64, seed + 10_000, fruit_task._draw(("fruit",)), fruit_task._key)
    assert [_key(p) for p in pairs] == want


def test_training_draws_and_the_fruit_default_still_draw_with_replacement():
    """Only held-out sets are distinct: the demo's training pairs and the canaries' fruit draws stay as they were
    (they repeat comparisons, and the canary picks its distinct held-out set itself)."""
    train = fact_task.make_pairs(512, 0, split="train")
    assert len({_key(p) for p in train}) < 512
    canary_draw = fruit_task.make_pairs(256, seed=90_001, id_prefix="canary-eval")
    assert len({_key(p) for p in canary_draw}) < 256


def test_every_outcome_walks_each_path_of_picks_once():
    def draw(rng):
        first = rng.choice("ab")
        second = rng.choices(["x", "y", "z"], weights=[1, 2, 3])[0] if first == "a" else ""
        return first + second + ("<" if rng.random() < 0.5 else ">")

    assert sorted(distinct.every_outcome(draw)) == sorted(
        ["ax<", "ax>", "ay<", "ay>", "az<", "az>", "b<", "b>"])
