"""The real-model demo's judging task: short factual questions a 135M instruct model can know.

A question asks one well-known fact ("What is the capital of Kenya?"). The better response states it. The worse
one states a wrong value of the same kind (strength 2), refuses (3), answers a different question (2), or hedges
between a wrong and the right value (1). Judging the "wrong value" kind needs the fact itself, which the judge has
to bring from pre-training; the other kinds need reading the question and both responses.

**Held-out items share no entity and no fact with training items**: every fact family's entities are split once,
with the package seed ``SPLIT_SEED``, into a training and a test part, and an item (question, right answer,
distractors, off-topic answers) only ever draws from its own part. ``split_report`` checks it.
The run seed only chooses which items are drawn. ``explain`` writes the rationale a good judge gives (what the
question asks, the right value, what each response does) from the item's text and the fact table -- it is what
the scripted teacher summarises to.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

from thinkj.errors import ThinkJError
from thinkj.records import PreferencePair
from thinkj.synthetic import distinct

SPLIT_SEED = 20261123  # fixes the train/test partition of entities for every run
TEST_SHARE = 0.4

# family -> (question template, answer template, {entity: value})
FAMILIES: dict[str, tuple[str, str, dict[str, str]]] = {
    "capital": ("What is the capital of {e}?", "The capital of {e} is {v}.", {
        "France": "Paris", "Japan": "Tokyo", "Italy": "Rome", "Germany": "Berlin", "Spain": "Madrid",
        "England": "London", "Russia": "Moscow", "China": "Beijing", "Egypt": "Cairo", "Greece": "Athens",
        "Portugal": "Lisbon", "Ireland": "Dublin", "Norway": "Oslo", "Sweden": "Stockholm", "Austria": "Vienna",
        "Poland": "Warsaw", "Kenya": "Nairobi", "Thailand": "Bangkok", "Peru": "Lima", "Cuba": "Havana",
        "Argentina": "Buenos Aires", "South Korea": "Seoul", "Denmark": "Copenhagen", "Finland": "Helsinki",
        "Hungary": "Budapest", "Belgium": "Brussels", "Netherlands": "Amsterdam", "Turkey": "Ankara"}),
    "sound": ("What sound does a {e} make?", "A {e} says {v}.", {
        "cow": "moo", "dog": "woof", "cat": "meow", "duck": "quack", "sheep": "baa", "lion": "roar",
        "pig": "oink", "horse": "neigh", "owl": "hoot", "snake": "hiss", "bee": "buzz", "frog": "croak",
        "rooster": "cock-a-doodle-doo", "mouse": "squeak", "donkey": "hee-haw", "wolf": "howl"}),
    "color": ("What color is {e}?", "{E} is {v}.", {
        "the sky on a clear day": "blue", "grass": "green", "snow": "white", "a ripe banana": "yellow",
        "coal": "black", "blood": "red", "a carrot": "orange", "milk": "white", "a lemon": "yellow",
        "a ripe tomato": "red", "a crow": "black", "an emerald": "green", "chocolate": "brown",
        "a flamingo": "pink", "the sun in a child's drawing": "yellow", "an eggplant": "purple"}),
    "opposite": ("What is the opposite of \"{e}\"?", "The opposite of \"{e}\" is \"{v}\".", {
        "hot": "cold", "big": "small", "up": "down", "fast": "slow", "happy": "sad", "light": "dark",
        "open": "closed", "wet": "dry", "early": "late", "full": "empty", "hard": "soft", "rich": "poor",
        "strong": "weak", "long": "short", "high": "low", "day": "night", "left": "right", "inside": "outside",
        "win": "lose", "buy": "sell"}),
    "count": ("How many {e}?", "There are {v} {e}.", {
        "days are in a week": "seven", "months are in a year": "twelve", "hours are in a day": "twenty-four",
        "minutes are in an hour": "sixty", "legs does a spider have": "eight", "sides does a triangle have": "three",
        "legs does a dog have": "four", "wheels does a bicycle have": "two", "continents are there": "seven",
        "sides does a hexagon have": "six", "seconds are in a minute": "sixty", "legs does an insect have": "six",
        "planets are in the solar system": "eight", "letters are in the English alphabet": "twenty-six"}),
}
REFUSAL = "I'm sorry, but I can't help with that."
BAD_KINDS = {"wrong": (2, 5), "refusal": (3, 2), "off_topic": (2, 2), "hedge": (1, 2)}  # kind -> (strength, weight)


def _answer(family: str, entity: str, value: str) -> str:
    if family == "count":  # "legs does a spider have" -> "A spider has eight legs."; "days are in a week" -> ...
        noun, _, rest = entity.partition(" ")
        if rest.startswith("does ") and rest.endswith(" have"):
            subject = rest[len("does "):-len(" have")]
            return f"{subject[0].upper()}{subject[1:]} has {value} {noun}."
        return f"There are {value} {noun}{rest.replace('are in', ' in').replace('are there', '').rstrip()}."
    _, answer, _ = FAMILIES[family]
    return answer.format(e=entity, E=entity[0].upper() + entity[1:], v=value)


def split_entities(family: str) -> dict[str, list[str]]:
    """{"train": [...], "test": [...]} for one family, fixed by SPLIT_SEED; values never cross the split either."""
    _, _, table = FAMILIES[family]
    rng = random.Random(f"{SPLIT_SEED}-{family}")
    entities = sorted(table)
    rng.shuffle(entities)
    test, train, test_values = [], [], set()
    n_test = round(len(entities) * TEST_SHARE)
    for e in entities:
        (test if len(test) < n_test else train).append(e)
    test_values = {table[e] for e in test}
    # a value shared by both parts (white: snow / milk) would be a fact seen in training: such entities move to test
    for e in list(train):
        if table[e] in test_values:
            train.remove(e)
            test.append(e)
    return {"train": sorted(train), "test": sorted(test)}


@dataclass(frozen=True)
class Fact:
    family: str
    entity: str
    value: str

    @property
    def question(self) -> str:
        return FAMILIES[self.family][0].format(e=self.entity)

    @property
    def answer(self) -> str:
        return _answer(self.family, self.entity, self.value)


def facts(split: str) -> list[Fact]:
    if split not in ("train", "test"):
        raise ThinkJError(f"split must be 'train' or 'test', got {split!r}")
    return [Fact(f, e, FAMILIES[f][2][e]) for f in sorted(FAMILIES) for e in split_entities(f)[split]]


def _bad(rng: random.Random, kind: str, fact: Fact, pool: list[Fact]) -> tuple[str, list[Fact]]:
    """The worse response, and the facts of ``pool`` it borrows (a wrong value's owner, the off-topic fact)."""
    same = [f for f in pool if f.family == fact.family and f.value != fact.value]
    if kind == "wrong":
        other = rng.choice(same)
        return _answer(fact.family, fact.entity, other.value), [other]
    if kind == "refusal":
        return REFUSAL, []
    if kind == "off_topic":
        other = rng.choice([f for f in pool if f.family != fact.family])
        return other.answer, [other]
    other = rng.choice(same)
    first, second = (other.value, fact.value) if rng.random() < 0.5 else (fact.value, other.value)
    return f"It might be {first}, or maybe {second}. I am not sure.", [other]


def _draw(pool: list[Fact]) -> Callable[[random.Random], tuple[Fact, str, str, list[Fact]]]:
    """One item's draw from ``pool``: (asked fact, bad kind, worse response, borrowed facts), in the stream's order."""
    kinds, weights = list(BAD_KINDS), [w for _, w in BAD_KINDS.values()]

    def draw(rng: random.Random) -> tuple[Fact, str, str, list[Fact]]:
        fact = rng.choice(pool)
        kind = rng.choices(kinds, weights=weights)[0]
        return (fact, kind, *_bad(rng, kind, fact, pool))

    return draw


def _key(item: tuple[Fact, str, str, list[Fact]]) -> distinct.Key:
    fact, _, bad, _ = item
    return distinct.comparison_key(fact.question, fact.answer, bad)


@functools.cache
def capacity(split: str) -> dict[str, int]:
    """Distinct questions (facts) and distinct comparisons one draw of ``split`` can make."""
    return distinct.capacity(_draw(facts(split)), _key)


def make_pairs(n: int, seed: int = 0, *, split: str = "train", id_prefix: str | None = None,
               source: str = "facts") -> list[PreferencePair]:
    """``n`` pairs from one side of the entity split, labels balanced and shuffled with ``seed``. The test split has
    no comparison twice: a repeat is skipped and the same stream drawn on (a draw without repeats is unchanged), and
    more than :func:`capacity` is refused. A question names one fact, so its text is the held-out statistics'
    cluster (:func:`thinkj.evaluation.row_compare.pair_questions`); no ``question_id`` is written, which would change
    every held-out file."""
    held_out = split == "test"
    pool = facts(split)
    if held_out:
        distinct.check_capacity(n, capacity(split), "the facts task's test split")
    rng = random.Random(f"{seed}-{split}")
    labels = (["a", "b"] * (n // 2 + 1))[:n]
    rng.shuffle(labels)
    draw = _draw(pool)
    items = distinct.draw_distinct(n, rng, draw, _key) if held_out else [draw(rng) for _ in range(n)]
    out = []
    for i, (label, (fact, kind, bad, borrowed)) in enumerate(zip(labels, items)):
        good = fact.answer
        a, b = (good, bad) if label == "a" else (bad, good)
        out.append(PreferencePair(f"{id_prefix or split}-{seed}-{i}", source,
                                  [{"role": "user", "content": fact.question}], a, b, label, BAD_KINDS[kind][0],
                                  {"family": fact.family, "entity": fact.entity, "bad_kind": kind, "split": split,
                                   "borrowed": [[f.family, f.entity] for f in borrowed]}))
    return out


# ---------------------------------------------------------------------------------------------- reading items back
_BY_QUESTION = {Fact(f, e, v).question: Fact(f, e, v) for f, (_, _, t) in FAMILIES.items() for e, v in t.items()}


def fact_of(question: str) -> Fact | None:
    return _BY_QUESTION.get(question.strip())


def what_it_says(response: str, fact: Fact) -> str:
    """What a response does, without judging it: "says Paris" / refuses / hedges / answers another question."""
    text = response.strip()
    if text == REFUSAL:
        return "refuses to answer"
    if text.startswith("It might be"):
        return "hedges between two answers"
    for value in sorted(set(FAMILIES[fact.family][2].values())):
        if text == _answer(fact.family, fact.entity, value):
            return f"says {value}"
    return "answers a different question"


def describe(response: str, fact: Fact) -> str:
    """What a response does with the asked fact: states it / a wrong value / refuses / hedges / answers another."""
    said = what_it_says(response, fact)
    if not said.startswith("says "):
        return said
    return f"{said}, which is {'correct' if said == f'says {fact.value}' else 'wrong'}"


def explain(pair: PreferencePair) -> str:
    """The rule-based rationale: what each response says, then the right value and which response states it.

    Measured on SmolLM2-135M-Instruct (64 SFT examples, 32 steps, held-out facts, both orders): this order -- read
    both responses, then recall the fact and match it -- gave 90.0 % accuracy / 86.7 % pair accuracy, where the
    fact-first order ("The answer is X. Response (a) says Y, which is wrong. ...") gave 80.0 / 66.7 (experiments/LOG.md).
    """
    fact = fact_of(pair.instruction)
    if fact is None:
        return "The question is not one I can check."
    right = rule_verdict(pair)
    # short on purpose: ~50 tokens with the verdict, so the judge's whole answer fits the demo's generation budget
    ending = f"so Response ({right}) is right" if right in ("a", "b") else "and neither response states it"
    return (f"Response (a) {what_it_says(pair.response_a, fact)}. Response (b) {what_it_says(pair.response_b, fact)}. "
            f"The answer is {fact.value}, {ending}.")


def argue(pair: PreferencePair, side: str) -> str:
    """A rationale in :func:`explain`'s shape that concludes for ``side``: the rule's own for the right side; for the
    wrong side, the one a judge that misremembers the fact would write (the told response's value taken as the
    answer, or the right value denied). The critic learns from these to argue the verdict it is told.
    """
    fact = fact_of(pair.instruction)
    if fact is None or side == rule_verdict(pair) or side not in ("a", "b"):
        return explain(pair)
    said = what_it_says(pair.response_a if side == "a" else pair.response_b, fact)
    claim = f"The answer is {said[len('says '):]}" if said.startswith("says ") else f"The answer is not {fact.value}"
    return (f"Response (a) {what_it_says(pair.response_a, fact)}. Response (b) {what_it_says(pair.response_b, fact)}. "
            f"{claim}, so Response ({side}) is right.")


def rule_verdict(pair: PreferencePair) -> str:
    fact = fact_of(pair.instruction)
    if fact is None:
        return "tie"
    ok = [r.strip() == fact.answer for r in (pair.response_a, pair.response_b)]
    return "a" if ok[0] and not ok[1] else "b" if ok[1] and not ok[0] else "tie"


def strength_against(worse: str, pair: PreferencePair) -> int:
    kind = describe_response(worse, pair)
    return 3 if kind == "refuses to answer" else 1 if kind == "hedges between two answers" else 2


# The demo's task interface (thinkj.synthetic.tasks.TASK_INTERFACE), in terms of a pair.

def split_pairs(n: int, seed: int, split: str) -> list[PreferencePair]:
    return make_pairs(n, seed=seed, split=split)


def split_capacity(split: str) -> dict[str, int]:
    return capacity(split)


def describe_response(response: str, pair: PreferencePair) -> str:
    fact = fact_of(pair.instruction)
    return describe(response, fact) if fact else "answers something"


def asks(pair: PreferencePair) -> str:
    fact = fact_of(pair.instruction)
    return f"So they want one fact: {fact.value}, if I remember right." if fact else "So they want one fact."


def split_report() -> dict[str, int]:
    """Entities and values per split, and how many are shared (must be 0)."""
    train, test = facts("train"), facts("test")
    shared_entities = {(f.family, f.entity) for f in train} & {(f.family, f.entity) for f in test}
    shared_values = {(f.family, f.value) for f in train} & {(f.family, f.value) for f in test}
    return {"train_facts": len(train), "test_facts": len(test), "shared_entities": len(shared_entities),
            "shared_values": len(shared_values)}
