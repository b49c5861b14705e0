"""Competition-construct reward (seed 002, "Judge Assisted GRPO Tuning: Pirates, Knights, and Vikings").

The completion: ``<competition><pirate>..</pirate><knight>..</knight><viking>..</viking><result>..
<winner>pirate|knight|viking</winner></result></competition>`` followed by the final answer for the user.
Ground truth: the correct final answer (a string or number, or ``{"answer": ...}``).

Components (all weights and constants are keyword overrides; the seed's values are the defaults)::

    tags        sum over the 6 tags of: +tag_ok (0.1) if it opens once and closes once, in that order;
                -tag_dup (0.1) if it opens or closes more than once; -tag_missing (0.2) if it never opens or
                never closes.                                                     range [-1.2, 0.6]
    format      1.0 strict: the text is exactly the construct (whitespace between tags allowed, every
                section non-empty) followed by a non-empty answer; 0.5 partial: all 12 tag markers
                present once and in order; else 0.                                 range [0, 1]
    length      mean over pirate/knight/viking of f(words): words/opt_words up to opt_words, then falling
                linearly to 0 at max_words (a missing section scores 0).           range [0, 1]
    originality knight vs pirate, viking vs pirate and knight: token-trigram Jaccard similarity
                |T(x) & T(y)| / |T(x) | T(y)| of lower-cased word trigrams; a section copies when the
                similarity reaches copy_threshold (0.5). Knight: +0.5 original / -0.5 copying; viking
                likewise against either earlier section. Missing sections add 0.   range [-1, 1]
    winner      1.0 if <winner> holds exactly one of pirate/knight/viking; 0.5 if it names exactly one of
                them among other text; else 0.                                      range [0, 1]
    answer      1.0 if the final answer is right, 0.0 if not, leak_penalty (-1.0) if any construct tag
                appears in the final answer (the format leaked to the user).      range [-1, 1]
    score       w_tags*tags + w_format*format + w_length*length + w_orig*originality + w_winner*winner
                + w_answer*answer + w_reflect*reflection
                (w_reflect = 0, all other w = 1.0 by default: score in [-3.2, 5.6])
    reflection  OFF by default (w_reflect 0). The seed scores each character's self-reflection with a model;
                this is a cheap lexical stand-in: per character min(1, m / reflect_target) where m counts
                self-correction cues ("wait", "let me check", "mistake", "actually", "double-check", "I was
                wrong", "on second thought", "re-check", "verify"), averaged over the three.  range [0, 1]

Ground truth: a bad gold (``None``, ``true``, NaN, a dict without ``answer``, a text with no letter or digit) is
a data error: the answer term is 0 (the leak penalty, which needs no gold, still applies), ``gold_error`` = 1,
never an exception.

Answer matching: a numeric gold matches when the last number of the final answer equals it (commas
ignored, 1e-6 tolerance; ``\\boxed{..}`` content is preferred when present); a text gold matches when its
normalised form (lower case, punctuation dropped, spaces collapsed) appears in the normalised answer. The
seed's model-judged "self-reflection" score is replaced by the optional lexical ``reflection`` term above.
"""

from __future__ import annotations

import math
import re
from typing import Any

from thinkj.rewards.gold import mapping, shown

TAGS = ("competition", "pirate", "knight", "viking", "result", "winner")
CHARACTERS = ("pirate", "knight", "viking")
COMPETITION_KEYS = ("score", "tags", "format", "length", "originality", "winner", "answer", "leak", "copy_max",
                    "reflection", "gold_error")
COMPETITION_DEFAULTS: dict[str, Any] = {
    "w_tags": 1.0, "w_format": 1.0, "w_length": 1.0, "w_orig": 1.0, "w_winner": 1.0, "w_answer": 1.0,
    "w_reflect": 0.0, "reflect_target": 2,
    "tag_ok": 0.1, "tag_dup": 0.1, "tag_missing": 0.2, "opt_words": 150, "max_words": 600, "copy_threshold": 0.5,
    "orig_bonus": 0.5, "copy_penalty": 0.5, "leak_penalty": -1.0, "strict_score": 1.0, "partial_score": 0.5}

COMPETITION_SYSTEM_PROMPT = """Answer every question by staging a contest, in exactly this layout:
<competition>
<pirate>
A pirate works the problem out loud, in pirate speech, showing every step.
</pirate>
<knight>
A knight solves it again in a knightly voice, by a different route; copying the pirate is penalised.
</knight>
<viking>
A viking solves it a third way, in a viking voice; copying the pirate or the knight is penalised.
</viking>
<result>
A dry, sarcastic robot compares the three attempts, checks the best one and names a single winner.
<winner>
pirate, knight or viking (just the word)
</winner>
</result>
</competition>
After the closing tag, answer the user plainly and professionally, using the winner's solution, with no tags."""

_STRICT = re.compile(r"\s*<competition>\s*<pirate>(?P<pirate>.*?)</pirate>\s*<knight>(?P<knight>.*?)</knight>\s*"
                     r"<viking>(?P<viking>.*?)</viking>\s*<result>(?P<result>.*?)<winner>(?P<winner>.*?)</winner>\s*"
                     r"</result>\s*</competition>(?P<answer>.*)", re.DOTALL)
_ANY_TAG = re.compile(r"</?\s*(?:competition|pirate|knight|viking|result|winner)\s*>", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9']+")
_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_CLEAN_NUMBER = re.compile(r"[+-]?\d[\d,]*(?:\.\d+)?|[+-]?\.\d+")
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_REFLECT = re.compile(r"\b(?:wait|let me (?:check|re-?check|verify)|mistake|actually|double[- ]check|i was wrong|"
                      r"on second thought|re-?check|verify|verified)\b", re.IGNORECASE)


def tag_counts(text: str) -> dict[str, tuple[int, int]]:
    return {t: (text.count(f"<{t}>"), text.count(f"</{t}>")) for t in TAGS}


def tag_structure(text: str, tag_ok: float = 0.1, tag_dup: float = 0.1, tag_missing: float = 0.2) -> float:
    total = 0.0
    for tag, (opens, closes) in tag_counts(text).items():
        if opens == 0 or closes == 0:
            total -= tag_missing
        elif opens > 1 or closes > 1:
            total -= tag_dup
        elif text.find(f"<{tag}>") < text.find(f"</{tag}>"):
            total += tag_ok
    return total


def _section(text: str, tag: str) -> str | None:
    start, end = text.find(f"<{tag}>"), text.find(f"</{tag}>")
    if start < 0 or end < start:
        return None
    return text[start + len(tag) + 2:end]


def final_answer(text: str) -> str:
    end = text.rfind("</competition>")
    return text[end + len("</competition>"):] if end >= 0 else ""


def format_level(text: str, strict_score: float = 1.0, partial_score: float = 0.5) -> float:
    counts = tag_counts(text)
    m = _STRICT.fullmatch(text)
    once = all(c == (1, 1) for c in counts.values())
    if m and once and all(m.group(k).strip() for k in ("pirate", "knight", "viking", "result", "winner", "answer")):
        return strict_score
    if once:
        order = ["<competition>", "<pirate>", "</pirate>", "<knight>", "</knight>", "<viking>", "</viking>",
                 "<result>", "<winner>", "</winner>", "</result>", "</competition>"]
        positions = [text.find(marker) for marker in order]
        if positions == sorted(positions):
            return partial_score
    return 0.0


def section_length_score(words: int, opt_words: float = 150, max_words: float = 600) -> float:
    if words <= 0 or opt_words <= 0:
        return 0.0
    if words <= opt_words:
        return words / opt_words
    if max_words <= opt_words:
        return 0.0
    return max(0.0, 1.0 - (words - opt_words) / (max_words - opt_words))


def trigrams(text: str) -> set[tuple[str, str, str]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def jaccard(x: str, y: str) -> float:
    a, b = trigrams(x), trigrams(y)
    if not a or not b:
        return 1.0 if a == b and x.strip() and x.strip().lower() == y.strip().lower() else 0.0
    return len(a & b) / len(a | b)


def winner_score(winner: str | None) -> float:
    if winner is None:
        return 0.0
    value = winner.strip().lower()
    if value in CHARACTERS:
        return 1.0
    named = {c for c in CHARACTERS if re.search(rf"\b{c}\b", value)}
    return 0.5 if len(named) == 1 else 0.0


def _normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def read_answer_gold(gold: Any) -> tuple[str | float | None, str]:
    """(the gold answer: a finite number or a text, "") or (None, what is wrong). Never raises.

    A number (not a bool, finite) or a string that is a clean number (commas allowed: ``"1,000"``) is numeric; other
    strings are text gold and need at least one letter or digit. ``{"answer": ...}`` is read the same way."""
    fields = mapping(gold)
    if fields is not None:
        if "answer" not in fields:
            return None, "ground_truth.answer: missing"
        gold = fields["answer"]
    if hasattr(gold, "item") and not isinstance(gold, (str, bytes)):  # a numpy scalar from verl's parquet
        try:
            gold = gold.item()
        except (TypeError, ValueError):
            return None, f"ground_truth: expected an answer (text or number), got {shown(gold)}"
    if gold is None or isinstance(gold, bool) or not isinstance(gold, (str, int, float)):
        return None, f"ground_truth: expected an answer (text or number), got {shown(gold)}"
    if isinstance(gold, (int, float)):
        try:
            number = float(gold)
        except OverflowError:
            number = math.inf
        return (number, "") if math.isfinite(number) else (None, f"ground_truth: must be a finite number, got {shown(gold)}")
    text = gold.strip()
    if _CLEAN_NUMBER.fullmatch(text):
        number = float(text.replace(",", ""))
        if math.isfinite(number):
            return number, ""
    if not _normalise(text):
        return None, f"ground_truth: the answer {shown(gold)} has no letter or digit to match"
    return text, ""


def answer_gold_problem(gold: Any) -> str:
    return read_answer_gold(gold)[1]


def answer_matches(answer: str, gold: Any) -> bool:
    """Whether the final answer holds the gold (see the module docstring); False for a gold that is not readable."""
    value, _ = read_answer_gold(gold)
    if value is None:
        return False
    boxed = _BOXED.findall(answer)
    target = boxed[-1] if boxed else answer
    if isinstance(value, str):
        norm = _normalise(value)
        return f" {norm} " in f" {_normalise(target)} "
    numbers = _NUM.findall(target)
    if not numbers:
        return False
    try:
        return abs(float(numbers[-1].replace(",", "")) - value) <= 1e-6
    except ValueError:
        return False


def competition_reward(text: str, ground_truth: Any, **weights: Any) -> dict[str, Any]:
    """The seed-002 construct reward; see the module docstring for every term."""
    w = {**COMPETITION_DEFAULTS, **weights}
    text = text if isinstance(text, str) else ""
    tags = tag_structure(text, w["tag_ok"], w["tag_dup"], w["tag_missing"])
    fmt = format_level(text, w["strict_score"], w["partial_score"])
    sections = {c: _section(text, c) for c in CHARACTERS}
    length = sum(section_length_score(len(_WORD.findall((s or "").lower())), w["opt_words"], w["max_words"])
                 for s in sections.values()) / len(CHARACTERS)
    originality, copy_max = 0.0, 0.0
    for later, earlier in (("knight", ("pirate",)), ("viking", ("pirate", "knight"))):
        if sections[later] is None:
            continue
        sims = [jaccard(sections[later], sections[e]) for e in earlier if sections[e] is not None]
        top = max(sims, default=0.0)
        copy_max = max(copy_max, top)
        originality += -w["copy_penalty"] if top >= w["copy_threshold"] else w["orig_bonus"]
    target = max(float(w["reflect_target"]), 1e-9)
    reflection = sum(min(1.0, len(_REFLECT.findall(s or "")) / target) for s in sections.values()) / len(CHARACTERS)
    result = _section(text, "result")
    winner = _section(result, "winner") if result is not None else None
    win = winner_score(winner)
    answer_text = final_answer(text)
    leak = bool(_ANY_TAG.search(answer_text))
    gold_error = bool(answer_gold_problem(ground_truth))
    answer = w["leak_penalty"] if leak else (1.0 if answer_matches(answer_text, ground_truth) else 0.0)
    score = (w["w_tags"] * tags + w["w_format"] * fmt + w["w_length"] * length + w["w_orig"] * originality
             + w["w_winner"] * win + w["w_answer"] * answer + w["w_reflect"] * reflection)
    return {"score": float(score), "tags": float(tags), "format": float(fmt), "length": float(length),
            "originality": float(originality), "winner": float(win), "answer": float(answer), "leak": float(leak),
            "copy_max": float(copy_max), "reflection": float(reflection), "gold_error": float(gold_error)}
