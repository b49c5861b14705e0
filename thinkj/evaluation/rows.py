"""Read benchmark rows from a local file/folder, a hub dataset or a URL, with file/row/field checks.

Every benchmark loader reads through :func:`read_rows` and checks each field with :func:`row_field`, so a bad row
fails in one line naming the file, the row and the field. Nothing here knows any benchmark.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from thinkj.records import PreferencePair, RecordError, read_json, read_jsonl, read_parquet_rows

Row = tuple[str, int, Any]  # (where, row number from 1, parsed row)


def _read_file(path: Path) -> Iterator[Row]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        for i, row in read_parquet_rows(path):
            yield str(path), i, row
        return
    if suffix == ".json":
        with open(path, "rb") as handle:
            head = handle.read(4096).lstrip()[:1]
        if head == b"[":  # one JSON array (RM-Bench's files); anything else is read as JSON lines
            for i, row in enumerate(read_json(path), start=1):
                yield str(path), i, row
            return
    for line, row in read_jsonl(path):
        yield str(path), line, row


def read_rows(source: str | os.PathLike, split: str | None = None) -> Iterator[Row]:
    """Rows of a local file/folder, else of a hub dataset or URL via ``datasets.load_dataset``."""
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", ".jsonl", ".parquet"))
        if not files:
            raise FileNotFoundError(f"{path}: no .json, .jsonl or .parquet files")
        for file in files:
            yield from _read_file(file)
        return
    if path.is_file():
        yield from _read_file(path)
        return
    text = str(source)
    if "://" not in text and (text.startswith(("/", "./", "../")) or text.endswith((".json", ".jsonl", ".parquet"))):
        raise FileNotFoundError(f"{text}: no such file or folder")
    from datasets import load_dataset

    if "://" in text:  # a raw file URL (Auto-J's test set lives in its GitHub repository)
        data = load_dataset("json", data_files=text, split="train")
    else:
        data = load_dataset(text, split=split or "train")
    where = f"{text}[{split or 'train'}]"
    for i, row in enumerate(data, start=1):
        yield where, i, row


def row_field(row: Any, name: str, kind: type | tuple[type, ...], where: str, line: int) -> Any:
    if not isinstance(row, dict):
        raise RecordError(f"expected a JSON object, got {type(row).__name__}", path=where, line=line)
    if name not in row:
        raise RecordError("missing", path=where, line=line, field=name)
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecordError(f"must be {names}, got {type(value).__name__}", path=where, line=line, field=name)
    return value


def prompt_messages(value: Any, where: str, line: int) -> list[dict[str, str]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return [{"role": m["role"], "content": str(m["content"])} for m in value]
    raise RecordError("must be a string or a list of {role, content}", path=where, line=line, field="prompt")


def unique_pairs(pairs: list[PreferencePair], source: Any) -> list[PreferencePair]:
    seen: set[str] = set()
    for pair in pairs:
        if pair.id in seen:
            raise RecordError(f"duplicate item {pair.id!r}", path=str(source), field="id")
        seen.add(pair.id)
    return pairs



def take_items(pairs: list[PreferencePair], limit: int, group_field: str) -> list[PreferencePair]:
    """The first ``limit`` items taken round-robin over groups, so a slice covers every subset/domain/scenario."""
    items: dict[str, list[PreferencePair]] = {}
    group_of: dict[str, str] = {}
    for pair in pairs:
        record = pair.meta["record"]
        items.setdefault(record["item_id"], []).append(pair)
        group_of.setdefault(record["item_id"], str(record.get(group_field)))
    rank: dict[str, int] = {}
    seen: dict[str, int] = {}
    for item in items:  # item's rank inside its group, in file order
        group = group_of[item]
        rank[item] = seen.get(group, 0)
        seen[group] = rank[item] + 1
    group_rank = {g: k for k, g in enumerate(dict.fromkeys(group_of.values()))}
    keep = sorted(items, key=lambda it: (rank[it], group_rank[group_of[it]]))[:limit]
    keep_set = set(keep)
    return [p for p in pairs if p.meta["record"]["item_id"] in keep_set]
