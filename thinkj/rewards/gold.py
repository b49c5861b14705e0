"""Ground truths as the rewards read them: a bad one is a data error the reward records, never an exception.

A reward runs inside a trainer's step; one malformed row must not kill the run, and must not be read as some
other value either. So every parser here returns what it could read plus the problem with it ("" when there is
none), every reward that reads a ground truth returns ``gold_error`` = 1.0 for a row with a problem (0.0
otherwise; the mean is the share of bad rows, in verl's and TRL's logged metrics), and the terms that need the
bad field score 0. ``Preset.gold_problem(gt)`` gives the problem text (``thinkj rewards score`` prints it).

A reward checks only the fields it reads: ``cot_binary``, ``margin``, ``margin_public`` and ``xml_judge`` read
the label; ``thinkj_qwen``, ``thinkj_llama``, ``thinkj_subtractive`` and ``strength_public`` read the label and
the strength. Rules of the pairwise contract ``{"label": "a" | "b" | "tie", "strength": 1 | 2 | 3 | null}``
(also a JSON text of it, a bare ``"a"`` / ``"b"`` / ``"tie"``, or verl's parquet struct):

* label: a string, ``a``, ``b`` or ``tie`` in any case and with surrounding spaces. Anything else -- a missing
  label, another letter, a number, ``true``, ``null``, a ground truth that is not a mapping, a JSON text that
  does not parse -- is an error; with it no verdict can be right (accuracy, strength and every score that
  compares with the gold are 0; a format term still counts).
* strength: missing, ``null`` or ``0`` means "no strength" (the strength term is off; not an error). Otherwise
  it must be a whole number 1-3 (``2`` or ``2.0``; numpy integers as verl hands them). ``2.7`` (never truncated),
  ``7``, ``-1`` (never ignored), ``NaN``, ``Infinity``, ``true`` (never read as 1) and the string ``"2"`` (a
  string where a number belongs means the data was written wrongly) are errors; the label is still used, the
  strength term is 0.

Other rewards' ground truths (scores lists, competition answers, reference answers) are parsed in their own
modules with :func:`whole_number` and :func:`mapping`, under the same rule.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass
from typing import Any

from thinkj.verdict_parser import STRENGTH_RANGE

LABELS = ("a", "b", "tie")


@dataclass(frozen=True, slots=True)
class PairGold:
    label: str | None  # "a" | "b" | "tie"; None when unreadable
    strength: int | None  # 1..3; None when missing or bad
    error: str = ""  # what is wrong ("" when nothing is)


def shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages; never raises (an integer over 4,300 digits or a
    deeply nested list has no repr)."""
    try:
        text = repr(value)
    except Exception:  # ValueError (int-string limit), RecursionError
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def whole_number(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (int, numpy int, or a float such as 2.0), else None.

    Bools, strings, NaN, infinities and fractions are not whole numbers."""
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return int(number) if math.isfinite(number) and number.is_integer() else None
    return None


def parse_json_text(text: str) -> tuple[Any, str]:
    """(value, "") or (None, problem) for a ground truth given as JSON text (never raises: over-long integers
    and deep nesting are problems too)."""
    try:
        return json.loads(text), ""
    except (ValueError, RecursionError) as err:
        return None, f"not valid JSON ({type(err).__name__})"


def mapping(value: Any) -> dict[str, Any] | None:
    """A dict for a mapping (a dict, verl's parquet struct, an OmegaConf node), else None."""
    if isinstance(value, dict):
        return value
    if hasattr(value, "items") and not isinstance(value, (str, bytes)):
        try:
            return dict(value.items())
        except Exception:  # a foreign object whose items() fails is not a mapping we can read
            return None
    return None


def pair_label(gt: Any) -> PairGold:
    """The label only (strength not read): for rewards that never use the strength."""
    return pair_gold(gt, strength=False)


def pair_gold(gt: Any, *, strength: bool = True) -> PairGold:
    """Read the pairwise ground truth; never raises (see the module docstring for the rules)."""
    if isinstance(gt, str):
        text = gt.strip()
        if text.lower() in LABELS:
            return PairGold(text.lower(), None)
        if not text.startswith("{"):
            return PairGold(None, None, f"ground_truth: expected {{'label', 'strength'}} or 'a'/'b'/'tie', "
                                        f"got {shown(gt)}")
        gt, problem = parse_json_text(text)
        if problem:
            return PairGold(None, None, f"ground_truth: {problem}")
    fields = mapping(gt)
    if fields is None:
        return PairGold(None, None, f"ground_truth: expected a mapping with 'label' and 'strength', got {shown(gt)}")
    raw = fields.get("label")
    label = raw.strip().lower() if isinstance(raw, str) else None
    if label not in LABELS:
        what = "missing" if "label" not in fields else f"must be 'a', 'b' or 'tie', got {shown(raw)}"
        return PairGold(None, None, f"ground_truth.label: {what}")
    if not strength:
        return PairGold(label, None)
    value = fields.get("strength")
    if value is None:
        return PairGold(label, None)
    number = whole_number(value)
    if number == 0:
        return PairGold(label, None)
    if number is None or not STRENGTH_RANGE[0] <= number <= STRENGTH_RANGE[1]:
        return PairGold(label, None, f"ground_truth.strength: must be a whole number {STRENGTH_RANGE[0]}-"
                                     f"{STRENGTH_RANGE[1]} or null, got {shown(value)}")
    return PairGold(label, number)
