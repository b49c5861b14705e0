"""Look-only overlap checks: any training data against benchmarks, and a model's recorded training data at evaluation.

    thinkj data overlap runs/ds/seed_set --against autoj=../shared/data/auto-j/testdata_pairwise.jsonl
    thinkj eval run autoj --model runs/x/train/judge_sft ...   # warns when the model's training data holds Auto-J items

The rules are :mod:`thinkj.data.decontaminate`'s. Training data may be PreferencePair JSONL (its prompt and two
responses are checked), or any rows a training stage reads -- a LlamaFactory dataset folder, a verl parquet, JSON
or JSONL -- of which every string of at least ``MIN_WHOLE`` words is checked (a shorter string is a label, a role
or an id, and could only ever match a benchmark prompt exactly).

A model's training data is what its completion records name: LlamaFactory's ``thinkj_train.json`` (its config's
``dataset_dir``), TRL GRPO's ``thinkj_online_done.json`` (its data file) and verl's ``thinkj_launch.json`` (its
``train_files``; written in the run folder, whose ``hf/`` holds the merged model). The model each of them started
from is followed too, so an RL model is checked with its SFT data.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from thinkj.data.decontaminate import (
    DEFAULT_ENCODER,
    DEFAULT_THRESHOLD,
    MIN_WHOLE,
    RULES,
    Checker,
    pair_fields,
    read_against,
    summarise,
)
from thinkj.data.ngrams import words
from thinkj.errors import ThinkJError

MAX_DEPTH = 6  # start models followed through records (SFT -> DPO -> RL is three)


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(key path, text) of every string inside a JSON value."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)) or hasattr(value, "tolist"):
        for i, item in enumerate(value.tolist() if hasattr(value, "tolist") else value):
            yield from _strings(item, f"{where}.{i}" if where else str(i))


def row_fields(row: Any) -> dict[str, str]:
    """The texts of one training row that are checked (see the module docstring)."""
    messages = row.get("messages") if isinstance(row, dict) else None
    if isinstance(messages, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages) \
            and isinstance(row.get("response_a"), str) and isinstance(row.get("response_b"), str):
        from thinkj.records import PreferencePair

        return pair_fields(PreferencePair(str(row.get("id", "")), "", row["messages"], row["response_a"],
                                          row["response_b"], "a"))
    return {key: text for key, text in _strings(row, "") if len(words(text)) >= MIN_WHOLE}


def training_files(path: Path) -> list[Path]:
    """The data files of a training-data location: the file, the files a LlamaFactory ``dataset_info.json`` registers,
    or else the data files of a folder (not its metadata)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ThinkJError(f"{path}: no such training data file or folder")
    info = path / "dataset_info.json"
    if info.is_file():  # a LlamaFactory dataset folder: exactly the files it registers (not its logs and summaries)
        from thinkj.records import read_json

        entries = read_json(info)
        named = [path / e["file_name"] for e in (entries.values() if isinstance(entries, dict) else ())
                 if isinstance(e, dict) and isinstance(e.get("file_name"), str)]
        if named:
            return sorted(set(named))
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", ".jsonl", ".parquet")
                   and p.name != "dataset_info.json" and not p.name.endswith((".summary.json", ".done.json")))
    if not files:
        raise ThinkJError(f"{path}: no .json, .jsonl or .parquet training data in this folder")
    return files


def training_rows(path: str | os.PathLike) -> list[tuple[str, int, dict[str, str]]]:
    """(row id, row number over all files from 1, texts) of every row of the training data at ``path``."""
    from thinkj.evaluation.rows import read_rows

    rows = []
    for file in training_files(Path(path)):
        for where, line, row in read_rows(file):
            row_id = row.get("id") if isinstance(row, dict) else None
            rows.append((str(row_id) if row_id is not None else f"{Path(where).name}:{line}", len(rows) + 1,
                         row_fields(row)))
    return rows


def check_training_data(train: str | os.PathLike, against: Sequence[str], *, encoder: str | None = DEFAULT_ENCODER,
                        threshold: float = DEFAULT_THRESHOLD,
                        report_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Every row of ``train`` checked against the benchmarks; the counts (and, with ``report_path``, every match)."""
    from thinkj.records import write_jsonl

    benchmarks = read_against(against)
    rows = training_rows(train)
    matches = Checker(benchmarks, encoder=encoder, threshold=threshold).check(rows)
    if report_path is not None:
        write_jsonl(report_path, (m.to_dict() for m in matches))
    return {"train": str(train), **summarise(matches, benchmarks, len(rows))}


def render_overlap(summary: dict[str, Any]) -> str:
    """Markdown: one line per benchmark, the training rows holding its items (by rule) and the items held."""
    lines = [f"{summary['rows_checked']} training rows checked ({summary['train']}); "
             f"{summary['rows_matched']} hold a benchmark item",
             "", "| benchmark | data | items | rows holding an item | " + " | ".join(RULES) + " | items held |",
             "|---|---|---:|---:|" + "---:|" * len(RULES) + "---:|"]
    for bench in summary["benchmarks"]:
        by_rule = " | ".join(str(bench["rows_by_rule"][rule]) for rule in RULES)
        lines.append(f"| {bench['name']} | {bench['source']} | {bench['items']} | {bench['rows_matched']} | {by_rule} "
                     f"| {bench['items_matched']} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ a model's recorded training data

def _read(path: Path) -> dict[str, Any] | None:
    from thinkj.records import read_json

    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except ThinkJError:
        return None  # a damaged record names no data; the check is a warning, never a failure of the evaluation
    return data if isinstance(data, dict) else None


def _records(folder: Path) -> Iterator[tuple[str | None, str | None]]:
    """(training data, start model) of every training record found for the model in ``folder``."""
    for place in (folder, folder.parent):
        lf = _read(place / "thinkj_train.json")
        config = ((lf or {}).get("planned") or {}).get("config") or {}
        if config:
            yield config.get("dataset_dir"), config.get("model_name_or_path")
        trl = (_read(place / "thinkj_online_done.json") or {}).get("run") or {}
        if trl:
            yield trl.get("data"), trl.get("model")
        verl = (_read(place / "thinkj_launch.json") or {}).get("launch") or {}
        if verl:
            yield verl.get("train_files"), verl.get("model")
        if lf or trl or verl:
            return  # the model's own records: the parent folder is another run's


def recorded_training_data(model: str | os.PathLike) -> list[Path]:
    """Training data named by the records of ``model`` and of the models it started from (existing paths only)."""
    found: list[Path] = []
    seen: set[Path] = set()
    todo = [(Path(model), 0)]
    while todo:
        folder, depth = todo.pop()
        if depth > MAX_DEPTH or not folder.is_dir() or folder.resolve() in seen:
            continue
        seen.add(folder.resolve())
        for data, start in _records(folder):
            if data and Path(data).exists() and Path(data) not in found:
                found.append(Path(data))
            if start:
                todo.append((Path(start), depth + 1))
    return found


def warn_training_overlap(model: str, benchmark: str, data: str | None, out: TextIO | None = None) -> int:
    """Before an evaluation: warn when the model's recorded training data holds items of ``benchmark`` (exact and
    n-gram rules). Returns the number of training rows holding an item (0 when nothing is recorded)."""
    paths = recorded_training_data(model)
    if not paths:
        return 0
    out = out or sys.stderr  # looked up now: a caller may have redirected stderr since import
    against = [f"{benchmark}={data}" if data else benchmark]
    try:
        benchmarks = read_against(against)
    except ThinkJError:
        return 0  # the evaluation reads the same data next and stops with its own error
    checker = Checker(benchmarks, encoder="none")
    total = 0
    for path in paths:
        summary = summarise(checker.check(training_rows(path)), benchmarks, 0)
        bench = summary["benchmarks"][0]
        if bench["rows_matched"]:
            total += bench["rows_matched"]
            rules = ", ".join(f"{rule} {bench['rows_by_rule'][rule]}" for rule in RULES if bench["rows_by_rule"][rule])
            print(f"warning: {model} was trained on {path}, where {bench['rows_matched']} rows hold "
                  f"{bench['items_matched']} {benchmark} items ({rules}): its {benchmark} score may be inflated; "
                  f"`thinkj data overlap {path} --against {against[0]}` lists them", file=out)
    return total
