"""The one verdict parser, shared by the rewards and the evaluation.

``parse_verdict(text)`` reads a judge's output and returns a :class:`Verdict`. Rules:

* The verdict is read only from the *answer*: the text after the last ``</think>``. Text inside the
  thinking never counts, so a judge cannot hedge there. Without a closing tag there is no answer
  (choice ``none``), except in lenient mode for outputs that use no think tags at all.
* Strict mode (rewards): well-formed means exactly one ``<think>`` at the start, exactly one
  ``</think>``, non-empty thinking, exactly one verdict in the answer, and the answer's final line
  is the template sentence verbatim, e.g.
  ``Therefore, Response (a) is better, and the preference strength is [[2]].`` with a strength of
  1-3 (when the template asks for one).
* Lenient mode (scoring other judges): think tags optional and case-insensitive; verdicts may be
  bold, lower-case, without parentheses, numbered ("Response 1 is better" = (a)), in MT-Bench's
  ``[[A]]``/``[[B]]``/``[[C]]`` form, Prometheus' ``[RESULT] A``/``[RESULT] B``, or a last line that is
  only ``Output (a)`` / ``Output (1)`` (OffsetBias) -- the forms RewardBench's ``process_judgement``
  (rewardbench/generative.py) reads; ties are recognised. Whitespace runs are collapsed first, so every
  pattern runs in linear time on any input (scripts/speed/parser_worst_case.py).
* Several verdict sentences that agree: that choice, but not well-formed. Verdicts that disagree
  (a *conflicting* answer): choice ``none`` with reason ``conflicting verdicts`` -- it is scored as
  unparsable, never as either side, so hedging cannot earn accuracy.
* A strength outside 1-3 is returned as parsed but makes the answer ill-formed; a strength that is not
  an integer is ``None``. Scores that are not finite numbers (400-digit literals) make the answer
  unparsable: a Verdict never carries ``inf`` or ``nan``.
* It never raises: anything that is not a string is an unparsable answer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from thinkj.prompts import AnswerFormat

OPEN, CLOSE = "<think>", "</think>"
STRENGTH_RANGE = (1, 3)
SCORE_RANGE = (0, 100)

_VERDICT = re.compile(r"response\s*\(\s*([ab])\s*\)\s*is\s+(?:the\s+)?better", re.IGNORECASE)
# Lenient patterns run on text whose whitespace runs are collapsed to one space (_WS): no two unbounded
# quantifiers can compete for the same characters, which is what made the old patterns quadratic.
_WS = re.compile(r"\s+")
# They see lower-cased text, so none needs IGNORECASE (which is several times slower); each runs only when
# its literal trigger is present.
_LENIENT = (("better", re.compile(r"(?:response|output|assistant|answer) ?\(? ?([ab12]) ?\)? ?(?:is|was) "
                                  r"(?:the |slightly |much |clearly )?better")),
            ("superior", re.compile(r"(?:response|output|assistant|answer) ?\(? ?([ab12]) ?\)? ?(?:is|was) "
                                    r"(?:the |slightly |much |clearly )?superior")),
            ("prefer", re.compile(r"(?:response|output|assistant|answer) ?\(? ?([ab12]) ?\)? ?(?:is|was) "
                                  r"(?:the |slightly |much |clearly )?(?:preferred|preferable)")),
            ("[[", re.compile(r"\[\[ ?([abc]) ?\]\]")),
            ("[result]", re.compile(r"\[result\] ?\(?([ab])\)?(?![a-z0-9])")))
_BARE_OUTPUT = re.compile(r"output ?\(([ab12])\)\.?")
_TIE = re.compile(r"\b(?:it is a tie|it's a tie|(?:both|the two) responses are equally (?:good|bad|helpful)"
                  r"|\[\[ ?tie ?\]\])")
_POSITION = {"a": "a", "b": "b", "1": "a", "2": "b", "c": "tie"}
_STRENGTH = re.compile(r"preference\s+strength\s+is\s*\[\[([^\[\]]{0,32})\]\]", re.IGNORECASE)
_STRICT_STRENGTH = re.compile(r"Therefore, Response \(([ab])\) is better, and the preference strength is \[\[(\d+)\]\]\.")
_STRICT_PLAIN = re.compile(r"Therefore, Response \(([ab])\) is better\.")
_SCORES = re.compile(r"\[\[\s*(-?\d+(?:\.\d+)?)\s*\]\]\s*and\s*\[\[\s*(-?\d+(?:\.\d+)?)\s*\]\]", re.IGNORECASE)
_STRICT_SCORES = re.compile(r"Therefore, the quality scores for Response \(a\) and Response \(b\) are "
                            r"\[\[(\d+)\]\] and \[\[(\d+)\]\], respectively\.")
# The public Think-J double-score answer: <Score 1>x</Score 1> ... <Score 2>y</Score 2> (lenient mode only).
_TAG_SCORE = (re.compile(r"<score 1> ?(\d+(?:\.\d+)?|\.\d+) ?</score 1>"),
              re.compile(r"<score 2> ?(\d+(?:\.\d+)?|\.\d+) ?</score 2>"))
_THINK_ANY = re.compile(r"</?think>", re.IGNORECASE)
_INT = re.compile(r"\s*[+-]?\d+\s*")

DEFAULT_FORMAT = AnswerFormat(think=True, strength="required")


@dataclass(frozen=True, slots=True)
class Verdict:
    choice: str  # "a" | "b" | "tie" | "none"
    strength: int | None = None
    well_formed: bool = False
    reason: str = ""  # why not well-formed ("" when it is)
    scores: tuple[float, float] | None = None  # double-score answers only

    @property
    def parsed(self) -> bool:
        return self.choice != "none"


def _none(reason: str) -> Verdict:
    return Verdict("none", None, False, reason)


def _last_line(text: str) -> str:
    text = text.rstrip()
    return text[text.rfind("\n") + 1:].strip()


def _split_answer(text: str, fmt: AnswerFormat, strict: bool) -> tuple[str | None, str]:
    """Return (answer, problem with the think block or "")."""
    if strict:
        close = text.rfind(CLOSE)
        if close < 0:
            if not fmt.think:
                return text, "" if OPEN not in text else "unexpected <think> tag"
            return None, "unclosed <think>" if OPEN in text else "no <think> block"
        if not fmt.think:
            return text[close + len(CLOSE):], "unexpected <think> block"
        head = text[:close]
        problem = ""
        if text.count(OPEN) != 1 or text.count(CLOSE) != 1:
            problem = "more than one think block"
        elif not head.lstrip().startswith(OPEN):
            problem = "text before <think>"
        elif not head.lstrip()[len(OPEN):].strip():
            problem = "empty thinking"
        return text[close + len(CLOSE):], problem
    # Lenient: tags case-insensitive; no tags at all means the whole text is the answer.
    tags = list(_THINK_ANY.finditer(text)) if "think>" in text.lower() else []
    if not tags:
        return text, ""
    last = tags[-1]
    if last.group(0).lower() == OPEN:
        return None, "unclosed <think>"
    return text[last.end():], ""


def parse_verdict(text: object, fmt: AnswerFormat | None = None, *, strict: bool = True) -> Verdict:
    """Parse a judge output into a Verdict. See the module docstring for the rules. Never raises."""
    try:
        return _parse(text, fmt or DEFAULT_FORMAT, strict)
    except Exception as err:  # a parser bug must not take a training run down; report it instead
        return _none(f"parser error: {type(err).__name__}")


def _parse(text: object, fmt: AnswerFormat, strict: bool) -> Verdict:
    if not isinstance(text, str):
        return _none(f"not a string ({type(text).__name__})")
    if not text.strip():
        return _none("empty output")
    answer, problem = _split_answer(text, fmt, strict)
    if answer is None:
        return _none(problem)
    if fmt.scores:
        return _parse_scores(answer, problem, strict)
    plain = answer.replace("*", "") if "*" in answer else answer
    if strict:
        found = [m.lower() for m in _VERDICT.findall(plain)]
    else:
        low = _WS.sub(" ", plain).lower()
        found = [_POSITION[c] for trigger, pattern in _LENIENT if trigger in low for c in pattern.findall(low)]
        bare = _BARE_OUTPUT.fullmatch(_last_line(answer.replace("*", "")).lower())
        if bare:
            found.append(_POSITION[bare.group(1)])
        if ("tie" in low or "equally" in low) and _TIE.search(low):
            found.append("tie")
    choices, count = set(found), len(found)
    if not choices:
        return _none(problem or ("no verdict after </think>" if fmt.think else "no verdict"))
    if len(choices) > 1:
        return _none("conflicting verdicts")
    choice = choices.pop()
    reasons = [problem] if problem else []
    if count > 1 and strict:
        reasons.append("several verdict sentences")

    strength = None
    matches = _STRENGTH.findall(plain)
    match = matches[-1] if matches else None
    if match is not None:
        raw = match
        if _INT.fullmatch(raw):
            strength = int(raw)
            if not STRENGTH_RANGE[0] <= strength <= STRENGTH_RANGE[1]:
                reasons.append("strength out of range")
        else:
            reasons.append("strength is not a number")
    if strict:
        if fmt.strength == "required" and match is None:
            reasons.append("no preference strength")
        if fmt.strength == "forbidden" and match is not None:
            reasons.append("unexpected preference strength")
        line = _last_line(answer)
        pattern = _STRICT_STRENGTH if match is not None else _STRICT_PLAIN
        if not reasons and not pattern.fullmatch(line):
            reasons.append("final line does not match the template")
    return Verdict(choice, strength, not reasons, "; ".join(reasons))


def _parse_scores(answer: str, problem: str, strict: bool) -> Verdict:
    plain = answer.replace("*", "")
    matches = _SCORES.findall(plain)
    if not matches and not strict and "<score" in plain.lower():
        low = plain.lower()
        firsts, seconds = (pattern.findall(low) for pattern in _TAG_SCORE)
        if len(firsts) == len(seconds):
            matches = list(zip(firsts, seconds))
    if not matches:
        return _none(problem or "no scores")
    if len({m for m in matches}) > 1:
        return _none("conflicting scores")
    score_a, score_b = float(matches[0][0]), float(matches[0][1])
    if not (math.isfinite(score_a) and math.isfinite(score_b)):
        return _none("score is not a finite number")
    reasons = [problem] if problem else []
    if len(matches) > 1 and strict:
        reasons.append("several score sentences")
    for score in (score_a, score_b):
        if not SCORE_RANGE[0] <= score <= SCORE_RANGE[1]:
            reasons.append("score out of range")
            break
    if strict and not reasons and not _STRICT_SCORES.fullmatch(_last_line(answer)):
        reasons.append("final line does not match the template")
    choice = "a" if score_a > score_b else "b" if score_b > score_a else "tie"
    return Verdict(choice, None, not reasons, "; ".join(reasons), (score_a, score_b))
