"""Rule-based rewards for pairwise judges (Think-J §3.2.2, Table 8, Appendix A.1).

Every function here is pure: (output text, ground truth, weights) -> dict with exactly the keys in
``REWARD_KEYS``, for every input, so verl can stack them into one batch. Ground truth is
``{"label": "a" | "b" | "tie", "strength": int | None}`` where ``label`` is the better position as
displayed in the prompt.

The Think-J reward. ASSUMPTION: the paper's equations (3)-(6) were lost in extraction; this is our
reading of §3.2.2 and Table 8 (the alternative reading -- the public code's subtractive strength term --
is one preset away: ``thinkj_subtractive``)::

    R = w_acc * R_acc + w_fmt * R_fmt + w_str * R_str

    R_acc = 1 if the verdict read after </think> equals the gold label, else 0
            (unparsable and conflicting answers get 0)
    R_fmt = 1 if the output is well-formed in the parser's strict sense (one leading think block,
            non-empty thinking, final line exactly the template with a strength in 1..3), else 0
    R_str = 1 - |s_pred - s_gold| / 2   when the verdict is right and both strengths are in 1..3,
            else 0                        (1, 0.5, 0 for a strength off by 0, 1, 2)

With both orders of a comparison in one step, the consistency term ``w_con * R_con`` is added by the twin
scorers (``thinkj.rewards.designs.twins`` has its definition); every preset's ``w_con`` is 0, so the paper's reward is
unchanged unless it is set.

Bounds: 0 <= R <= w_acc + w_fmt + w_str. The strength term only ever adds to a right verdict, so a
judge cannot trade direction for strength. Presets: ``thinkj_qwen`` (1, 1, 0.2), best for
Qwen2.5-32B in Table 8, and ``thinkj_llama`` (1, 1, 0), best for Llama-3-8B.

Edge cases, decided so that no group dies silently:
* gold ``tie``: the Think-J answer has no tie option, so R_acc = R_str = 0 for every output and only
  the format term separates samples; ``gold_tie`` = 1 is logged so the fraction shows in verl's
  metrics. The seed-set builder leaves ties out of RL data and counts them.
* gold strength missing (``None`` or 0): R_str = 0 for every output (the term is switched off for
  that pair, never a penalty); accuracy and format still separate samples.
* a bad ground truth never raises (``thinkj.rewards.gold`` has the rules): a bad label gives R_acc = R_str = 0
  and keeps the format term, a bad strength (2.7, 7, NaN, ``true``, ``"2"``) gives R_str = 0; either sets
  ``gold_error`` = 1.
"""

from __future__ import annotations

from typing import Any

from thinkj.prompts import AnswerFormat
from thinkj.rewards.gold import pair_gold
from thinkj.verdict_parser import STRENGTH_RANGE, parse_verdict

# Table 8's best weights per model family, written once: the presets thinkj_qwen / thinkj_llama (registry.py),
# thinkj_reward's keyword defaults and Table 8's column defaults (tables/layouts.py) read them.
QWEN_WEIGHTS: dict[str, float] = {"w_acc": 1.0, "w_fmt": 1.0, "w_str": 0.2, "w_con": 0.0}
LLAMA_WEIGHTS: dict[str, float] = {**QWEN_WEIGHTS, "w_str": 0.0}
REWARD_KEYS = ("score", "acc", "format", "strength", "pred", "pred_strength", "gold_tie", "gold_error")

STRENGTH_FORMAT = AnswerFormat(think=True, strength="required")
COT_FORMAT = AnswerFormat(think=True, strength="forbidden")
SCORES_FORMAT = AnswerFormat(think=True, strength="forbidden", scores=True)


def _result(score: float, acc: float, fmt: float, strength: float, pred: str, pred_strength: int | None,
            gold_tie: bool, gold_error: bool = False) -> dict[str, Any]:
    return {"score": float(score), "acc": float(acc), "format": float(fmt), "strength": float(strength),
            "pred": pred, "pred_strength": -1 if pred_strength is None else int(pred_strength),
            "gold_tie": float(gold_tie), "gold_error": float(gold_error)}


def _in_range(value: int | None) -> bool:
    return value is not None and STRENGTH_RANGE[0] <= value <= STRENGTH_RANGE[1]


def thinkj_reward(text: str, ground_truth: Any, *, w_acc: float = QWEN_WEIGHTS["w_acc"],
                  w_fmt: float = QWEN_WEIGHTS["w_fmt"], w_str: float = QWEN_WEIGHTS["w_str"],
                  w_con: float = QWEN_WEIGHTS["w_con"], fmt: AnswerFormat = STRENGTH_FORMAT) -> dict[str, Any]:
    """The Think-J rule-based reward R = w_acc*R_acc + w_fmt*R_fmt + w_str*R_str (see module docstring).

    ``w_con`` is the consistency term's weight: one sample cannot pay it (it needs the other order's rollouts), so it
    is added by the twin scorers (``thinkj.rewards.designs.twins``) and ignored here."""
    gold = pair_gold(ground_truth)
    label, gold_strength = gold.label, gold.strength
    verdict = parse_verdict(text, fmt, strict=True)
    right = label in ("a", "b") and verdict.choice == label
    r_acc = 1.0 if right else 0.0
    r_fmt = 1.0 if verdict.well_formed else 0.0
    r_str = 0.0
    if right and _in_range(gold_strength) and _in_range(verdict.strength):
        r_str = 1.0 - abs(verdict.strength - gold_strength) / (STRENGTH_RANGE[1] - STRENGTH_RANGE[0])
    score = w_acc * r_acc + w_fmt * r_fmt + w_str * r_str
    return _result(score, r_acc, r_fmt, r_str, verdict.choice, verdict.strength, label == "tie", bool(gold.error))


def thinkj_subtractive_reward(text: str, ground_truth: Any, *, w_acc: float = 1.0, w_fmt: float = 1.0,
                              w_str: float = 1.0, w_con: float = 0.0,
                              fmt: AnswerFormat = STRENGTH_FORMAT) -> dict[str, Any]:
    """The alternative reading of the lost equations: the public code's subtractive strength term on the paper's
    answer sentence. R_str = -|s_pred - s_gold| / 8 for a right verdict with a strength in 1..3 (0 without a gold
    strength), -0.5 for a right verdict whose strength is outside 1..3 or missing, else 0. With w_fmt = 0 and
    w_str = 1 it is the public reward_strength.py arithmetic (see ``strength_public``) read by our strict parser."""
    gold = pair_gold(ground_truth)
    label, gold_strength = gold.label, gold.strength
    verdict = parse_verdict(text, fmt, strict=True)
    right = label in ("a", "b") and verdict.choice == label
    r_str = 0.0
    if right:
        if not _in_range(verdict.strength):
            r_str = -0.5
        elif _in_range(gold_strength):
            r_str = -abs(verdict.strength - gold_strength) / 8
    r_acc, r_fmt = float(right), float(verdict.well_formed)
    return _result(w_acc * r_acc + w_fmt * r_fmt + w_str * r_str, r_acc, r_fmt, r_str, verdict.choice,
                   verdict.strength, label == "tie", bool(gold.error))


def margin_reward(text: str, ground_truth: Any, *, w_fmt: float = 1.0, w_margin: float = 1.0,
                  fmt: AnswerFormat = SCORES_FORMAT) -> dict[str, Any]:
    """Margin reward for the double-score judge. ASSUMPTION: our reading of Appendix A.1 (its equation was lost in
    extraction) on the paper's answer sentence ``... are [[s_a]] and [[s_b]], respectively.``, with a format
    term. The public code's form (``<Score 1>`` tags, no format term, 0.5 unparsed) is ``margin_public``.

    With scores (s_a, s_b) in 0..100 and margin m = |s_a - s_b| / 100::

        R = w_fmt * R_fmt + (1 + w_margin * m)   if the higher score is the gold response
        R = w_fmt * R_fmt - w_margin * m         if the lower score is the gold response
        R = w_fmt * R_fmt                        for equal or unparsable scores

    A confident right answer earns more and a confident wrong answer loses more -- exactly the incentive
    the paper reports being hacked by pushing scores to 0 and 100 (Table 9), kept so that it reproduces.
    """
    gold = pair_gold(ground_truth, strength=False)
    label = gold.label
    verdict = parse_verdict(text, fmt, strict=True)
    r_fmt = 1.0 if verdict.well_formed else 0.0
    score = w_fmt * r_fmt
    right = False
    margin = 0.0
    if verdict.scores is not None and verdict.choice in ("a", "b") and label in ("a", "b"):
        margin = min(abs(verdict.scores[0] - verdict.scores[1]), 100.0) / 100.0
        right = verdict.choice == label
        score += (1.0 + w_margin * margin) if right else -w_margin * margin
    return _result(score, float(right), r_fmt, margin if right else 0.0, verdict.choice, None, label == "tie",
                   bool(gold.error))
