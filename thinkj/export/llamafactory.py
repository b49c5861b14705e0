"""LlamaFactory datasets: sharegpt-format JSON files plus the ``dataset_info.json`` that names them.

SFT rows are ``{"messages": [{role, content}, ..., {"role": "assistant", "content": target}]}``.
Preference rows are ``{"messages": [...prompt...], "chosen": {role, content}, "rejected": {role, content}}``.
A system turn, when present, stays the first message (LlamaFactory moves it to the system slot).
Several datasets may share one directory: ``dataset_info.json`` is merged, never overwritten.

    write_sft_dataset(out_dir, "thinkj_judge_sft", [(prompt_messages, target_text), ...])
    write_preference_dataset(out_dir, "thinkj_dpo_iter1", [(prompt_messages, chosen_text, rejected_text), ...])

then in a LlamaFactory YAML: ``dataset: thinkj_judge_sft`` and ``dataset_dir: <out_dir>``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.prompts import Messages
from thinkj.records import RecordError, read_json, write_json

_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
         "system_tag": "system"}


def _check_prompt(messages: Messages, where: str) -> None:
    if not messages or messages[-1].get("role") != "user":
        raise ThinkJError(f"{where}: a prompt must end with a user turn")


def register_dataset(out_dir: str | os.PathLike, name: str, entry: dict) -> None:
    """Add (or replace) one entry of ``out_dir/dataset_info.json``, keeping the others."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    info_path = out_dir / "dataset_info.json"
    info = read_json(info_path) if info_path.exists() else {}
    if not isinstance(info, dict):
        raise RecordError(f"must be a JSON object of datasets, got {type(info).__name__}", path=info_path)
    info[name] = entry
    write_json(info_path, info, indent=2)


def _write(out_dir: Path, name: str, rows: list[dict]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_json(out_dir / f"{name}.json", rows, indent=0)


def write_sft_dataset(out_dir: str | os.PathLike, name: str, examples: Iterable[tuple[Messages, str]]) -> int:
    """Write (prompt messages, assistant target) examples as dataset ``name``; returns the row count."""
    out = Path(out_dir)
    rows = []
    for i, (prompt, target) in enumerate(examples):
        _check_prompt(prompt, f"{name} example {i}")
        rows.append({"messages": [*prompt, {"role": "assistant", "content": target}]})
    _write(out, name, rows)
    register_dataset(out, name, {"file_name": f"{name}.json", "formatting": "sharegpt",
                                 "columns": {"messages": "messages"}, "tags": _TAGS})
    return len(rows)


def write_preference_dataset(out_dir: str | os.PathLike, name: str,
                             examples: Iterable[tuple[Messages, str, str]]) -> int:
    """Write (prompt messages, chosen text, rejected text) examples as a ranking dataset for DPO / reward models."""
    out = Path(out_dir)
    rows = []
    for i, (prompt, chosen, rejected) in enumerate(examples):
        _check_prompt(prompt, f"{name} example {i}")
        rows.append({"messages": list(prompt), "chosen": {"role": "assistant", "content": chosen},
                     "rejected": {"role": "assistant", "content": rejected}})
    _write(out, name, rows)
    register_dataset(out, name, {"file_name": f"{name}.json", "formatting": "sharegpt", "ranking": True,
                                 "columns": {"messages": "messages", "chosen": "chosen", "rejected": "rejected"},
                                 "tags": _TAGS})
    return len(rows)
