"""The public Think-J code's three rule rewards, reproduced rule for rule (HuihuiChyan/Think-J, verl fork).

Sources, read at the repository's main branch:
  * ``verl/verl/utils/reward_score/reward_cot.py``      -> :func:`cot_public_reward` (preset ``cot_binary``)
  * ``verl/verl/utils/reward_score/reward_strength.py`` -> :func:`strength_public_reward` (``strength_public``)
  * ``verl/verl/utils/reward_score/reward_score.py``    -> :func:`margin_public_reward` (``margin_public``)

What the public code does, and so what these do:
  * No think block is needed and the whole text is searched (the thinking included).
  * CoT: ``Response (a) is better.`` and ``Response (b) is better.`` (the last ``.`` matches any character) are
    searched for in that order and the later one found wins, so a text that holds both counts as (b). Right 1,
    wrong 0, neither found 0.5 (``unparsed_score``).
  * Strength: the first ``Therefore, Response (a|b) is better, and the strength is [[N]].`` -- the public
    prompt's sentence, "the strength", not the paper's "the preference strength"; use the template
    ``judge_strength_public_v1``. Right direction: 1 - |gold - N| / 8 with N in 1..3, else 1 - 0.5; wrong or
    not found: 0.
  * Margin: the first line holding ``<Score 1>x</Score 1>`` and later ``<Score 2>y</Score 2>`` (the last such
    ``<Score 2>`` on that line); the gold response higher: 1 + min(|x - y| / 100, 1); otherwise (equal scores
    included): -min(|x - y| / 100, 1); not found: 0.5. Template ``double_score_public_v1``.

Ground truth: the public code takes a signed strength (-s: (a) better, +s: (b) better) or 1 / 2 for (a) / (b);
ours is ``{"label", "strength"}`` and maps onto it. Where the public code has no answer we decide, and say so:
a tie gold (the public data has none) scores 0 for every output; a missing or 0 gold strength drops the
|gold - N| / 8 term; a score that is not a finite number (a 400-digit literal) counts as not found, and a
strength literal too long for ``int`` counts as out of range -- the public code would return NaN or raise; a bad
ground truth (``thinkj.rewards.gold``) scores 0 when the label is unreadable and drops the |gold - N| / 8 term
when only the strength is, with ``gold_error`` = 1 -- the public code would raise or misread it.
The patterns here are rewritten so they run in linear time (the public margin pattern is quadratic on a long
run of digits); they accept exactly the same texts.
"""

from __future__ import annotations

import math
import re
from typing import Any

from thinkj.rewards.designs.judge import _result
from thinkj.rewards.gold import pair_gold

_COT = (("a", re.compile(r"Response \(a\) is better.")), ("b", re.compile(r"Response \(b\) is better.")))
_STRENGTH = re.compile(r"Therefore, Response \((a|b)\) is better, and the strength is \[\[(\d+)\]\]\.")
# \d*\.?\d+ of the public pattern, as an unambiguous alternation (same strings, no nested backtracking).
_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_SCORE_1 = re.compile(rf"<Score 1>{_NUMBER}</Score 1>")
_SCORE_2 = re.compile(rf"<Score 2>{_NUMBER}</Score 2>")


def cot_public_reward(text: str, ground_truth: Any, *, unparsed_score: float = 0.5) -> dict[str, Any]:
    """reward_cot.py: 1 right, 0 wrong, ``unparsed_score`` (0.5) when neither verdict sentence is found."""
    gold = pair_gold(ground_truth, strength=False)
    label = gold.label
    text = text if isinstance(text, str) else ""
    judgement = "none"
    for choice, pattern in _COT:  # in order; a later match overwrites an earlier one
        if pattern.search(text):
            judgement = choice
    if label not in ("a", "b"):  # a tie gold, or none readable: nothing to be right about
        score = 0.0
    elif judgement == label:
        score = 1.0
    else:
        score = unparsed_score if judgement == "none" else 0.0
    right = label in ("a", "b") and judgement == label
    return _result(score, float(right), float(judgement != "none"), 0.0, judgement, None, label == "tie",
                   bool(gold.error))


def _strength_value(digits: str) -> int | None:
    """int(digits) as the public code reads it, or None when it cannot be in 1..3 (and may not fit an int)."""
    significant = digits.lstrip("0") or "0"
    return int(significant) if len(significant) <= 18 else None


def strength_public_reward(text: str, ground_truth: Any) -> dict[str, Any]:
    """reward_strength.py: right direction 1 + strength term (-|gold - N| / 8, or -0.5 for N outside 1..3)."""
    gold = pair_gold(ground_truth)
    label, gold_strength = gold.label, gold.strength
    match = _STRENGTH.search(text) if isinstance(text, str) else None
    if match is None:
        return _result(0.0, 0.0, 0.0, 0.0, "none", None, label == "tie", bool(gold.error))
    pred, strength = match.group(1), _strength_value(match.group(2))
    right = label in ("a", "b") and pred == label
    term = 0.0
    if right:
        if strength not in (1, 2, 3):
            term = -0.5
        elif gold_strength:
            term = -abs(abs(gold_strength) - strength) / 8
    score = 1.0 + term if right else 0.0
    return _result(score, float(right), 1.0, term, pred, strength if strength is not None and strength < 10 ** 9
                   else None, label == "tie", bool(gold.error))


def _public_scores(text: str) -> tuple[float, float] | None:
    """The two numbers the public ``re.search`` finds, found in linear time: ``.`` does not cross a newline, so
    the match lies on one line, starts at that line's first ``<Score 1>`` tag and (``.*`` being greedy) ends at
    the last ``<Score 2>`` tag after it. A line whose first tag has no ``<Score 2>`` after it cannot match."""
    first = _SCORE_1.search(text)
    while first is not None:
        end = text.find("\n", first.end())
        end = len(text) if end < 0 else end
        last = None
        for match in _SCORE_2.finditer(text, first.end(), end):
            last = match
        if last is not None:
            return float(first.group(1)), float(last.group(1))
        first = _SCORE_1.search(text, end + 1) if end < len(text) else None
    return None


def margin_public_reward(text: str, ground_truth: Any) -> dict[str, Any]:
    """reward_score.py: right 1 + min(margin, 1), wrong or equal -min(margin, 1), no scores 0.5."""
    gold = pair_gold(ground_truth, strength=False)
    label, error = gold.label, bool(gold.error)
    decided = label in ("a", "b")  # a tie gold, or none readable, scores 0 whatever the text
    scores = _public_scores(text) if isinstance(text, str) else None
    if scores is not None and not all(math.isfinite(s) for s in scores):
        scores = None  # the public code would return NaN for inf - inf
    if scores is None:
        return _result(0.5 if decided else 0.0, 0.0, 0.0, 0.0, "none", None, label == "tie", error)
    first, second = scores
    pred = "a" if first > second else "b" if second > first else "tie"
    margin = min(abs(first - second) / 100, 1.0)
    right = decided and pred == label
    if not decided:
        score = 0.0
    else:
        score = margin + 1.0 if right else max(-abs(first - second) / 100, -1.0)
    return _result(score, float(right), 1.0, margin if right else 0.0, pred, None, label == "tie", error)
