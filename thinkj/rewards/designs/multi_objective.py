"""Multi-objective scoring reward (seed 004, "Designing Reward Functions for GRPO"), and the pointwise
HelpSteer2-attribute judge it trains.

The completion is a list of integer scores; the ground truth the gold list (HelpSteer2: helpfulness,
correctness, coherence, complexity, verbosity, each 0-4). With predictions p (every standalone integer in
the completion, in order), gold g, n = len(g)::

    structural failure: len(p) != n (or nothing parsed)   ->  score = failure_penalty (-0.5), parts 0
    exact     = #{i: p_i == g_i} / n
    off_by_one= sum_i (1 + exact_bonus if p_i == g_i, 1 if |p_i - g_i| == 1, else 0) / (n * (1 + exact_bonus))
    mae       = max(0, 1 - mean_i |p_i - g_i| / max_mae)
    format    = 0.5 [right count] + 0.3 [text is only digits and whitespace]
                + 0.2 [stripped text == the predictions joined by single spaces]
    score     = w_exact*exact + w_off*off_by_one + w_mae*mae + w_format*format + perfect_bonus*[p == g]

Defaults are the seed's: weights 0.3 / 0.3 / 0.25 / 0.15, exact_bonus 0.3, max_mae 5, failure -0.5,
perfect bonus 0.1. A gold that is not a list of 1-64 whole numbers (``read_scores_gold``: 2.7, ``true``, ``"2"``,
NaN, a missing ``scores`` key, JSON that does not parse) is a data error: score 0, every part 0,
``gold_error`` = 1, never an exception. Bounds: failure_penalty <= score <= w_exact + w_off + w_mae + w_format + perfect_bonus
(1.1 with the defaults); for a parsed answer score >= 0. The seed's group advantage rules (zero-std guard,
diversity check) are :func:`group_advantages` / :func:`check_diversity`, and the group preset
``multi_objective`` applies the diversity check inside verl and TRL (see ``thinkj.rewards.adapters.trl_group``).

HelpSteer2 judge: template ``helpsteer2_attributes_v1`` asks for the five scores as one line of
space-separated integers; :func:`build_attribute_rows` turns HelpSteer2 rows (``prompt``, ``response`` and
the five attribute columns) into verl/TRL rows with ``ground_truth = {"scores": [...]}``.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

from thinkj.prompts import AnswerFormat, Template, get_template, register
from thinkj.records import PreferencePair, RecordError
from thinkj.rewards.gold import mapping, parse_json_text, shown, whole_number

HS2_ATTRIBUTES = ("helpfulness", "correctness", "coherence", "complexity", "verbosity")
MULTI_KEYS = ("score", "exact", "off_by_one", "mae", "format", "structural_failure", "perfect", "n_pred", "gold_error")
MULTI_DEFAULTS: dict[str, Any] = {"w_exact": 0.3, "w_off": 0.3, "w_mae": 0.25, "w_format": 0.15, "exact_bonus": 0.3,
                                  "max_mae": 5.0, "failure_penalty": -0.5, "perfect_bonus": 0.1}
_RUN = re.compile(r"[\w.]+")
_LEADING_DIGITS = re.compile(r"\d+")
_DIGIT = re.compile(r"\d")
_ONLY_DIGITS = re.compile(r"^[\d\s]+$")
_MAX_ITEMS = 64  # a completion listing more numbers than this is a failure, not a slow parse
_MAX_DIGITS = 18  # longer digit runs are clamped: int() of > 4,300 digits raises, and no score is that large


def _integers(text: str):
    """Standalone integers: a run of word characters and dots that starts with digits and holds no further digit
    (``3``, ``3rd``, ``-2``; not ``3.5``, ``v2``, ``3a4``); a ``-`` not glued to a word makes it negative.
    One pass over the runs, so linear in the text (a lookahead pattern backtracked quadratically on long runs)."""
    for run in _RUN.finditer(text):
        digits = _LEADING_DIGITS.match(run.group())
        if digits is None or _DIGIT.search(run.group(), digits.end()):
            continue
        start = run.start()
        negative = start > 0 and text[start - 1] == "-" and not (start > 1 and _RUN.match(text[start - 2]))
        value = digits.group()
        number = int(value) if len(value) <= _MAX_DIGITS else 10 ** _MAX_DIGITS
        yield -number if negative else number


def parse_scores(text: Any) -> list[int]:
    """Every standalone integer in the text, in order (never raises)."""
    if not isinstance(text, str):
        return []
    return list(itertools.islice(_integers(text), _MAX_ITEMS + 1))


def read_scores_gold(gt: Any) -> tuple[list[int] | None, str]:
    """(gold scores, "") or (None, what is wrong), from a list, ``{"scores": [...]}``, a dict of the five
    attribute columns, or their JSON text. Never raises: each score must be a whole number (``3`` or ``3.0``; not
    ``2.7``, ``true``, ``"2"``, NaN or infinity) of magnitude at most 10^18, and there are 1 to 64 of them."""
    if isinstance(gt, str):
        gt, problem = parse_json_text(gt)
        if problem:
            return None, f"ground_truth: {problem}"
    if hasattr(gt, "tolist") and not isinstance(gt, (str, bytes)):
        gt = gt.tolist()
    fields = mapping(gt)
    if fields is not None:
        if "scores" in fields:
            gt = fields["scores"]
            gt = gt.tolist() if hasattr(gt, "tolist") else gt
        elif all(a in fields for a in HS2_ATTRIBUTES):
            gt = [fields[a] for a in HS2_ATTRIBUTES]
        else:
            return None, f"ground_truth: expected 'scores' or the columns {', '.join(HS2_ATTRIBUTES)}"
    if not isinstance(gt, (list, tuple)) or not gt:
        return None, f"ground_truth: expected a non-empty list of integer scores, got {shown(gt)}"
    if len(gt) > _MAX_ITEMS:
        return None, f"ground_truth: {len(gt)} scores, at most {_MAX_ITEMS} can be matched"
    scores = [whole_number(v) for v in gt]
    for value, score in zip(gt, scores):
        if score is None or abs(score) > 10 ** _MAX_DIGITS:
            return None, f"ground_truth: scores must be whole numbers, got {shown(value)}"
    return scores, ""


def scores_gold_problem(gt: Any) -> str:
    return read_scores_gold(gt)[1]


def exact_match(pred: Sequence[int], gold: Sequence[int]) -> float:
    if not pred or len(pred) != len(gold):
        return 0.0
    return sum(p == g for p, g in zip(pred, gold)) / len(gold)


def off_by_one(pred: Sequence[int], gold: Sequence[int], exact_bonus: float = 0.3) -> float:
    if not pred or len(pred) != len(gold):
        return 0.0
    total = sum((1.0 + exact_bonus) if p == g else (1.0 if abs(p - g) == 1 else 0.0) for p, g in zip(pred, gold))
    return total / (len(gold) * (1.0 + exact_bonus))


def mae_score(pred: Sequence[int], gold: Sequence[int], max_mae: float = 5.0) -> float:
    if not pred or len(pred) != len(gold):
        return 0.0
    mae = sum(abs(p - g) for p, g in zip(pred, gold)) / len(gold)
    return max(0.0, 1.0 - mae / max_mae) if max_mae > 0 else float(mae == 0)


def format_score(pred: Sequence[int], gold: Sequence[int], text: str) -> float:
    stripped = text.strip() if isinstance(text, str) else ""
    score = 0.5 if len(pred) == len(gold) else 0.0
    if _ONLY_DIGITS.match(stripped):
        score += 0.3
    if pred and stripped == " ".join(str(p) for p in pred):
        score += 0.2
    return score


def multi_objective_reward(text: str, ground_truth: Any, *, w_exact: float = 0.3, w_off: float = 0.3,
                           w_mae: float = 0.25, w_format: float = 0.15, exact_bonus: float = 0.3, max_mae: float = 5.0,
                           failure_penalty: float = -0.5, perfect_bonus: float = 0.1) -> dict[str, Any]:
    """The seed-004 combined reward; see the module docstring."""
    gold, _ = read_scores_gold(ground_truth)
    pred = parse_scores(text)
    if gold is None:  # a data error: every term compares with the gold, so all are 0
        return {"score": 0.0, "exact": 0.0, "off_by_one": 0.0, "mae": 0.0, "format": 0.0, "structural_failure": 0.0,
                "perfect": 0.0, "n_pred": len(pred), "gold_error": 1.0}
    if len(pred) != len(gold):
        return {"score": float(failure_penalty), "exact": 0.0, "off_by_one": 0.0, "mae": 0.0, "format": 0.0,
                "structural_failure": 1.0, "perfect": 0.0, "n_pred": len(pred), "gold_error": 0.0}
    ex, ob, ma, fm = (exact_match(pred, gold), off_by_one(pred, gold, exact_bonus), mae_score(pred, gold, max_mae),
                      format_score(pred, gold, text))
    perfect = pred == gold
    score = w_exact * ex + w_off * ob + w_mae * ma + w_format * fm + (perfect_bonus if perfect else 0.0)
    return {"score": float(score), "exact": ex, "off_by_one": ob, "mae": ma, "format": fm, "structural_failure": 0.0,
            "perfect": float(perfect), "n_pred": len(pred), "gold_error": 0.0}


def group_advantages(rewards: Sequence[float], eps: float = 1e-8, min_std: float = 0.01) -> list[float]:
    """(r - mean) / (std + eps) within one group; all zeros for a single sample or std < ``min_std``."""
    n = len(rewards)
    if n <= 1:
        return [0.0] * n
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    if not std >= min_std:  # also catches NaN
        return [0.0] * n
    return [(r - mean) / (std + eps) for r in rewards]


def check_diversity(completions: Sequence[str], min_unique_ratio: float = 0.5) -> bool:
    """True when at least ``min_unique_ratio`` of the completions are distinct."""
    return bool(completions) and len(set(completions)) / len(completions) >= min_unique_ratio


# ---------------------------------------------------------------------------------------------
# The pointwise HelpSteer2 judge: template, parser (parse_scores above), data builder.

def _attributes_prompt(pair: PreferencePair, verdict: str | None, level: int | None) -> list[dict[str, str]]:
    # Pointwise: only the conversation and response (a) are shown; response (b) is ignored.
    rubric = ("Rate the assistant response below on five attributes, each an integer from 0 (worst / least) to "
              "4 (best / most):\n"
              "helpfulness - how useful it is for the user's request overall;\n"
              "correctness - whether its facts are right and it covers what it should;\n"
              "coherence - how clear and consistent it is;\n"
              "complexity - how much expertise it takes to write (0 basic, 4 expert);\n"
              "verbosity - how long and detailed it is relative to what was asked (0 terse, 4 very long).\n"
              "Answer with the five integers in that order, separated by single spaces, and nothing else, "
              "for example: 3 4 4 1 2")
    conv = "\n\n".join(f"[{m['role'].capitalize()}]\n{m['content']}" for m in pair.messages)
    return [{"role": "user", "content": f"{rubric}\n\n{conv}\n\n[Assistant response]\n{pair.response_a}\n"
                                        "[End of response]"}]


ATTRIBUTES_TEMPLATE = register(Template(
    "helpsteer2_attributes_v1", "pointwise", AnswerFormat(think=False, strength="forbidden"), _attributes_prompt,
    "Pointwise judge: HelpSteer2's five attribute scores (0-4) as one line of integers (seed 004 rewards)."))

HS2_DATA_SOURCE = "thinkj/helpsteer2_attributes"


def build_attribute_rows(rows: Iterable[dict[str, Any]], *, template: str = "helpsteer2_attributes_v1",
                         split: str = "train", path: str | None = None) -> list[dict[str, Any]]:
    """HelpSteer2 rows (``prompt``, ``response``, five attribute columns 0-4) -> verl/TRL rows.

    Each output row has ``data_source``, ``prompt`` (chat messages), ``ability``, ``reward_model`` =
    ``{"style": "rule", "ground_truth": {"scores": [5 ints]}}`` and ``extra_info``. A bad row raises
    RecordError naming the row (1-based) and field.
    """
    tmpl = get_template(template)
    out = []
    for line, row in enumerate(rows, 1):
        for name in ("prompt", "response"):
            if not isinstance(row.get(name), str) or not row[name].strip():
                raise RecordError("must be a non-empty string", path=path, line=line, field=name)
        scores = []
        for attr in HS2_ATTRIBUTES:
            value = row.get(attr)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or not 0 <= value <= 4:
                raise RecordError(f"must be an integer 0-4, got {value!r}", path=path, line=line, field=attr)
            scores.append(int(value))
        messages = [{"role": "user", "content": row["prompt"]}]
        pair = PreferencePair(f"hs2-{line}", "helpsteer2", messages, row["response"], row["response"], "tie")
        out.append({"data_source": HS2_DATA_SOURCE, "prompt": tmpl.render(pair), "ability": "judge",
                    "reward_model": {"style": "rule", "ground_truth": {"scores": scores}},
                    "extra_info": {"index": line - 1, "split": split, "template": template}})
    return out



def write_attribute_parquet(path: str, rows: list[dict[str, Any]]) -> int:
    """Write :func:`build_attribute_rows` output as a verl parquet (``data.train_files``); returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ValueError(f"{path}: no rows to write")
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return len(rows)
