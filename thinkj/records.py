"""The PreferencePair record and JSONL I/O with row-level validation.

A PreferencePair is one judging task: a conversation up to the last user turn, two candidate
responses shown as (a) and (b), which one is better (``label``) and by how much (``strength``).
Every stage of the pipeline reads and writes these as JSONL, one object per line.

:meth:`PreferencePair.from_dict` is the one validator of the contract (the rule table is in docs/runs.md, "Record
rules"). Besides each field's type it refuses the contradictions a user must resolve -- a tie with a strength, a
winner with strength 0, ``meta`` that is not an object, a field the record does not have (with the close name:
``strenght`` -> ``strength``) -- and warns, naming file, line and field, about what public data sets really hold and
a stage can still use: two identical responses with a winner (kept; the judge cannot learn from them).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from thinkj.atomic import atomic_open, write_text_atomic
from thinkj.errors import ThinkJError

LABELS = ("a", "b", "tie")
ROLES = ("system", "user", "assistant")
MAX_STRENGTH = 3
FIELDS = ("id", "source", "messages", "response_a", "response_b", "label", "strength", "meta")
WARNINGS_PER_FILE = 5  # then one line saying that more were left unprinted
_warned: dict[str, int] = {}


def record_warning(message: str, *, path: str | os.PathLike | None = None, line: int | None = None,
                   field: str | None = None) -> None:
    """One ``warning:`` line on stderr naming file, line and field; at most :data:`WARNINGS_PER_FILE` per file."""
    key = str(path)
    seen = _warned[key] = _warned.get(key, 0) + 1
    if seen <= WARNINGS_PER_FILE:
        print(f"warning: {RecordError(message, path=path, line=line, field=field)}", file=sys.stderr)
    if seen == WARNINGS_PER_FILE:
        print(f"warning: {path}: further warnings for this file are not printed", file=sys.stderr)


class RecordError(ThinkJError):
    """A row that does not satisfy a record contract; the message names file, line and field."""

    def __init__(self, message: str, *, path: str | os.PathLike | None = None, line: int | None = None,
                 field: str | None = None):
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ": ".join([", ".join(where)]) if where else ""
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.path, self.line, self.field = path, line, field


@dataclass
class PreferencePair:
    id: str
    source: str
    messages: list[dict[str, str]]
    response_a: str
    response_b: str
    label: str
    strength: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def instruction(self) -> str:
        """The last user turn: what dedup embeds and what the judge prompt calls the question."""
        for message in reversed(self.messages):
            if message["role"] == "user":
                return message["content"]
        return ""

    @property
    def decided(self) -> bool:
        """One response is the better one (label ``a`` or ``b``, not a tie): the pair has a right verdict to teach."""
        return self.label in ("a", "b")

    @property
    def wrong_side(self) -> str:
        """The response that is not the better one (``a`` or ``b``); only a decided pair has one."""
        if not self.decided:
            raise ValueError(f"pair {self.id}: label {self.label!r} names no better response, so it has no wrong side")
        return "b" if self.label == "a" else "a"

    def swapped(self) -> PreferencePair:
        """The same pair with the responses' positions exchanged (label follows its response)."""
        label = {"a": "b", "b": "a"}.get(self.label, self.label)
        return PreferencePair(self.id, self.source, self.messages, self.response_b, self.response_a, label,
                              self.strength, dict(self.meta))

    @classmethod
    def from_dict(cls, row: Any, *, path: str | os.PathLike | None = None, line: int | None = None) -> PreferencePair:
        """Validate one row; raise RecordError naming the offending field."""

        def fail(name: str, msg: str) -> RecordError:
            return RecordError(msg, path=path, line=line, field=name)

        if not isinstance(row, dict):
            raise RecordError(f"expected a JSON object, got {type(row).__name__}", path=path, line=line)
        for name in row:
            if name not in FIELDS:
                close = difflib.get_close_matches(str(name), FIELDS, n=1)
                hint = f"did you mean '{close[0]}'?" if close else f"a PreferencePair has {', '.join(FIELDS)}"
                raise fail(str(name), f"unknown field ({hint}); other data belongs in 'meta'")
        for name in ("id", "source", "messages", "response_a", "response_b", "label"):
            if name not in row:
                raise fail(name, "missing")
        rid = row["id"]
        if not isinstance(rid, (str, int)) or isinstance(rid, bool) or str(rid) == "":
            raise fail("id", f"must be a non-empty string, got {rid!r}")
        if not isinstance(row["source"], str):
            raise fail("source", "must be a string")
        messages = row["messages"]
        if not isinstance(messages, list) or not messages:
            raise fail("messages", "must be a non-empty list of {role, content}")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or "role" not in message or "content" not in message:
                raise fail(f"messages[{i}]", "must be an object with 'role' and 'content'")
            if message["role"] not in ROLES:
                raise fail(f"messages[{i}].role", f"must be one of {ROLES}, got {message['role']!r}")
            if not isinstance(message["content"], str):
                raise fail(f"messages[{i}].content", "must be a string")
        if messages[-1]["role"] != "user":
            raise fail("messages", "must end with a user turn (the responses answer it)")
        for name in ("response_a", "response_b"):
            if not isinstance(row[name], str):
                raise fail(name, "must be a string")
            if not row[name].strip():
                raise fail(name, "is empty")
        label = row["label"]
        if label not in LABELS:
            raise fail("label", f"must be one of {LABELS}, got {label!r}")
        strength = row.get("strength")
        if strength is not None:
            if isinstance(strength, bool) or not isinstance(strength, int):
                if isinstance(strength, float) and strength.is_integer():
                    strength = int(strength)
                else:
                    raise fail("strength", f"must be an integer 0-{MAX_STRENGTH} or null, got {strength!r}")
            if not 0 <= strength <= MAX_STRENGTH:
                raise fail("strength", f"must be in 0-{MAX_STRENGTH}, got {strength}")
            if label == "tie" and strength > 0:
                raise fail("strength", f"is {strength}, but the label is 'tie': a tie has no better response (use "
                                       "0 or null, or the label of the better one)")
            if label != "tie" and strength == 0:
                raise fail("strength", f"is 0 (no difference), but the label is {label!r}: use 1-{MAX_STRENGTH}, "
                                       "null when unknown, or the label 'tie'")
        meta = row.get("meta")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise fail("meta", f"must be an object (or null), got {type(meta).__name__}")
        if label != "tie" and row["response_a"].strip() == row["response_b"].strip():
            record_warning(f"response_a and response_b are the same text, yet the label is {label!r} (kept; a judge "
                           "cannot tell them apart)", path=path, line=line, field="response_b")
        return cls(str(rid), row["source"], [{"role": m["role"], "content": m["content"]} for m in messages],
                   row["response_a"], row["response_b"], label, strength, meta)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# Deeper than any record or benchmark row; a deeper one would fail later, at Python's recursion limit, in a stage
# that copies or writes it (dataclasses.asdict, json.dumps), far from the line that holds it.
MAX_DEPTH = 100


def _too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 1)]
    while stack:  # iterative: the check itself must not hit the recursion limit
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json(text: str | bytes, *, path: str | os.PathLike | None = None, line: int | None = None) -> Any:
    """One JSON value (a JSONL line, or a whole document when ``line`` is None) or a RecordError naming the file
    and line: malformed JSON, an integer past Python's int-string limit (4,300 digits), nesting deeper than
    :data:`MAX_DEPTH` (a 100,000-deep one exhausts the parser's recursion) -- never a bare ValueError or
    RecursionError."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        at = f"column {err.colno}" if line is not None else f"line {err.lineno} column {err.colno}"
        raise RecordError(f"invalid JSON ({err.msg} at {at})", path=path, line=line) from None
    except RecursionError:
        raise RecordError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", path=path, line=line) from None
    except ValueError as err:  # Python's limit on digits in an integer (sys.get_int_max_str_digits)
        reason = (f"an integer longer than Python's limit of {sys.get_int_max_str_digits()} digits"
                  if "integer string conversion" in str(err) else str(err))
        raise RecordError(f"unreadable JSON: {' '.join(reason.split())}", path=path, line=line) from None
    if isinstance(value, (dict, list)) and _too_deep(value):
        raise RecordError(f"invalid JSON: nested deeper than {MAX_DEPTH} levels", path=path, line=line)
    return value


def read_json(path: str | os.PathLike) -> Any:
    """A whole JSON document file; every way it can be unreadable is a RecordError naming the file."""
    if Path(path).is_dir():
        raise RecordError("is a folder, expected a JSON file", path=path)
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(f"not UTF-8 text (byte {err.start}: {err.reason}); a binary file?", path=path) from None
    if not text.strip():
        raise RecordError("is empty, expected a JSON document", path=path)
    return parse_json(text, path=path)


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Stream (line number, parsed object) from a JSONL file; blank lines are skipped.

    Bytes that are not UTF-8, ``\\uD800``-style escapes of lone surrogates (text no later stage could write
    back) and values Python cannot hold (see :func:`parse_json`) fail here, at the line that holds them, not
    after hours of inference."""
    if Path(path).is_dir():
        raise RecordError("is a folder, expected a JSONL file", path=path)
    with open(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            text = decode_line(raw, path=path, line=lineno)
            if text.strip():
                yield lineno, parse_jsonl_text(text, path=path, line=lineno)


def decode_line(raw: bytes, *, path: str | os.PathLike | None, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise RecordError(f"not UTF-8 text (byte {err.start}: {err.reason}); a binary file?", path=path,
                          line=line) from None


def parse_jsonl_text(text: str, *, path: str | os.PathLike | None, line: int) -> Any:
    """One JSONL line -> its value, or a RecordError naming file and line (see :func:`parse_json`)."""
    row = parse_json(text, path=path, line=line)
    if _SURROGATE_ESCAPE.search(text):
        try:
            json.dumps(row, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise RecordError("holds a lone surrogate escape (\\ud800-\\udfff without its pair): not "
                              "encodable text", path=path, line=line) from None
    return row


def read_parquet_rows(path: str | os.PathLike, columns: list[str] | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number from 1, row) of a parquet file, optionally only ``columns``. The one reader of binary inputs: a
    file pyarrow cannot read (text, zero bytes, truncated, a missing column) is a RecordError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if Path(path).is_dir():
        raise RecordError("is a folder, expected a parquet file", path=path)
    row_no = 0
    try:
        handle = pq.ParquetFile(path)
        if columns is not None:
            names = handle.schema_arrow.names
            for name in columns:
                if name not in names:
                    raise RecordError(f"missing column (has {names})", path=path, field=name)
        for batch in handle.iter_batches(batch_size=1024, columns=columns):
            for row in batch.to_pylist():
                row_no += 1
                yield row_no, row
    except (pa.ArrowException, OSError) as err:
        if isinstance(err, (FileNotFoundError, PermissionError, IsADirectoryError)):
            raise
        reason = " ".join(str(err).split()) or type(err).__name__
        after = f" after row {row_no}" if row_no else ""
        raise RecordError(f"not a readable parquet file{after} ({reason[:200]})", path=path) from None


def read_parquet(path: str | os.PathLike, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row of a parquet file as a dict (see :func:`read_parquet_rows` for what fails and how)."""
    return [row for _, row in read_parquet_rows(path, columns)]


def load_pairs(path: str | os.PathLike, *, skip_invalid: bool = False,
               errors: list[str] | None = None) -> list[PreferencePair]:
    """Load PreferencePairs. Invalid rows raise, or with ``skip_invalid`` are counted into ``errors``."""
    return list(iter_pairs(path, skip_invalid=skip_invalid, errors=errors))


def iter_pairs(path: str | os.PathLike, *, skip_invalid: bool = False,
               errors: list[str] | None = None) -> Iterator[PreferencePair]:
    seen: set[str] = set()
    for lineno, row in read_jsonl(path):
        try:
            pair = PreferencePair.from_dict(row, path=path, line=lineno)
            if pair.id in seen:
                raise RecordError(f"duplicate id {pair.id!r}", path=path, line=lineno, field="id")
            seen.add(pair.id)
        except RecordError as err:
            if not skip_invalid:
                raise
            if errors is not None:
                errors.append(str(err))
            continue
        yield pair


def write_json(path: str | os.PathLike, document: Any, *, indent: int = 1) -> Path:
    """Write one JSON document atomically (:mod:`thinkj.atomic`): a reader never sees half a summary."""
    return write_text_atomic(path, json.dumps(document, indent=indent, ensure_ascii=False, default=str) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Write rows atomically (:mod:`thinkj.atomic`) so a crash, or a row that fails, never leaves half a file."""
    count = 0
    with atomic_open(path) as handle:
        for row in rows:
            if hasattr(row, "to_dict"):
                row = row.to_dict()
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count
