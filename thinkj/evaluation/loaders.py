"""Loaders of the pair benchmarks: RewardBench, RM-Bench, Auto-J and PreferencePair sets.

A *comparison* is a :class:`PreferencePair` in its original order: for RewardBench and RM-Bench the chosen
response is shown as (a); for Auto-J response 1 is (a) and the gold label may be a tie. Each pair carries
``meta["record"]``: the fields every judgment record of that comparison gets (``item_id``, ``subset``,
``domain``, ``chosen_style``, ``rejected_style``, ``scenario``). Pair ids are unique per comparison.

Sources are a local file or folder (JSON, JSONL or parquet) or, in normal use, a hub name or URL
(:func:`thinkj.evaluation.rows.read_rows`). A bad row raises :class:`RecordError` naming the file, row and field.
Each loader is registered in :mod:`thinkj.evaluation.registry`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thinkj.evaluation.rows import prompt_messages, read_rows, row_field, unique_pairs
from thinkj.evaluation.scoring_rules import AUTOJ_LABELS, RMBENCH_DOMAINS, RMBENCH_STYLES
from thinkj.records import PreferencePair, RecordError, load_pairs


def _pair(pid: str, source: str, messages, a: str, b: str, label: str, record: dict[str, Any]) -> PreferencePair:
    return PreferencePair(pid, source, messages, a, b, label, None, {"record": record})


def load_rewardbench(source: str | os.PathLike, split: str | None = "filtered") -> list[PreferencePair]:
    """RewardBench rows: prompt, chosen, rejected, subset, id (extra columns such as chosen_model are ignored)."""
    pairs = []
    for where, line, row in read_rows(source, split):
        item = str(row_field(row, "id", (int, str), where, line))
        subset = row_field(row, "subset", str, where, line)
        messages = prompt_messages(row_field(row, "prompt", (str, list), where, line), where, line)
        chosen = row_field(row, "chosen", str, where, line)
        rejected = row_field(row, "rejected", str, where, line)
        pairs.append(_pair(f"{subset}:{item}", "rewardbench", messages, chosen, rejected, "a",
                           {"item_id": item, "subset": subset}))
    return unique_pairs(pairs, source)


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
        item = str(row_field(row, "id", (int, str), where, line))
        domain = _rmbench_domain(row, where, line)
        messages = prompt_messages(row_field(row, "prompt", (str, list), where, line), where, line)
        responses = {}
        for name in ("chosen", "rejected"):
            value = row_field(row, name, list, where, line)
            if len(value) != len(RMBENCH_STYLES) or not all(isinstance(v, str) for v in value):
                raise RecordError(f"must be a list of {len(RMBENCH_STYLES)} strings (one per style)",
                                  path=where, line=line, field=name)
            responses[name] = value
        for i, chosen in enumerate(responses["chosen"]):
            for j, rejected in enumerate(responses["rejected"]):
                pairs.append(_pair(f"{domain}:{item}:{i}{j}", "rmbench", messages, chosen, rejected, "a",
                                   {"item_id": f"{domain}:{item}", "domain": domain, "chosen_style": i,
                                    "rejected_style": j}))
    return unique_pairs(pairs, source)


def load_autoj(source: str | os.PathLike, split: str | None = None) -> list[PreferencePair]:
    """Auto-J pairwise rows: scenario, label (0/1/2), prompt, "response 1", "response 2"; the row number is the id."""
    pairs = []
    for where, line, row in read_rows(source, split):
        scenario = row_field(row, "scenario", str, where, line)
        label = row_field(row, "label", int, where, line)
        if label not in AUTOJ_LABELS:
            raise RecordError(f"must be 0, 1 or 2, got {label}", path=where, line=line, field="label")
        messages = prompt_messages(row_field(row, "prompt", str, where, line), where, line)
        first = row_field(row, "response 1", str, where, line)
        second = row_field(row, "response 2", str, where, line)
        item = str(row.get("id", line - 1))  # the file has no id column: its 0-based row index is the id
        pairs.append(_pair(item, "autoj", messages, first, second, AUTOJ_LABELS[label],
                           {"item_id": item, "scenario": scenario}))
    return unique_pairs(pairs, source)


def load_synthetic(source: str | os.PathLike, split: str | None = None) -> list[PreferencePair]:
    """Any PreferencePair JSONL (validated by thinkj.records); the pair's source is its subset."""
    pairs = load_pairs(source)
    for pair in pairs:
        pair.meta = {**pair.meta, "record": {"item_id": pair.id, "subset": pair.source}}
    return pairs
