"""Source loaders: preference datasets in their upstream schemas -> PreferencePair JSONL.

Each loader reads rows from a Hugging Face hub dataset (``datasets.load_dataset``, normal use) or a
local file (``.jsonl``, ``.json``, ``.parquet``, optionally ``.gz``; offline tests), converts every row
to a :class:`~thinkj.records.PreferencePair` and then decides which response sits in position (a)
with a seeded shuffle that is balanced: among non-tie pairs, half get label "a" and half "b".

A malformed row raises :class:`~thinkj.records.RecordError` naming the file (or hub name), the row
and the field. With ``skip_invalid=True`` such rows are skipped and counted in the returned
:class:`LoadSummary` (with their messages), never silently lost.

    from thinkj.data.loaders import load_source
    pairs, summary = load_source("hh_rlhf", "../shared/data/hh-rlhf/harmless-base-test.jsonl.gz", seed=0)
    pairs, summary = load_source("skywork", "Skywork/Skywork-Reward-Preference-80K-v0.2", limit=10_000)
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError, UnknownNameError
from thinkj.records import (
    MAX_STRENGTH,
    PreferencePair,
    RecordError,
    decode_line,
    parse_json,
    parse_jsonl_text,
    read_jsonl,
    read_parquet_rows,
)

# Default hub locations. HelpSteer2's preference annotations live in the "preference" folder of
# nvidia/HelpSteer2 (preference/preference.jsonl.gz; loaded with data_dir="preference", split "train",
# which holds both its train and val rows, told apart by the row's "split" column -- see the dataset
# card's "Preferences" section and discussion #5 on huggingface.co/datasets/nvidia/HelpSteer2).
HUB_DEFAULTS: dict[str, dict[str, Any]] = {
    "skywork": {"name": "Skywork/Skywork-Reward-Preference-80K-v0.2", "split": "train"},
    "helpsteer2": {"name": "nvidia/HelpSteer2", "data_dir": "preference", "split": "train"},
    "hh_rlhf": {"name": "Anthropic/hh-rlhf", "split": "train"},
}
MAX_ERRORS_KEPT = 50  # error messages kept in the summary; the count is always exact
STRENGTH_THRESHOLDS = (1.0, 2.5)  # score-gap bin edges for strength 1 | 2 | 3 (see bin_strength)


@dataclass
class LoadSummary:
    source: str
    location: str
    rows: int = 0
    pairs: int = 0
    skipped: int = 0
    label_a: int = 0
    label_b: int = 0
    ties: int = 0
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------- reading rows

def _is_local(location: str | os.PathLike) -> bool:
    return Path(location).exists()


def read_rows(location: str | os.PathLike, *, split: str = "train", data_dir: str | None = None,
              config: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based row number, row) from a local file or a hub dataset, streaming where the format allows.

    An unreadable JSONL line is yielded as a RecordError in place of the row (the caller raises or counts it).
    """
    if not _is_local(location):
        from datasets import load_dataset

        dataset = load_dataset(str(location), config, data_dir=data_dir, split=split)
        for i, row in enumerate(dataset, start=1):
            yield i, row
        return
    path = Path(location)
    suffixes = [s.lower() for s in path.suffixes]
    gz = suffixes[-1:] == [".gz"]
    kind = suffixes[-2] if gz and len(suffixes) >= 2 else (suffixes[-1] if suffixes else "")
    if kind == ".parquet":
        yield from read_parquet_rows(path)
        return
    opener: Callable[..., Any] = gzip.open if gz else open
    try:
        with opener(path, "rb") as handle:
            if kind == ".json":
                data = read_json_bytes(handle.read(), path)
                for i, row in enumerate(data, start=1):
                    yield i, row
                return
            for i, raw in enumerate(handle, start=1):
                try:
                    text = decode_line(raw, path=path, line=i)
                    if not text.strip():
                        continue
                    row = parse_jsonl_text(text, path=path, line=i)
                except RecordError as err:
                    # Handed to the loader as the row, so skip_invalid can count it like any other bad row.
                    row = err
                yield i, row
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise RecordError(f"not a readable gzip file ({' '.join(str(err).split()) or type(err).__name__})",
                          path=path) from None


def read_json_bytes(raw: bytes, path: Path) -> list[Any]:
    """The rows of a ``.json`` source: a list, or an object holding exactly one list ({"train": [...]})."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(f"not UTF-8 text (byte {err.start}: {err.reason}); a binary file?", path=path) from None
    data = parse_json(text, path=path)
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
    if not isinstance(data, list):
        raise RecordError("a .json source must be a list of rows or an object holding one list", path=path)
    return data


# --------------------------------------------------------------------------------------------- row converters
# A converter turns one upstream row into (messages, chosen, rejected, tie, strength, meta). "chosen"
# is simply response 1 for a tie. Converters raise _FieldError; the loader adds file and row.

class _FieldError(Exception):
    def __init__(self, field_name: str, message: str):
        super().__init__(message)
        self.field, self.message = field_name, message


Converted = tuple[list[dict[str, str]], str, str, bool, "int | None", dict[str, Any]]


def _text(row: dict[str, Any], name: str) -> str:
    if name not in row or row[name] is None:
        raise _FieldError(name, "missing")
    if not isinstance(row[name], str):
        raise _FieldError(name, f"must be a string, got {type(row[name]).__name__}")
    if not row[name].strip():
        raise _FieldError(name, "is empty")
    return row[name]


def _conversation(value: Any, name: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise _FieldError(name, "must be a non-empty list of {role, content} turns")
    turns = []
    for i, turn in enumerate(value):
        if not isinstance(turn, dict) or not isinstance(turn.get("content"), str) or "role" not in turn:
            raise _FieldError(f"{name}[{i}]", "must be an object with a 'role' and a string 'content'")
        role = {"human": "user", "gpt": "assistant", "bot": "assistant"}.get(turn["role"], turn["role"])
        if role not in ("system", "user", "assistant"):
            raise _FieldError(f"{name}[{i}].role", f"unknown role {turn['role']!r}")
        turns.append({"role": role, "content": turn["content"]})
    return turns


def skywork_row(row: dict[str, Any]) -> Converted:
    """Skywork-Reward-Preference-80K-v0.2: ``chosen`` / ``rejected`` are whole conversations (list of
    {role, content}) that share every turn but the last assistant turn; ``source`` names the origin set."""
    chosen = _conversation(row.get("chosen"), "chosen")
    rejected = _conversation(row.get("rejected"), "rejected")
    for name, conv in (("chosen", chosen), ("rejected", rejected)):
        if conv[-1]["role"] != "assistant":
            raise _FieldError(name, "must end with an assistant turn (the response being compared)")
        if len(conv) < 2 or conv[-2]["role"] != "user":
            raise _FieldError(name, "the response must follow a user turn")
    if chosen[:-1] != rejected[:-1]:
        differ = next((i for i, (x, y) in enumerate(zip(chosen[:-1], rejected[:-1])) if x != y),
                      min(len(chosen), len(rejected)) - 1)
        raise _FieldError("rejected", f"context differs from 'chosen' at turn {differ}: the two responses must answer "
                                      "the same conversation")
    meta = {"origin": row["source"]} if isinstance(row.get("source"), str) else {}
    return chosen[:-1], chosen[-1]["content"], rejected[-1]["content"], False, None, meta


_HS2_TURN = re.compile(r"\s*<extra_id_1>(User|Assistant)\s*")


def helpsteer2_prompt(prompt: str) -> list[dict[str, str]]:
    """HelpSteer2 stores multi-turn prompts as one string, later turns introduced by
    ``<extra_id_1>Assistant`` / ``<extra_id_1>User`` (dataset card); the first turn is the user's."""
    parts = _HS2_TURN.split(prompt)
    messages = [{"role": "user", "content": parts[0].strip()}]
    for marker, content in zip(parts[1::2], parts[2::2]):
        messages.append({"role": "user" if marker == "User" else "assistant", "content": content.strip()})
    if messages[-1]["role"] != "user":
        raise _FieldError("prompt", "the last turn of a multi-turn prompt must be the user's")
    if any(not m["content"] for m in messages):
        raise _FieldError("prompt", "has an empty turn")
    return messages


def helpsteer2_row(row: dict[str, Any]) -> Converted:
    """HelpSteer2-Preference (nvidia/HelpSteer2, data_dir "preference"): ``prompt``, ``response_1``,
    ``response_2``, ``preference_strength`` in -3..3. Negative: response 1 is better; positive: response 2;
    the magnitude is the strength (1 slightly, 2 better, 3 much better); 0 is a tie and stays one."""
    messages = helpsteer2_prompt(_text(row, "prompt"))
    first, second = _text(row, "response_1"), _text(row, "response_2")
    value = row.get("preference_strength")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not -MAX_STRENGTH <= value <= MAX_STRENGTH:
        raise _FieldError("preference_strength", f"must be an integer in -3..3, got {value!r}")
    meta = {"preference_strength": value}
    if isinstance(row.get("split"), str):
        meta["split"] = row["split"]
    if value == 0:
        return messages, first, second, True, 0, meta
    chosen, rejected = (first, second) if value < 0 else (second, first)
    return messages, chosen, rejected, False, abs(value), meta


_HH_TURN = re.compile(r"\n\n(Human|Assistant):[ ]?")


def hh_transcript(text: str, name: str) -> list[dict[str, str]]:
    """Split an HH-RLHF transcript ``\\n\\nHuman: ...\\n\\nAssistant: ...`` into role/content turns."""
    if not isinstance(text, str):
        raise _FieldError(name, "must be a string transcript")
    parts = _HH_TURN.split(text)
    if parts[0].strip() or len(parts) < 3:
        raise _FieldError(name, "must start with '\\n\\nHuman: ' and contain Human/Assistant turns")
    return [{"role": "user" if who == "Human" else "assistant", "content": content.strip()}
            for who, content in zip(parts[1::2], parts[2::2])]


def hh_rlhf_row(row: dict[str, Any]) -> Converted:
    """Anthropic HH-RLHF: ``chosen`` / ``rejected`` are full transcripts sharing all but the final Assistant turn."""
    chosen = hh_transcript(row.get("chosen"), "chosen")
    rejected = hh_transcript(row.get("rejected"), "rejected")
    for name, conv in (("chosen", chosen), ("rejected", rejected)):
        if conv[-1]["role"] != "assistant" or len(conv) < 2 or conv[-2]["role"] != "user":
            raise _FieldError(name, "must end with a Human turn followed by the Assistant response")
    if chosen[:-1] != rejected[:-1]:
        raise _FieldError("rejected", "transcript before the final Assistant turn differs from 'chosen'")
    return chosen[:-1], chosen[-1]["content"], rejected[-1]["content"], False, None, {}


def bin_strength(gap: float, thresholds: tuple[float, float] = STRENGTH_THRESHOLDS) -> int:
    """Map a score gap (score(chosen) - score(rejected), e.g. a Bradley-Terry classifier's logits) to 1..3.

    gap < t1 -> 1 (slightly better; also when the classifier disagrees with the human label, which we keep),
    t1 <= gap < t2 -> 2, gap >= t2 -> 3. The defaults (1.0, 2.5) put a BT gap of 1 logit (~73 % win
    probability) at "better" and 2.5 logits (~92 %) at "much better"; pass thresholds to change them.
    """
    low, high = check_thresholds(thresholds)
    value = _finite(gap)
    if value is None:  # NaN compares false with every edge and would land in the top bin
        raise ThinkJError(f"score gap {str(gap)[:40]!r} is not a finite number")
    return 1 if value < low else (2 if value < high else 3)


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (not a number, NaN, infinite, or an int too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def check_thresholds(thresholds: Any, option: str = "strength_thresholds", shown: str | None = None
                     ) -> tuple[float, float]:
    """Two finite, increasing score-gap bin edges (t1 < t2), or a ThinkJError naming ``option`` and the value as
    the user wrote it (``shown``)."""
    where = f"{option} {shown if shown is not None else repr(thresholds)}"
    values = list(thresholds) if isinstance(thresholds, (list, tuple)) else None
    if values is None or len(values) != 2:
        raise ThinkJError(f"{where}: expected two bin edges t1,t2 (strength 1 | 2 | 3)")
    low, high = (_finite(v) for v in values)
    if low is None or high is None:
        raise ThinkJError(f"{where}: the bin edges must be finite numbers")
    if not low < high:
        raise ThinkJError(f"{where}: the bin edges must increase (t1 < t2)")
    return low, high


def parse_thresholds(text: str, option: str = "--strength-thresholds") -> tuple[float, float]:
    """``"1.0,2.5"`` -> (1.0, 2.5), checked by :func:`check_thresholds`; anything else names ``option``."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise ThinkJError(f"{option} {text!r}: expected two numbers t1,t2 (e.g. 1.0,2.5)") from None
    if len(values) != 2:
        raise ThinkJError(f"{option} {text!r}: expected two numbers t1,t2 (e.g. 1.0,2.5)")
    return check_thresholds(values, option, repr(text))


COLUMN_MAP_KEYS = ("prompt", "messages", "system", "chosen", "rejected", "response_1", "response_2", "label",
                   "label_values", "strength")


def check_column_map(mapping: Any, option: str = "column_map") -> dict[str, Any]:
    """A column mapping for :func:`mapped_row`: an object of known keys naming columns (strings); ``label_values``
    an object of label values. Anything else is a ThinkJError naming ``option`` and the key."""
    if not isinstance(mapping, dict):
        raise ThinkJError(f"{option}: must be a JSON object of column names, got {type(mapping).__name__}")
    unknown = sorted(str(k) for k in mapping if k not in COLUMN_MAP_KEYS)
    if unknown:
        raise ThinkJError(f"{option}: unknown keys {unknown} (known: {', '.join(COLUMN_MAP_KEYS)})")
    for key, value in mapping.items():
        if key == "label_values":
            if not isinstance(value, dict) or not value or any(v not in ("a", "b", "tie") for v in value.values()):
                raise ThinkJError(f"{option}: key 'label_values' must map source values to a, b or tie, got {value!r}")
        elif not isinstance(value, str) or not value:
            raise ThinkJError(f"{option}: key {key!r} must name a column (a non-empty string), got {value!r}")
    return mapping


def parse_column_map(text: str, option: str = "--column-map") -> dict[str, Any]:
    """The ``--column-map`` JSON text -> a checked mapping (:func:`check_column_map`)."""
    try:
        mapping = json.loads(text)
    except (ValueError, RecursionError) as err:
        reason = err.msg if isinstance(err, json.JSONDecodeError) else type(err).__name__
        raise ThinkJError(f"{option} {text!r}: not valid JSON ({reason}); expected e.g. "
                          '\'{"prompt": "question", "chosen": "good", "rejected": "bad"}\'') from None
    return check_column_map(mapping, option)


def mapped_row(mapping: dict[str, Any]) -> Callable[[dict[str, Any]], Converted]:
    """A converter for any JSONL/parquet with a column mapping.

    ``mapping`` keys: ``prompt`` (string column) or ``messages`` (list-of-turns column); then either
    ``chosen`` + ``rejected`` or ``response_1`` + ``response_2`` + ``label`` (values mapped by
    ``label_values``, default a/b/tie, 1/2, "1"/"2"); optional ``strength`` (0-3 or null) and ``system``.
    """
    check_column_map(mapping)
    values = mapping.get("label_values") or {"a": "a", "b": "b", "tie": "tie", 1: "a", 2: "b", "1": "a", "2": "b"}
    if not ("prompt" in mapping) ^ ("messages" in mapping):
        raise ThinkJError("column mapping needs exactly one of 'prompt' or 'messages'")
    if "chosen" in mapping:
        if "rejected" not in mapping:
            raise ThinkJError("column mapping has 'chosen' but no 'rejected'")
    elif not {"response_1", "response_2", "label"} <= set(mapping):
        raise ThinkJError("column mapping needs 'chosen'+'rejected' or 'response_1'+'response_2'+'label'")

    def convert(row: dict[str, Any]) -> Converted:
        if "prompt" in mapping:
            messages = [{"role": "user", "content": _text(row, mapping["prompt"])}]
        else:
            messages = _conversation(row.get(mapping["messages"]), mapping["messages"])
            if messages[-1]["role"] != "user":
                raise _FieldError(mapping["messages"], "must end with a user turn")
        if mapping.get("system") and row.get(mapping["system"]):
            messages = [{"role": "system", "content": _text(row, mapping["system"])}] + messages
        strength = row.get(mapping["strength"]) if mapping.get("strength") else None
        if "chosen" in mapping:
            return messages, _text(row, mapping["chosen"]), _text(row, mapping["rejected"]), False, strength, {}
        first, second = _text(row, mapping["response_1"]), _text(row, mapping["response_2"])
        raw = row.get(mapping["label"])
        label = values.get(raw) if isinstance(raw, (str, int)) else None
        if label not in ("a", "b", "tie"):
            raise _FieldError(mapping["label"], f"value {raw!r} is not in the label mapping {sorted(map(str, values))}")
        chosen, rejected = (second, first) if label == "b" else (first, second)
        return messages, chosen, rejected, label == "tie", strength, {}

    return convert



CONVERTERS: dict[str, Callable[[dict[str, Any]], Converted]] = {
    "skywork": skywork_row, "helpsteer2": helpsteer2_row, "hh_rlhf": hh_rlhf_row,
}


# --------------------------------------------------------------------------------------------- loading

def load_scores(path: str | os.PathLike) -> dict[int, float]:
    """A scores file for HH-RLHF strength: JSONL rows ``{"row": N, "gap": g}`` or ``{"row": N, "chosen": s1,
    "rejected": s2}`` (N = 1-based row number in the source). Returns row -> gap; every gap is finite."""
    gaps: dict[int, float] = {}
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict) or "row" not in obj or not ("gap" in obj or {"chosen", "rejected"} <= set(obj)):
            raise RecordError("expected {row, gap} or {row, chosen, rejected}", path=path, line=lineno)
        row = obj["row"]
        if isinstance(row, bool) or not isinstance(row, int) or row < 1:
            raise RecordError(f"must be a source row number from 1, got {row!r}", path=path, line=lineno, field="row")
        if row in gaps:
            raise RecordError(f"row {row} is scored twice", path=path, line=lineno, field="row")
        if "gap" in obj:
            gap = _score(obj["gap"], path, lineno, "gap")
        else:
            gap = _score(obj["chosen"], path, lineno, "chosen") - _score(obj["rejected"], path, lineno, "rejected")
        if not math.isfinite(gap):
            raise RecordError(f"the score gap {gap} is not finite", path=path, line=lineno)
        gaps[row] = gap
    return gaps


def _score(value: Any, path: str | os.PathLike, line: int, name: str) -> float:
    try:
        number = None if isinstance(value, bool) else float(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not math.isfinite(number):
        raise RecordError(f"must be a finite number, got {str(value)[:40]!r}", path=path, line=line, field=name)
    return number


def load_source(kind: str, location: str | os.PathLike | None = None, *, split: str | None = None,
                data_dir: str | None = None, config: str | None = None, seed: int = 0, limit: int | None = None,
                skip_invalid: bool = False, column_map: dict[str, Any] | None = None,
                strength_column: str | None = None, scores_file: str | os.PathLike | None = None,
                strength_thresholds: tuple[float, float] = STRENGTH_THRESHOLDS,
                source_name: str | None = None) -> tuple[list[PreferencePair], LoadSummary]:
    """Load ``kind`` ("skywork" | "helpsteer2" | "hh_rlhf" | "pairs" | "generic") from a hub name or local file.

    ``limit`` keeps the first N valid pairs (before the shuffle, so it is deterministic). Strength for
    sources without one: ``strength_column`` (a 0-3 column, or a raw score gap binned with
    :func:`bin_strength`) or ``scores_file`` (:func:`load_scores`).
    """
    strength_thresholds = check_thresholds(strength_thresholds)
    if strength_column and scores_file:
        raise ThinkJError("give the strength either as strength_column or as scores_file, not both")
    if column_map is not None and kind != "generic":
        raise ThinkJError(f"a column_map is for the generic loader; source kind {kind!r} has its own schema")
    defaults = HUB_DEFAULTS.get(kind, {})
    location = str(location or defaults.get("name") or "")
    if not location:
        raise ThinkJError(f"no location given and no hub default for source kind {kind!r}")
    if kind == "generic":
        if not column_map:
            raise ThinkJError("the generic loader needs a column_map")
        convert = mapped_row(column_map)
    elif kind == "pairs":  # already PreferencePairs: kept as they are (ids, positions, meta)
        return _load_pairs(str(location), limit=limit, skip_invalid=skip_invalid, source_name=source_name)
    elif kind in CONVERTERS:
        convert = CONVERTERS[kind]
    else:
        raise UnknownNameError(f"unknown source kind {kind!r}; choose from {', '.join([*CONVERTERS, 'pairs', 'generic'])}")
    local = _is_local(location)
    split = split or defaults.get("split", "train")
    if not local and data_dir is None:
        data_dir = defaults.get("data_dir") if location == defaults.get("name") else None
    gaps = load_scores(scores_file) if scores_file else {}
    name = source_name or kind
    stem = Path(location).name.split(".")[0] if local else location.split("/")[-1]
    summary = LoadSummary(source=name, location=location)
    built: list[tuple[str, list[dict[str, str]], str, str, bool, int | None, dict[str, Any]]] = []
    for row_no, row in read_rows(location, split=split, data_dir=data_dir, config=config):
        if limit is not None and len(built) >= limit:
            break
        summary.rows += 1
        if isinstance(row, RecordError):
            _reject(summary, skip_invalid, row)
            continue
        try:
            if not isinstance(row, dict):
                raise _FieldError("(row)", f"expected an object, got {type(row).__name__}")
            messages, chosen, rejected, tie, strength, meta = convert(row)
            for side, text in (("response_1" if tie else "chosen", chosen), ("response_2" if tie else "rejected", rejected)):
                if not text.strip():
                    raise _FieldError(side, "the final response is empty")
            if strength_column:
                strength = _strength_value(row.get(strength_column), strength_column, strength_thresholds)
            elif scores_file:
                if row_no not in gaps:
                    raise _FieldError("strength", f"row {row_no} has no entry in the scores file {scores_file}")
                strength = bin_strength(gaps[row_no], strength_thresholds)
            meta = {"row": row_no, **meta}
            # Validate through the record contract now, so a bad row is reported with its source row.
            PreferencePair.from_dict({"id": f"{stem}-{row_no}", "source": name, "messages": messages,
                                      "response_a": chosen, "response_b": rejected, "label": "tie" if tie else "a",
                                      "strength": strength, "meta": meta})
        except _FieldError as err:
            _reject(summary, skip_invalid, RecordError(err.message, path=location, line=row_no, field=err.field))
            continue
        except RecordError as err:
            _reject(summary, skip_invalid, RecordError(f"{err} (after conversion)", path=location, line=row_no))
            continue
        built.append((f"{stem}-{row_no}", messages, chosen, rejected, tie, strength, meta))
    pairs = shuffle_positions(built, name, seed)
    return pairs, _counted(summary, pairs)


def _counted(summary: LoadSummary, pairs: list[PreferencePair]) -> LoadSummary:
    """``summary`` with the pairs written and their labels counted."""
    summary.pairs = len(pairs)
    summary.label_a = sum(p.label == "a" for p in pairs)
    summary.label_b = sum(p.label == "b" for p in pairs)
    summary.ties = sum(p.label == "tie" for p in pairs)
    return summary


def _load_pairs(location: str, *, limit: int | None, skip_invalid: bool,
                source_name: str | None) -> tuple[list[PreferencePair], LoadSummary]:
    """A PreferencePair JSONL as it is: each row checked by the record contract (file, line and field named), its
    id, positions and meta kept (a generated task's pairs are placed already: half with the better response at (a)),
    ``source`` set to ``source_name`` when given."""
    summary = LoadSummary(source=source_name or "pairs", location=location)
    pairs: list[PreferencePair] = []
    for row_no, row in read_rows(location):
        if limit is not None and len(pairs) >= limit:
            break
        summary.rows += 1
        if isinstance(row, RecordError):
            _reject(summary, skip_invalid, row)
            continue
        try:
            pair = PreferencePair.from_dict(row if isinstance(row, dict) else {"(row)": row})
        except RecordError as err:
            _reject(summary, skip_invalid, RecordError(str(err), path=location, line=row_no))
            continue
        pairs.append(replace(pair, source=source_name) if source_name else pair)
    return pairs, _counted(summary, pairs)


def _strength_value(value: Any, column: str, thresholds: tuple[float, float]) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _FieldError(column, f"strength must be a number, got {value!r}")
    number = _finite(value)
    if number is None:
        raise _FieldError(column, f"strength must be a finite number, got {str(value)[:40]}")
    if number.is_integer() and 0 <= number <= MAX_STRENGTH:
        return int(number)  # already on the 0-3 scale
    return bin_strength(number, thresholds)


def _reject(summary: LoadSummary, skip_invalid: bool, error: RecordError) -> None:
    if not skip_invalid:
        raise error
    summary.skipped += 1
    if len(summary.errors) < MAX_ERRORS_KEPT:
        summary.errors.append(str(error))


def shuffle_positions(built: list[tuple], source: str, seed: int) -> list[PreferencePair]:
    """Place the chosen response at (a) for exactly half of the non-tie pairs (which half: seeded)."""
    rng = random.Random(seed)
    decisive = [i for i, item in enumerate(built) if not item[4]]
    labels = (["a", "b"] * (len(decisive) // 2 + 1))[:len(decisive)]
    rng.shuffle(labels)
    label_of = dict(zip(decisive, labels))
    pairs = []
    for i, (pid, messages, chosen, rejected, tie, strength, meta) in enumerate(built):
        if tie:
            # A tie has no chosen side; still randomise which response is shown first.
            label = "tie"
            first, second = (chosen, rejected) if rng.random() < 0.5 else (rejected, chosen)
        else:
            label = label_of[i]
            first, second = (chosen, rejected) if label == "a" else (rejected, chosen)
        pairs.append(PreferencePair(pid, source, messages, first, second, label, strength, meta))
    return pairs
