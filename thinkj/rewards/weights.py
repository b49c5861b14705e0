"""The rule every reward adapter applies to a reward's weights (and its other settings) before it scores anything.

A reward's settings are its default weights (``Preset.defaults`` / ``GroupReward.defaults``); an override
changes one of them. :func:`check_weights` refuses, with one :class:`RewardWeightError` line naming the reward,
the setting and the known names (and the closest name, "did you mean 'w_str'?"):

* a name the reward does not have (a typo would otherwise train with the default weight);
* a number setting (its default is an int or a float) given a value that is not a finite number: ``nan``,
  ``inf``, ``True`` (a bool is not a number here), a list, ``"abc"``. A string that is a clean decimal number
  (``"0.5"``, ``" 2 "``, ``"1e-3"``: what a quoted Hydra or YAML value gives) is read as that number; anything
  else in a string (``"abc"``, ``""``, ``"0x10"``, ``"1_000"``, ``"nan"``) is refused;
* a negative value for a setting whose default is not negative (weights, counts, widths); settings whose
  default is negative (``leak_penalty``, ``failure_penalty``) take any sign;
* a magnitude above :data:`MAX_MAGNITUDE` (1e6): no setting needs more, and it keeps every score finite;
* a fractional value for a whole-number setting (its default is an int: token and word counts, retries,
  ``n_iter``); ``3.0`` is read as 3;
* a non-bool for a bool setting (``"true"`` / ``"false"`` strings are read as bools, ``1`` is refused);
* a non-string for a text setting (``model``, ``base_url``, ``scheme``), or a value outside the setting's
  choices where the reward lists them (``scheme``, ``anchor``);
* settings whose default is ``None`` take ``None`` or the kind the reward declares for them (``kinds``:
  ``"float?"``, ``"str?"``; a ``?`` means ``None`` is allowed);
* zero or less for a setting declared ``"int+"`` / ``"float+"`` (the HTTP judge's ``concurrency``, ``timeout_s``,
  ``max_tokens``: zero would mean no calls, no time or no answer, not a smaller amount).

``RewardWeightError`` is a ``ThinkJError`` (entry points print it as one ``error:`` line and exit 2) and a
``TypeError`` (what an unexpected keyword argument raises in Python).
"""

from __future__ import annotations

import difflib
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.rewards.gold import shown

MAX_MAGNITUDE = 1e6
_CLEAN_NUMBER = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\s*")
_KINDS = ("float", "int", "bool", "str", "any")


class RewardWeightError(ThinkJError, TypeError):
    """A reward setting that is unknown or has a value the reward cannot use; the message names both."""

    def __init__(self, message: str, *, weight: str = "", detail: str = ""):
        super().__init__(message)
        self.weight, self.detail = weight, detail


def suggestion(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'w_str'?)`` for the closest known name, or ``""``."""
    close = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _kind(default: Any, declared: str | None) -> tuple[str, bool, bool]:
    """(kind, None allowed, above zero) of one setting: declared in ``kinds``, else from its default value."""
    if declared:
        base, optional = declared.rstrip("?"), declared.endswith("?")
        kind, positive = base.removesuffix("+"), base.endswith("+")
        if kind not in _KINDS or positive and kind not in ("int", "float"):
            raise ValueError(f"unknown setting kind {declared!r}; known: {', '.join(_KINDS)} (int+ / float+: > 0)")
        return kind, optional, positive
    if isinstance(default, bool):
        return "bool", False, False
    if isinstance(default, numbers.Integral):
        return "int", False, False
    if isinstance(default, numbers.Real):
        return "float", False, False
    if isinstance(default, str):
        return "str", False, False
    return "any", True, False


def _number(value: Any) -> float | int | None:
    """The finite number a value stands for (int stays int), or None when it is not one."""
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", "") == "b":
        return None
    if isinstance(value, str):
        if not _CLEAN_NUMBER.fullmatch(value):
            return None
        text = value.strip()
        number: float | int = int(text) if re.fullmatch(r"[+-]?\d+", text) and len(text) <= 18 else float(text)
    elif isinstance(value, numbers.Integral):
        return int(value)  # exact, however large (the magnitude check follows)
    elif isinstance(value, numbers.Real):
        number = float(value)
    else:
        return None
    return number if isinstance(number, int) or math.isfinite(number) else None


def check_value(name: str, value: Any, default: Any, declared: str | None = None,
                choices: tuple[Any, ...] | None = None) -> tuple[Any, str]:
    """(the value as the reward should see it, "" ) or (None, what is wrong with it)."""
    kind, optional, positive = _kind(default, declared)
    if value is None:
        return (None, "") if optional or default is None else (None, f"must be a {_noun(kind)}, got None")
    if kind == "any":
        return value, ""
    if kind == "bool":
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true", ""
        return (value, "") if isinstance(value, bool) else (None, f"must be true or false, got {shown(value, 60)}")
    if kind == "str":
        if not isinstance(value, str):
            return None, f"must be text, got {shown(value, 60)}"
        if choices and value not in choices:
            return None, f"must be one of {', '.join(map(str, choices))}, got {shown(value, 60)}{suggestion(value, choices)}"
        return value, ""
    number = _number(value)
    if number is None:
        spelled = isinstance(value, str) and (_CLEAN_NUMBER.fullmatch(value) or value.strip().lower().lstrip("+-")
                                              in ("nan", "inf", "infinity"))
        what = "a finite number" if isinstance(value, float) or spelled or hasattr(value, "dtype") else "a number"
        return None, f"must be {what}, got {shown(value, 60)}"
    if abs(number) > MAX_MAGNITUDE:
        return None, f"must be at most {MAX_MAGNITUDE:g} in magnitude, got {shown(value, 60)}"
    if number < 0 and not (isinstance(default, numbers.Real) and default < 0):
        return None, f"must be >= 0, got {shown(value, 60)}"
    if number <= 0 and positive:
        return None, f"must be > 0, got {shown(value, 60)}"
    if kind == "int":
        if number != int(number):
            return None, f"must be a whole number, got {shown(value, 60)}"
        number = int(number)
    else:
        number = float(number)
    if choices and number not in choices:
        return None, f"must be one of {', '.join(map(str, choices))}, got {shown(value, 60)}"
    return number, ""


def _noun(kind: str) -> str:
    return {"float": "number", "int": "whole number", "bool": "bool", "str": "text"}.get(kind, "value")


def check_weights(owner: str, defaults: Mapping[str, Any], overrides: Mapping[str, Any], *,
                  kinds: Mapping[str, str] | None = None, choices: Mapping[str, tuple[Any, ...]] | None = None,
                  where: str = "", also_known: Iterable[str] = ()) -> dict[str, Any]:
    """``overrides`` checked against ``defaults`` (see the module docstring) and returned as the reward should see
    them. ``owner`` names the reward (``reward preset 'thinkj_qwen'``); ``where`` prefixes the setting's name in
    the message (``--set ``, ``reward.custom_reward_function.reward_kwargs.``); ``also_known`` are the adapter's own
    keys (``preset``, ``group_preset``), offered as "did you mean" for a near miss."""
    kinds, choices = kinds or {}, choices or {}
    known = ", ".join(sorted(defaults)) or "none"
    out: dict[str, Any] = {}
    for name, value in overrides.items():
        if name not in defaults:
            prefix = f"{where}{name}: " if where else ""
            raise RewardWeightError(f"{prefix}{owner} has no weight {name!r}{suggestion(name, [*defaults, *also_known])}; "
                                    f"its weights: {known}", weight=str(name), detail="is not a weight of the reward")
        checked, problem = check_value(name, value, defaults[name], kinds.get(name), choices.get(name))
        if problem:
            subject = f"{where}{name}" if where else f"weight {name}"
            raise RewardWeightError(f"{subject} {problem} ({owner}; its weights: {known})", weight=name,
                                    detail=problem)
        out[name] = checked
    return out
