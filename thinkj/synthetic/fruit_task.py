"""A synthetic judging task whose right answer follows a rule a tiny model can learn.

The user asks for a word of a category ("Name a fruit."). The better response names one word of that
category. The worse one names a word of another category (strength 2), refuses (strength 3), repeats
a word over and over (strength 2), or hedges between a wrong and a right word (strength 1).

``explain`` writes the short rationale a good judge gives -- the category asked for, then what each
response does -- using only the text of the pair, so a teacher that sees nothing but the rendered
prompt can write it too. It is what the scripted teacher summarises to and what the judge learns to
think. By default every question asks for a fruit: whether a response fits is then a property of
the response's own words, which a model with 0.4 M parameters learns within a few hundred steps on
CPU, while still needing to look at both responses. Pass ``asked`` to ask for other categories.
Everything is seeded and deterministic.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable

from thinkj.errors import UnknownNameError
from thinkj.records import PreferencePair
from thinkj.synthetic import distinct

CATEGORIES: dict[str, list[str]] = {
    "fruit": ["apple", "banana", "cherry", "grape", "lemon", "mango", "peach", "pear", "plum", "melon"],
    "animal": ["tiger", "horse", "rabbit", "eagle", "shark", "zebra", "camel", "otter", "wolf", "goat"],
    "color": ["red", "blue", "green", "yellow", "purple", "orange", "pink", "brown", "black", "white"],
    "tool": ["hammer", "saw", "drill", "wrench", "shovel", "chisel", "pliers", "ladder", "rake", "axe"],
    "country": ["France", "Japan", "Brazil", "Kenya", "Canada", "India", "Egypt", "Peru", "Norway", "Chile"],
    "instrument": ["piano", "violin", "guitar", "flute", "drum", "cello", "trumpet", "harp", "oboe", "banjo"],
}
CATEGORY_OF = {word.lower(): cat for cat, words in CATEGORIES.items() for word in words}
REFUSAL = "I cannot answer that."
ASKS = ["Name a {c}.", "Give me one {c}.", "Tell me a {c}, please.", "Which {c} comes to mind?"]
# bad-response kind -> (preference strength of the good response over it, weight in the mix)
BAD_KINDS = {"other": (2, 5), "refusal": (3, 2), "repeat": (2, 2), "hedge": (1, 2)}


def _article(category: str) -> str:
    return "an" if category[0] in "aeiou" else "a"


def _bad_response(rng: random.Random, kind: str, category: str) -> str:
    other = rng.choice([c for c in sorted(CATEGORIES) if c != category])
    word = rng.choice(CATEGORIES[other])
    if kind == "other":
        return f"{word}."
    if kind == "refusal":
        return REFUSAL
    if kind == "repeat":
        return " ".join([rng.choice(CATEGORIES[category])] * 4) + "."
    return f"{word} or {rng.choice(CATEGORIES[category])}."


def _draw(asked: tuple[str, ...]) -> Callable[[random.Random], tuple[str, str, str, str, str]]:
    """One pair's draw: (category, bad kind, good, bad, question), in the stream's order."""
    kinds, weights = list(BAD_KINDS), [w for _, w in BAD_KINDS.values()]

    def draw(rng: random.Random) -> tuple[str, str, str, str, str]:
        category = rng.choice(list(asked))
        kind = rng.choices(kinds, weights=weights)[0]
        good = f"{rng.choice(CATEGORIES[category])}."
        bad = _bad_response(rng, kind, category)
        return category, kind, good, bad, rng.choice(ASKS).format(c=category)

    return draw


def _key(item: tuple[str, str, str, str, str]) -> distinct.Key:
    _, _, good, bad, ask = item
    return distinct.comparison_key(ask, good, bad)


@functools.cache
def capacity(asked: tuple[str, ...] = ("fruit",)) -> dict[str, int]:
    """Distinct questions and distinct comparisons a draw asking for ``asked`` can make."""
    return distinct.capacity(_draw(asked), _key)


def make_pairs(n: int, seed: int = 0, *, source: str = "synthetic", id_prefix: str = "syn",
               asked: tuple[str, ...] = ("fruit",), distinct_items: bool = False) -> list[PreferencePair]:
    """``n`` pairs, positions balanced (half the labels 'a', half 'b') and shuffled with ``seed``. ``distinct_items``
    (the test split): no comparison twice -- a repeat is skipped and the same stream drawn on, so a draw without
    repeats is unchanged -- and more than :func:`capacity` is refused."""
    unknown = [c for c in asked if c not in CATEGORIES]
    if unknown:
        raise UnknownNameError(f"unknown categories {unknown}; known: {sorted(CATEGORIES)}")
    if distinct_items:
        distinct.check_capacity(n, capacity(tuple(asked)), f"the fruit task asking for {', '.join(asked)}")
    rng = random.Random(seed)
    labels = (["a", "b"] * (n // 2 + 1))[:n]
    rng.shuffle(labels)
    draw = _draw(tuple(asked))
    items = distinct.draw_distinct(n, rng, draw, _key) if distinct_items else [draw(rng) for _ in range(n)]
    pairs = []
    for i, (label, (category, kind, good, bad, ask)) in enumerate(zip(labels, items)):
        a, b = (good, bad) if label == "a" else (bad, good)
        pairs.append(PreferencePair(f"{id_prefix}-{seed}-{i}", source, [{"role": "user", "content": ask}], a, b,
                                    label, BAD_KINDS[kind][0], {"category": category, "bad_kind": kind}))
    return pairs


_ASKED = re.compile(r"\b(" + "|".join(CATEGORIES) + r")\b")


def asked_category(question: str) -> str:
    """The category a synthetic question asks for ('' when it names none)."""
    match = _ASKED.search(question.lower())
    return match.group(1) if match else ""


def describe(response: str, category: str) -> str:
    """What a response does with respect to the requested category, e.g. 'names an animal'."""
    text = response.strip()
    if text == REFUSAL:
        return "refuses to answer"
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", text)]
    if len(words) > 1 and len(set(words)) == 1:
        return "repeats one word"
    if " or " in text:
        return "hedges between two answers"
    cats = [CATEGORY_OF.get(w, "") for w in words]
    if len(cats) == 1 and cats[0]:
        return f"names {_article(cats[0])} {cats[0]}"
    return "gives an unclear answer"


def explain(pair: PreferencePair) -> str:
    """The rule-based rationale, derived from the pair's text alone."""
    category = asked_category(pair.instruction) or pair.meta.get("category", "")
    return (f"The user asks for {_article(category or 'x')} {category or 'word'}. "
            f"Response (a) {describe(pair.response_a, category)}. Response (b) {describe(pair.response_b, category)}.")


def rule_verdict(pair: PreferencePair) -> str:
    """The side the rule prefers: the response naming exactly one word of the asked category."""
    category = asked_category(pair.instruction) or pair.meta.get("category", "")
    ok = [describe(r, category) == f"names {_article(category)} {category}" for r in (pair.response_a, pair.response_b)]
    return "a" if ok[0] and not ok[1] else "b" if ok[1] and not ok[0] else "tie"


# The demo's task interface (thinkj.synthetic.tasks.TASK_INTERFACE), in terms of a pair.

def split_pairs(n: int, seed: int, split: str) -> list[PreferencePair]:
    """``n`` pairs of one split. The fruit task has no entity split: the test split draws with an offset seed, with
    no comparison twice."""
    return make_pairs(n, seed=seed + (10_000 if split == "test" else 0), id_prefix=split, distinct_items=split == "test")


def split_capacity(split: str) -> dict[str, int]:
    """What :func:`split_pairs` can draw of ``split`` without a repeat: the same questions on both sides."""
    return capacity()


def argue(pair: PreferencePair, side: str) -> str:
    """A rationale for ``side``: :func:`explain` names no side, so it serves both."""
    return explain(pair)


def describe_response(response: str, pair: PreferencePair) -> str:
    return describe(response, asked_category(pair.instruction))


def asks(pair: PreferencePair) -> str:
    return f"So they want {asked_category(pair.instruction) or 'something specific'}."


def strength_against(worse: str, pair: PreferencePair) -> int:
    kind = describe_response(worse, pair)
    return 3 if kind == "refuses to answer" else 1 if kind == "hedges between two answers" else 2
