"""``key=value`` items -- ``--set``, ``--tag``, ``--backend-arg``, LlamaFactory overrides -- read by one parser.

    parse_key_values(["model=tiny", "method=base"], "--tag")                    # {"model": "tiny", ...} (text)
    parse_key_values(["tensor_parallel_size=4"], "--backend-arg", json_or_text) # {"tensor_parallel_size": 4}
    parse_key_values(["learning_rate=1e-6", "save_strategy=no"], "overrides", yaml_scalar)
    parse_key_values(["w_str=[0.5]"], "--set", yaml_value)                      # a sweep's settings and grid axes

Each item is split at its first ``=``. An item without ``=``, with an empty key, or naming a key an earlier item
named is refused in one line naming ``where`` the items came from (the flag, or the file and key of a list
setting): two values for one key are a mistake to report, not a choice to make silently. Then each value is typed
by the field it sets, which only the caller knows: ``typed(key, text, origin)`` gets the key, the value as written
and the origin to name in an error (``--set w_str``), and returns the value or raises :class:`ThinkJError`
(a ``ValueError`` it raises becomes one, naming the item). The typers here cover the open field sets of the
engines and the sweep; a caller with declared fields (the pipeline's settings, typed by their declared kind)
passes its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from thinkj.errors import ThinkJError

Typer = Callable[[str, str, str], Any]  # (key, value as written, origin for errors) -> typed value


def as_text(key: str, value: str, origin: str) -> str:
    """The value as written (result tags: ``--tag method=online (GRPO)``)."""
    return value


def json_or_text(key: str, value: str, origin: str) -> Any:
    """Numbers, booleans, null, lists and objects as JSON; anything else as the text written (backend arguments:
    ``tensor_parallel_size=4`` is a number, ``base_url=http://...`` stays text)."""
    try:
        return json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or JSON Python cannot hold: text
        return value


def yaml_scalar(key: str, value: str, origin: str) -> Any:
    """A YAML scalar as LlamaFactory's arguments want it: ``max_steps=3`` an int, ``learning_rate=1e-6`` a float,
    ``bf16=false`` a boolean; ``save_strategy=no`` stays the text "no" (YAML 1.1 would read no/yes/on/off as
    booleans, and LlamaFactory has text options with those values); an empty value is ""."""
    import yaml

    raw = value.strip()
    try:
        typed = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        typed = value
    if isinstance(typed, bool) and raw.lower() not in ("true", "false"):
        typed = raw
    # 1e-6 is text to YAML 1.1; a learning rate written that way must still be a number
    if isinstance(typed, str) and any(c in typed.lower() for c in ".e"):
        try:
            typed = float(typed)
        except ValueError:
            pass
    return typed


def yaml_value(key: str, value: str, origin: str) -> Any:
    """A whole YAML value, read strictly (:func:`thinkj.yaml_strict.parse_yaml`): ``0.5`` a float, ``[0.5, 0.2]`` a
    list (a sweep's grid axis), ``{a: 1}`` a mapping; a runaway value is refused naming the item."""
    from thinkj.records import RecordError
    from thinkj.yaml_strict import parse_yaml

    try:
        return parse_yaml(value)
    except RecordError as err:
        item = f"{key}={value}"
        shown = item if len(item) <= 80 else f"{item[:60]}…"
        raise ThinkJError(f"{origin.rpartition(' ')[0] or origin} {shown!r}: the value is {err}") from None


def parse_key_values(items: Iterable[str] | None, where: str, typed: Typer = as_text, *, example: str = "",
                     error: type[ThinkJError] = ThinkJError) -> dict[str, Any]:
    """``key=value`` items -> {key: typed value}, in the order given. ``where`` names the items' source in every
    error (``--set``, ``--backend-arg``, ``SFT_OVERRIDES``); ``example`` is shown after "expected key=value"
    (``e.g. --set w_str=0.5``); ``error`` is the class raised (a caller's own ThinkJError subclass)."""
    out: dict[str, Any] = {}
    hint = f", {example}" if example else ""
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise error(f"{where} {item!r}: expected key=value{hint}")
        if key in out:
            raise error(f"{where} {key}: given twice ({key}={value!r} after an earlier {key}=...): give each key "
                        "once")
        origin = f"{where} {key}"
        try:
            out[key] = typed(key, value, origin)
        except ThinkJError:
            raise
        except ValueError as err:
            raise error(f"{origin}={value!r}: {err}") from None
    return out
