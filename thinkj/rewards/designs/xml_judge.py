"""XML judge reward (seed 000, kalomaze's "GRPO Judge Experiments"): notes, then a one-letter judgement.

The task: two texts, one original and one subtly corrupted, shown as Sample A and Sample B in a seeded
random order; the judge writes ``<notes>...</notes>`` then ``<judgement>A</judgement>`` (or B) naming
the better (original) sample. Ground truth uses the pairwise contract: ``{"label": "a"|"b"}``.

Reward of one completion i in a scoring set S (the group of completions of one prompt by default)::

    right_i    = 1 if the judgement read from the completion equals the gold letter, else 0
    acc_S      = mean of right_j over the completions j in S
    fmt_i      = 1 if the completion is exactly <notes>NON-EMPTY</notes> then <judgement>A|B</judgement>
                 (whitespace between and around them allowed, nothing else), else 0
    len_i      = max(0, 1 - ((n_i - target_tokens) / len_width) ** 2), n_i = tokens inside <notes>
    score_i    = right_i * (acc_S ** power + w_fmt * fmt_i + w_len * len_i)

Defaults: power 4 (the seed's x^4), w_fmt 0.2 (its flat format bonus), target_tokens 128, len_width 128,
w_len 0.2 (the seed gives no weight for its length bonus; 0.2 keeps it at the format bonus's size).

Why this is the seed's rule: the seed rescales each *correct* judgement by the batch accuracy to the fourth
power, so a correct answer is worth little while the model is near chance and close to 1 as it improves,
and both bonuses apply only to a correct judgement. That gives its "chain of desirability" for every
acc_S > 0: right and well-formatted > right, badly formatted > wrong (formatting irrelevant, score 0).
The seed says "batch"; ``scope="group"`` (one prompt's completions) is our default because verl and TRL
both normalise advantages per group, and it is the only scope a streaming verl reward worker can see.
``scope="batch"`` (every completion of one reward call) is the seed's literal rule; TRL supports it.
Note: with per-group std normalisation a constant factor on the correctness term cancels; what the power
changes is the weight of correctness against the two bonuses (at low accuracy the bonuses dominate).

Called per sample (``get_preset("xml_judge")(text, gt)``) there is no group, so acc_S = 1 unless
``group_acc`` is passed: the unscaled reward. The group adapters (``thinkj.rewards.adapters.trl_group``) pass it.

Tokens: ``n_i`` counts word pieces (runs of letters/digits, or single punctuation marks), a tokenizer-free
stand-in; set the weight ``tokenizer`` to a tokenizer path or hub name (e.g. the policy's) to count that
tokenizer's tokens instead (loaded once per process), or pass ``count_tokens`` from Python.

Ground truth: only the label is read (``thinkj.rewards.gold``); an unreadable one scores 0 (nothing can be right)
with ``gold_error`` = 1, and counts as a wrong answer in ``acc_S``, never an exception.

Parsing never raises. The judgement is the content of the ``<judgement>`` tags (A or B, case-insensitive,
surrounding whitespace ignored); several judgement tags that disagree count as no judgement.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from thinkj.rewards.gold import pair_label

XML_KEYS = ("score", "acc", "format", "length_bonus", "notes_tokens", "group_acc", "pred", "gold_error")

# Linear time on any input (a 100 KB completion must not stall a reward worker): the judgement's content cannot
# hold "<", so a greedy class then the closing tag never backtracks; notes are found with str.find, not a lazy
# DOTALL pattern (which rescanned the rest of the text from every unclosed <notes>: 12 s on 14 K of them).
_JUDGEMENT = re.compile(r"<judgement>([^<]*)</judgement>", re.IGNORECASE)
_STRICT = re.compile(r"\s*<notes>(?P<notes>.*?)</notes>\s*<judgement>\s*(?P<j>[AB])\s*</judgement>\s*", re.DOTALL)
_PIECE = re.compile(r"\w+|[^\w\s]")


def word_pieces(text: str) -> int:
    return len(_PIECE.findall(text))


@functools.lru_cache(maxsize=4)
def tokenizer_counter(name: str) -> Callable[[str], int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def parse_xml_judgement(text: Any) -> tuple[str, bool, str]:
    """Return (choice "a"|"b"|"none", well_formed, notes text). Never raises."""
    if not isinstance(text, str):
        return "none", False, ""
    letters = {m.group(1).strip().upper() for m in _JUDGEMENT.finditer(text)}
    choice = "none"
    if len(letters) == 1:
        letter = letters.pop()
        if letter in ("A", "B"):
            choice = letter.lower()
    # Counted first: with one <notes> and one <judgement> the strict pattern matches in one pass.
    strict = _STRICT.fullmatch(text) if text.count("<notes>") == 1 and text.count("<judgement>") == 1 else None
    well_formed = bool(strict and strict.group("notes").strip())
    return choice, well_formed, _notes(text)


def _notes(text: str) -> str:
    """The text between the first ``<notes>`` and the ``</notes>`` after it ("" when there is none)."""
    start = text.find("<notes>")
    if start < 0:
        return ""
    end = text.find("</notes>", start + len("<notes>"))
    return text[start + len("<notes>"):end] if end >= 0 else ""


def length_bonus(n_tokens: int, target_tokens: float = 128, len_width: float = 128) -> float:
    """1 at ``target_tokens``, falling quadratically to 0 at ``target_tokens +- len_width``."""
    if len_width <= 0:
        return 1.0 if n_tokens == target_tokens else 0.0
    return max(0.0, 1.0 - ((n_tokens - target_tokens) / len_width) ** 2)


def xml_judge_reward(text: str, ground_truth: Any, *, power: float = 4.0, w_fmt: float = 0.2, w_len: float = 0.2,
                     target_tokens: float = 128, len_width: float = 128, group_acc: float | None = None,
                     tokenizer: str | None = None, count_tokens: Callable[[str], int] | None = None) -> dict[str, Any]:
    """Per-completion XML judge reward; see the module docstring for the formula."""
    gold = pair_label(ground_truth)
    label = gold.label
    choice, well_formed, notes = parse_xml_judgement(text)
    right = choice == label and label in ("a", "b")
    counter = count_tokens or (tokenizer_counter(str(tokenizer)) if tokenizer else word_pieces)
    n_tokens = counter(notes.strip()) if notes.strip() else 0
    bonus = length_bonus(n_tokens, target_tokens, len_width)
    acc = 1.0 if group_acc is None else min(max(float(group_acc), 0.0), 1.0)
    score = (acc ** power + w_fmt * float(well_formed) + w_len * bonus) if right else 0.0
    return {"score": float(score), "acc": float(right), "format": float(well_formed), "length_bonus": float(bonus),
            "notes_tokens": int(n_tokens), "group_acc": float(acc), "pred": choice, "gold_error": float(bool(gold.error))}


def xml_judge_group(texts: list[str], ground_truths: list[Any], **weights: Any) -> list[dict[str, Any]]:
    """Score one scoring set together: every completion gets ``group_acc`` = the set's accuracy."""
    weights.pop("group_acc", None)
    labels = [pair_label(gt).label for gt in ground_truths]
    rights = [parse_xml_judgement(t)[0] == g and g in ("a", "b") for t, g in zip(texts, labels)]
    acc = sum(rights) / len(rights) if rights else 0.0
    return [xml_judge_reward(t, gt, group_acc=acc, **weights) for t, gt in zip(texts, ground_truths)]


XML_DEFAULTS: dict[str, Any] = {"power": 4.0, "w_fmt": 0.2, "w_len": 0.2, "target_tokens": 128, "len_width": 128,
                                "tokenizer": None, "group_acc": None}
XML_GROUP_DEFAULTS = {k: v for k, v in XML_DEFAULTS.items() if k != "group_acc"}  # the group sets group_acc itself
XML_KINDS = {"group_acc": "float?", "tokenizer": "str?"}  # the settings whose default (None) does not show the kind


def xml_judge_group_reward(prompt: Any, texts: list[str], ground_truths: list[Any], **weights: Any) -> list[dict[str, Any]]:
    """:func:`xml_judge_group` as a group reward (the prompt is not needed: the scoring set is the group)."""
    return xml_judge_group(texts, ground_truths, **weights)
