"""A judging task that needs reading, not recall: verifiable instruction constraints (RewardBench 2 Precise IF shape).

An item is a short writing request about a subject plus one checkable constraint ("Your entire response must be in
lowercase letters.", "Do not use any commas in your response.", "Your response must mention the word "lantern".",
"End your response with the word "tonight".", "Answer with exactly one word.", ...). The better response
satisfies the constraint; the worse one says the same thing and breaks it (capital letters put back, a comma
added, the word left out, another last word ...). Judging it needs the instruction and both responses, no fact.

**Held-out items share no prompt with training items**: subjects (adjective + noun, over a thousand) are split once,
with ``SPLIT_SEED``, into a training and a test part, and an item only draws its subject from its own part; the
constraint words are split the same way. The test part alone gives thousands of distinct items (subjects x
constraint kinds x constraint words); ``split_report`` counts them. The run seed only chooses which items are drawn.

:func:`satisfies` is the rule checker (the oracle): it reads a constraint back from the instruction's text
(:func:`constraint_of`) and decides whether a response follows it, for any response -- the pairs' labels, the
scripted teacher and a judge-as-reward experiment all use it.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from thinkj.errors import ThinkJError
from thinkj.records import PreferencePair
from thinkj.synthetic import distinct

SPLIT_SEED = 20261207  # fixes the train/test partition of subjects and words for every run
TEST_SHARE = 0.4

ADJECTIVES = ("quiet", "old", "busy", "small", "windy", "sunny", "hidden", "crowded", "empty", "bright", "cold", "warm",
              "tiny", "famous", "rainy", "wooden", "narrow", "ancient", "modern", "noisy", "peaceful", "green",
              "snowy", "dusty", "friendly", "lonely", "colorful", "misty", "sleepy", "grand")
NOUNS = ("harbor", "library", "market", "garden", "village", "bridge", "forest", "station", "kitchen", "museum",
         "river", "castle", "bakery", "island", "school", "farm", "lighthouse", "park", "city", "mountain", "beach",
         "cafe", "theater", "valley", "street", "lake", "desert", "train", "workshop", "orchard", "bookshop",
         "stadium", "temple", "meadow", "canyon", "square", "hotel", "zoo", "hospital", "airport")
WORDS = ("lantern", "journey", "sparrow", "silver", "whisper", "harvest", "compass", "thunder", "velvet", "ribbon",
         "meadowlark", "pebble", "candle", "horizon", "echo", "blossom", "anchor", "feather", "tonight", "together",
         "forever", "outside", "today", "again", "slowly", "gently", "softly", "always", "indeed", "nearby")
QUALITIES = ("calm", "lively", "beautiful", "charming", "busy", "restful", "lovely", "pleasant", "welcoming", "special")
TIMES = ("morning", "evening", "spring", "autumn", "summer", "winter", "afternoon", "night")
REASONS = ("visitors enjoy walking there", "people like to stop and look around", "children love to play there",
           "everyone talks about it", "families often spend the day there", "travelers remember it for years")

# kind -> (instruction text with {w} / {k}, strength of the violation when the worse response breaks it, weight)
KINDS: dict[str, tuple[str, int, int]] = {
    "lowercase": ("Your entire response must be in lowercase letters, with no capital letters at all.", 2, 2),
    "uppercase": ("Your entire response must be in capital letters.", 2, 1),
    "no_commas": ("Do not use any commas in your response.", 1, 2),
    "mention": ("Your response must mention the word \"{w}\".", 2, 2),
    "end_with": ("End your response with the word \"{w}\".", 2, 2),
    "start_with": ("Start your response with the word \"{w}\".", 2, 1),
    "one_word": ("Answer with exactly one word.", 3, 1),
    "max_words": ("Answer in at most {k} words.", 2, 1),
}
TASK_LINE = "Write one sentence about {s}."


@dataclass(frozen=True)
class Constraint:
    kind: str
    word: str = ""  # mention / end_with / start_with
    limit: int = 0  # max_words

    @property
    def text(self) -> str:
        return KINDS[self.kind][0].format(w=self.word, k=self.limit)

    def describe(self) -> str:
        """What it requires, in a judge's words."""
        return {"lowercase": "all lowercase letters", "uppercase": "all capital letters", "no_commas": "no commas",
                "mention": f"the word \"{self.word}\"", "end_with": f"the last word \"{self.word}\"",
                "start_with": f"the first word \"{self.word}\"", "one_word": "exactly one word",
                "max_words": f"at most {self.limit} words"}[self.kind]


def split_part(items: tuple[str, ...], salt: str) -> dict[str, list[str]]:
    rng = random.Random(f"{SPLIT_SEED}-{salt}")
    shuffled = sorted(items)
    rng.shuffle(shuffled)
    n_test = round(len(shuffled) * TEST_SHARE)
    return {"test": sorted(shuffled[:n_test]), "train": sorted(shuffled[n_test:])}


def subjects(split: str) -> list[str]:
    """Subjects ("the quiet harbor") of one split: every (adjective, noun) whose noun belongs to the split."""
    if split not in ("train", "test"):
        raise ThinkJError(f"split must be 'train' or 'test', got {split!r}")
    return [f"the {a} {n}" for n in split_part(NOUNS, "nouns")[split] for a in ADJECTIVES]


def words(split: str) -> list[str]:
    return split_part(WORDS, "words")[split]


# ------------------------------------------------------------------------------------------------- the oracle
_WORD = re.compile(r"[A-Za-z']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def satisfies(constraint: Constraint, response: str) -> bool:
    """Whether ``response`` follows ``constraint`` (the rule checker; exact and deterministic)."""
    text = response.strip()
    tokens = _words(text)
    if not tokens:
        return False
    if constraint.kind == "lowercase":
        return text == text.lower()
    if constraint.kind == "uppercase":
        return text == text.upper()
    if constraint.kind == "no_commas":
        return "," not in text
    if constraint.kind == "mention":
        return constraint.word.lower() in (t.lower() for t in tokens)
    if constraint.kind == "end_with":
        return tokens[-1].lower() == constraint.word.lower()
    if constraint.kind == "start_with":
        return tokens[0].lower() == constraint.word.lower()
    if constraint.kind == "one_word":
        return len(text.split()) == 1
    if constraint.kind == "max_words":
        return len(text.split()) <= constraint.limit
    raise ThinkJError(f"unknown constraint kind {constraint.kind!r}; known: {', '.join(KINDS)}")


def _pattern(kind: str) -> re.Pattern[str]:
    text = re.escape(KINDS[kind][0]).replace(re.escape("{w}"), r"(?P<w>[A-Za-z']+)").replace(re.escape("{k}"),
                                                                                               r"(?P<k>\d+)")
    return re.compile(text)


_PATTERNS = {kind: _pattern(kind) for kind in KINDS}


def constraint_of(instruction: str) -> Constraint | None:
    """The constraint an instruction states (None when it states none of :data:`KINDS`)."""
    for kind, pattern in _PATTERNS.items():
        found = pattern.search(instruction)
        if found:
            groups = found.groupdict()
            return Constraint(kind, groups.get("w") or "", int(groups["k"]) if groups.get("k") else 0)
    return None


# -------------------------------------------------------------------------------------------------- the items
def _sentence(rng: random.Random, subject: str) -> str:
    quality, time, reason = rng.choice(QUALITIES), rng.choice(TIMES), rng.choice(REASONS)
    return f"{subject[0].upper()}{subject[1:]} is {quality} in the {time}, and {reason}."


def _pair_texts(rng: random.Random, constraint: Constraint, subject: str) -> tuple[str, str]:
    """(better, worse): the same content, following and breaking the constraint."""
    base = _sentence(rng, subject)
    body = base.rstrip(".")
    noun = subject.split()[-1]
    kind, w = constraint.kind, constraint.word
    if kind == "lowercase":
        return base.lower(), base
    if kind == "uppercase":
        return base.upper(), base
    if kind == "no_commas":
        return base.replace(",", ""), base
    if kind == "mention":
        return f"{body}, like a {w}.", base
    if kind == "end_with":
        return f"{body}, {w}.", f"{w.capitalize()}, {body[0].lower()}{body[1:]}."
    if kind == "start_with":
        return f"{w.capitalize()}, {body[0].lower()}{body[1:]}.", f"{body}, {w}."
    if kind == "one_word":
        return f"{rng.choice(QUALITIES).capitalize()}.", base
    short = f"{subject[0].upper()}{subject[1:]} is {rng.choice(QUALITIES)}."
    return short, base if len(base.split()) > constraint.limit else f"{body} {noun} {noun} {noun}."


def _constraint(rng: random.Random, kind: str, split: str) -> Constraint:
    if kind in ("mention", "end_with", "start_with"):
        return Constraint(kind, word=rng.choice(words(split)))
    if kind == "max_words":
        return Constraint(kind, limit=rng.choice((5, 6, 7)))
    return Constraint(kind)


def _draw(split: str, pool: list[str]) -> Callable[[random.Random], tuple[str, Constraint, str, str]]:
    """One item's draw from the subjects ``pool``: (subject, constraint, better, worse), in the stream's order."""
    kinds, weights = list(KINDS), [w for _, _, w in KINDS.values()]

    def draw(rng: random.Random) -> tuple[str, Constraint, str, str]:
        subject, kind = rng.choice(pool), rng.choices(kinds, weights=weights)[0]
        constraint = _constraint(rng, kind, split)
        return (subject, constraint, *_pair_texts(rng, constraint, subject))

    return draw


def _prompt(subject: str, constraint: Constraint) -> str:
    return f"{TASK_LINE.format(s=subject)} {constraint.text}"


def _key(item: tuple[str, Constraint, str, str]) -> distinct.Key:
    subject, constraint, good, bad = item
    return distinct.comparison_key(_prompt(subject, constraint), good, bad)


@functools.cache
def capacity(split: str, subject: str | None = None) -> dict[str, int]:
    """Distinct questions (prompts) and distinct comparisons one draw of ``split`` can make. Every outcome of all
    subjects is ~18 M draws, so the count walks one subject's (``subject``, default the first) and multiplies by the
    number of subjects: a prompt names its subject, and the texts put the subject in one slot, so each subject makes
    as many as any other (the tests walk others)."""
    pool = subjects(split)
    one = distinct.capacity(_draw(split, [subject or pool[0]]), _key)
    return {name: count * (1 if subject else len(pool)) for name, count in one.items()}


def make_pairs(n: int, seed: int = 0, *, split: str = "train", id_prefix: str | None = None,
               source: str = "constraints") -> list[PreferencePair]:
    """``n`` pairs from one side of the subject/word split, labels balanced and shuffled with ``seed``. The test split
    has no comparison twice: a repeat is skipped and the same stream drawn on (a draw without repeats is unchanged),
    and more than :func:`capacity` is refused."""
    held_out = split == "test"
    pool = subjects(split)
    if held_out:
        distinct.check_capacity(n, capacity(split), "the constraints task's test split")
    rng = random.Random(f"{seed}-{split}-constraints")
    labels = (["a", "b"] * (n // 2 + 1))[:n]
    rng.shuffle(labels)
    draw = _draw(split, pool)
    items = distinct.draw_distinct(n, rng, draw, _key) if held_out else [draw(rng) for _ in range(n)]
    out = []
    for i, (label, (subject, constraint, good, bad)) in enumerate(zip(labels, items)):
        a, b = (good, bad) if label == "a" else (bad, good)
        out.append(PreferencePair(f"{id_prefix or split}-{seed}-{i}", source,
                                  [{"role": "user", "content": _prompt(subject, constraint)}],
                                  a, b, label, KINDS[constraint.kind][1],
                                  {"subject": subject, "kind": constraint.kind, "word": constraint.word,
                                   "limit": constraint.limit, "split": split}))
    return out


def split_report() -> dict[str, int]:
    """Subjects, words and distinct possible items per split, and how many prompts the splits share (must be 0)."""
    report: dict[str, int] = {}
    prompts: dict[str, set[str]] = {}
    for split in ("train", "test"):
        items = set()
        for subject in subjects(split):
            for kind in KINDS:
                if kind in ("mention", "end_with", "start_with"):
                    items |= {f"{subject}|{kind}|{w}" for w in words(split)}
                elif kind == "max_words":
                    items |= {f"{subject}|{kind}|{k}" for k in (5, 6, 7)}
                else:
                    items.add(f"{subject}|{kind}")
        prompts[split] = items
        report[f"{split}_subjects"], report[f"{split}_items"] = len(subjects(split)), len(items)
    report["shared_subjects"] = len(set(subjects("train")) & set(subjects("test")))
    report["shared_words"] = len(set(words("train")) & set(words("test")))
    report["shared_items"] = len(prompts["train"] & prompts["test"])
    return report


# ------------------------------------------------------------------------- the demo's task interface (thinkj.synthetic.tasks)
def split_pairs(n: int, seed: int, split: str) -> list[PreferencePair]:
    return make_pairs(n, seed=seed, split=split)


def split_capacity(split: str) -> dict[str, int]:
    return capacity(split)


def rule_verdict(pair: PreferencePair) -> str:
    constraint = constraint_of(pair.instruction)
    if constraint is None:
        return "tie"
    ok = [satisfies(constraint, r) for r in (pair.response_a, pair.response_b)]
    return "a" if ok[0] and not ok[1] else "b" if ok[1] and not ok[0] else "tie"


def _what(response: str, constraint: Constraint) -> str:
    return f"{'has' if satisfies(constraint, response) else 'does not have'} {constraint.describe()}"


def describe_response(response: str, pair: PreferencePair) -> str:
    constraint = constraint_of(pair.instruction)
    if constraint is None:
        return "answers the request"
    return f"{'follows' if satisfies(constraint, response) else 'breaks'} the rule: it {_what(response, constraint)}"


def explain(pair: PreferencePair) -> str:
    """The rule-based rationale: what the instruction requires, what each response does, which one follows it."""
    constraint = constraint_of(pair.instruction)
    if constraint is None:
        return "The instruction states no rule I can check."
    right = rule_verdict(pair)
    ending = f"so Response ({right}) is right" if right in ("a", "b") else "and neither response alone follows it"
    return (f"The rule asks for {constraint.describe()}. Response (a) {_what(pair.response_a, constraint)}. "
            f"Response (b) {_what(pair.response_b, constraint)}, {ending}.")


def argue(pair: PreferencePair, side: str) -> str:
    """A rationale in :func:`explain`'s shape concluding for ``side``: for the wrong side, the one a judge that misreads
    the responses would write (the told response said to follow the rule, the other to break it)."""
    constraint = constraint_of(pair.instruction)
    if constraint is None or side == rule_verdict(pair) or side not in ("a", "b"):
        return explain(pair)
    has, lacks = f"has {constraint.describe()}", f"does not have {constraint.describe()}"
    a_text, b_text = (has, lacks) if side == "a" else (lacks, has)
    return (f"The rule asks for {constraint.describe()}. Response (a) {a_text}. Response (b) {b_text}, "
            f"so Response ({side}) is right.")


def asks(pair: PreferencePair) -> str:
    constraint = constraint_of(pair.instruction)
    return (f"So they want one sentence, with {constraint.describe()}." if constraint
            else "So they want one sentence.")


def strength_against(worse: str, pair: PreferencePair) -> int:
    constraint = constraint_of(pair.instruction)
    return KINDS[constraint.kind][1] if constraint else 2
