"""Load RewardBench, RM-Bench, Auto-J and PreferencePair sets into comparisons to judge.

A *comparison* is a :class:`PreferencePair` in its original order: for RewardBench and RM-Bench the chosen
response is shown as (a); for Auto-J response 1 is (a) and the gold label may be a tie. Each pair carries
``meta["record"]``: the fields every judgment record of that comparison gets (``item_id``, ``subset``,
``domain``, ``chosen_style``, ``rejected_style``, ``scenario``). Pair ids are unique per comparison.

Sources are a local file or folder (JSON, JSONL or parquet) or, in normal use, a hub name or URL read with
``datasets.load_dataset``. A bad row raises :class:`RecordError` naming the file, row and field.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation.specs import AUTOJ_LABELS, RMBENCH_DOMAINS, RMBENCH_STYLES, get_spec
from thinkj.records import PreferencePair, RecordError, load_pairs, read_jsonl

Row = tuple[str, int, Any]  # (where, row number from 1, parsed row)


def _read_file(path: Path) -> Iterator[Row]:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist(), start=1):
            yield str(path), i, row
        return
    if suffix == ".json":
        with open(path, encoding="utf-8") as handle:
            head = handle.read(4096).lstrip()[:1]
        if head == "[":  # one JSON array (RM-Bench's files); anything else is read as JSON lines
            try:
                rows = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise RecordError(f"invalid JSON ({err.msg} at line {err.lineno})", path=path) from None
            for i, row in enumerate(rows, start=1):
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


def _field(row: Any, name: str, kind: type | tuple[type, ...], where: str, line: int) -> Any:
    if not isinstance(row, dict):
        raise RecordError(f"expected a JSON object, got {type(row).__name__}", path=where, line=line)
    if name not in row:
        raise RecordError("missing", path=where, line=line, field=name)
    value = row[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecordError(f"must be {names}, got {type(value).__name__}", path=where, line=line, field=name)
    return value


def _prompt_messages(value: Any, where: str, line: int) -> list[dict[str, str]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m and "content" in m for m in value):
        return [{"role": m["role"], "content": str(m["content"])} for m in value]
    raise RecordError("must be a string or a list of {role, content}", path=where, line=line, field="prompt")


def _pair(pid: str, source: str, messages, a: str, b: str, label: str, record: dict[str, Any]) -> PreferencePair:
    return PreferencePair(pid, source, messages, a, b, label, None, {"record": record})


def load_rewardbench(source: str | os.PathLike, split: str | None = "filtered") -> list[PreferencePair]:
    """RewardBench rows: prompt, chosen, rejected, subset, id (extra columns such as chosen_model are ignored)."""
    pairs = []
    for where, line, row in read_rows(source, split):
        item = str(_field(row, "id", (int, str), where, line))
        subset = _field(row, "subset", str, where, line)
        messages = _prompt_messages(_field(row, "prompt", (str, list), where, line), where, line)
        chosen = _field(row, "chosen", str, where, line)
        rejected = _field(row, "rejected", str, where, line)
        pairs.append(_pair(f"{subset}:{item}", "rewardbench", messages, chosen, rejected, "a",
                           {"item_id": item, "subset": subset}))
    return _unique(pairs, source)


def _rmbench_domain(row: dict, where: str, line: int) -> str:
    domain = row.get("domain")
    if domain is None:  # the repository's files carry no domain column: it is the file name (chat_filtered.json)
        stem = Path(where).name.split("_filtered")[0]
        domain = stem if stem in RMBENCH_DOMAINS else None
    if domain not in RMBENCH_DOMAINS:
        raise RecordError(f"unknown domain {domain!r} (expected one of {RMBENCH_DOMAINS}, or a file named "
                          "<domain>_filtered.json)", path=where, line=line, field="domain")
    return domain


def load_rmbench(source: str | os.PathLike, split: str | None = "train") -> list[PreferencePair]:
    """RM-Bench rows: id, prompt, chosen[3], rejected[3] (styles concise, detailed plain, detailed markdown)."""
    pairs = []
    for where, line, row in read_rows(source, split):
        item = str(_field(row, "id", (int, str), where, line))
        domain = _rmbench_domain(row, where, line)
        messages = _prompt_messages(_field(row, "prompt", (str, list), where, line), where, line)
        responses = {}
        for name in ("chosen", "rejected"):
            value = _field(row, name, list, where, line)
            if len(value) != len(RMBENCH_STYLES) or not all(isinstance(v, str) for v in value):
                raise RecordError(f"must be a list of {len(RMBENCH_STYLES)} strings (one per style)",
                                  path=where, line=line, field=name)
            responses[name] = value
        for i, chosen in enumerate(responses["chosen"]):
            for j, rejected in enumerate(responses["rejected"]):
                pairs.append(_pair(f"{domain}:{item}:{i}{j}", "rmbench", messages, chosen, rejected, "a",
                                   {"item_id": f"{domain}:{item}", "domain": domain, "chosen_style": i,
                                    "rejected_style": j}))
    return _unique(pairs, source)


def load_autoj(source: str | os.PathLike, split: str | None = None) -> list[PreferencePair]:
    """Auto-J pairwise rows: scenario, label (0/1/2), prompt, "response 1", "response 2"; the row number is the id."""
    pairs = []
    for where, line, row in read_rows(source, split):
        scenario = _field(row, "scenario", str, where, line)
        label = _field(row, "label", int, where, line)
        if label not in AUTOJ_LABELS:
            raise RecordError(f"must be 0, 1 or 2, got {label}", path=where, line=line, field="label")
        messages = _prompt_messages(_field(row, "prompt", str, where, line), where, line)
        first = _field(row, "response 1", str, where, line)
        second = _field(row, "response 2", str, where, line)
        item = str(row.get("id", line - 1))  # the file has no id column: its 0-based row index is the id
        pairs.append(_pair(item, "autoj", messages, first, second, AUTOJ_LABELS[label],
                           {"item_id": item, "scenario": scenario}))
    return _unique(pairs, source)


def load_synthetic(source: str | os.PathLike, split: str | None = None) -> list[PreferencePair]:
    """Any PreferencePair JSONL (validated by thinkj.records); the pair's source is its subset."""
    pairs = load_pairs(source)
    for pair in pairs:
        pair.meta = {**pair.meta, "record": {"item_id": pair.id, "subset": pair.source}}
    return pairs


def _unique(pairs: list[PreferencePair], source: Any) -> list[PreferencePair]:
    seen: set[str] = set()
    for pair in pairs:
        if pair.id in seen:
            raise RecordError(f"duplicate item {pair.id!r}", path=str(source), field="id")
        seen.add(pair.id)
    return pairs


def _load_judgebench(source: str | os.PathLike, split: str | None = None) -> list[PreferencePair]:
    from thinkj.evaluation.judgebench import load_judgebench  # its own module (imports this one)

    return load_judgebench(source, split)


def _no_pairs(source: str | os.PathLike, split: str | None = None) -> list[PreferencePair]:
    raise ThinkJError("rewardbench2 items are best-of-4 and Ties sets, not pairs: "
                      "thinkj.evaluation.rewardbench2.load_items reads them")


LOADERS = {"rewardbench": load_rewardbench, "rmbench": load_rmbench, "autoj": load_autoj, "synthetic": load_synthetic,
           "judgebench": _load_judgebench, "rewardbench2": _no_pairs}


def load_benchmark(name: str, source: str | os.PathLike | None = None, split: str | None = None,
                   limit: int | None = None) -> list[PreferencePair]:
    """The comparisons of benchmark ``name``; ``limit`` keeps that many *items*, spread evenly over its groups."""
    spec = get_spec(name)
    chosen = source if source is not None else spec.default_source
    if chosen is None:
        raise ThinkJError(f"benchmark {name!r} has no default source: pass --data PATH")
    pairs = LOADERS[name](chosen, split if split is not None else spec.default_split)
    return take_items(pairs, limit, spec.group_field) if limit else pairs


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
