"""verl RL data: parquet rows that verl's ``RLHFDataset`` reads and our reward receives.

Columns: ``data_source`` (str), ``prompt`` (chat messages), ``ability`` (str),
``reward_model`` = ``{"style": "rule", "ground_truth": {"label": "a"|"b", "strength": int|None}}``,
``extra_info`` = ``{"index", "id", "source", "template", "split"}`` (+ ``twin`` and ``order`` when written with
both orders of every comparison, :func:`verl_rows`). Gold ties cannot be earned
with the Think-J answer format (see ``thinkj.rewards.designs.judge``), so they are left out and counted.

:func:`check_rl_row` is the one check of a row read back (TRL GRPO's data, a verl launch's ``--data`` before its
first step): chat messages with roles system / user / assistant and text content, and a ground truth the reward
reads without a ``gold_error`` (``thinkj.rewards.gold``: label a / b / tie, strength a whole number 0-3 or null).
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thinkj.atomic import temp_path, write_error
from thinkj.errors import ThinkJError
from thinkj.prompts import get_template
from thinkj.records import ROLES, PreferencePair, RecordError

DATA_SOURCE = "thinkj/pairwise_judge"


def verl_rows(pairs: Iterable[PreferencePair], template: str = "judge_strength_v2",
              split: str = "train", *, twins: bool = False, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows for the parquet plus counts of what was left out and why.

    With ``twins`` every comparison is written in both orders, side by side (the pair as given, then
    ``pair.swapped()``), in a pair order shuffled with ``seed``; ``extra_info`` gains ``twin`` (the comparison's key,
    shared by its two rows) and ``order`` (0 / 1). Consecutive rows 2k, 2k+1 are twins, so a sequential sampler
    with an even batch size keeps both orders in one step (configs/verl/grpo_consistent.yaml), and the gold is
    (a) in exactly half the rows."""
    tmpl = get_template(template)
    rows, skipped = [], {"tie": 0}
    kept = []
    for i, pair in enumerate(pairs):
        if pair.label == "tie":
            skipped["tie"] += 1
            continue
        kept.append((i, pair))
    if twins:
        random.Random(f"twins-{seed}").shuffle(kept)
    for i, pair in kept:
        for order, shown in enumerate((pair, pair.swapped()) if twins else (pair,)):
            strength = shown.strength if shown.strength else None
            info = {"index": i, "id": pair.id, "source": pair.source, "template": template, "split": split}
            if twins:
                info.update(twin=f"{i}:{pair.id}", order=order)
            rows.append({
                "data_source": DATA_SOURCE,
                "prompt": tmpl.render(shown),
                "ability": "judge",
                "reward_model": {"style": "rule", "ground_truth": {"label": shown.label, "strength": strength}},
                "extra_info": info,
            })
    return rows, skipped


def hold_out(pairs: Iterable[PreferencePair], fraction: float,
             seed: int = 0) -> tuple[list[PreferencePair], list[PreferencePair]]:
    """(pairs to train on, held-out pairs): about ``fraction`` of the pairs, whole questions at a time, so that no
    held-out question (the last user turn) is ever trained on. Questions are ranked by a hash of (``seed``,
    question), which keeps the choice fixed for a seed whatever the file's order, and taken until the held-out
    pairs reach ``round(fraction x pairs)`` (at least one). Refuses a split that would leave nothing to train on."""
    pairs = list(pairs)
    if not 0 < fraction < 1:
        raise ThinkJError(f"held-out fraction {fraction!r}: must be between 0 and 1 (exclusive)")
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.instruction, []).append(i)
    target = max(1, round(fraction * len(pairs)))
    held: set[int] = set()
    for question in sorted(groups, key=lambda q: hashlib.sha256(f"{seed}\0{q}".encode()).hexdigest()):
        if len(held) >= target:
            break
        held.update(groups[question])
    if len(held) == len(pairs):
        raise ThinkJError(f"holding out {fraction:g} of {len(pairs)} pairs takes every pair ({len(groups)} distinct "
                          "question(s), each held out whole): lower the fraction or add pairs")
    return [p for i, p in enumerate(pairs) if i not in held], [p for i, p in enumerate(pairs) if i in held]


def check_rl_row(row: dict[str, Any], *, path: str | os.PathLike, line: int) -> tuple[list[dict[str, str]], str, int | None]:
    """(prompt, label, strength) of one RL parquet row, or a RecordError naming file, row and field."""
    from thinkj.rewards.gold import pair_gold

    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise RecordError("expected a non-empty list of chat messages", path=path, line=line, field="prompt")
    for i, message in enumerate(prompt):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            role = message.get("role") if isinstance(message, dict) else message
            raise RecordError(f"role must be one of {ROLES}, got {role!r:.40}", path=path, line=line,
                              field=f"prompt[{i}].role")
        if not isinstance(message.get("content"), str):
            raise RecordError(f"content must be text, got {message.get('content')!r:.40}", path=path, line=line,
                              field=f"prompt[{i}].content")
    reward_model = row.get("reward_model")
    if not isinstance(reward_model, dict) or not isinstance(reward_model.get("ground_truth"), dict):
        raise RecordError(f"expected {{'ground_truth': {{'label': 'a'|'b'|'tie', 'strength'}}}}, got "
                          f"{reward_model!r:.80}", path=path, line=line, field="reward_model")
    gold = pair_gold(reward_model["ground_truth"])
    if gold.error:  # the reward would score this row with gold_error = 1 at every step: refuse it before the first
        field, _, message = gold.error.partition(": ")
        raise RecordError(message, path=path, line=line, field=f"reward_model.{field}")
    return prompt, gold.label or "", gold.strength


def write_verl_parquet(path: str | os.PathLike, pairs: Iterable[PreferencePair], template: str = "judge_strength_v2",
                       split: str = "train", *, twins: bool = False, seed: int = 0) -> dict[str, Any]:
    """Write the parquet; returns ``{"rows": n, "skipped_tie": k, "gold_a_share": s}`` (``twins``: see
    :func:`verl_rows`). A gold position share more than 5 points from 50 % is warned about on stderr."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from thinkj.rewards.designs.twins import gold_balance

    rows, skipped = verl_rows(pairs, template, split, twins=twins, seed=seed)
    if not rows:
        raise ThinkJError(f"{path}: no pairs left to write (ties skipped: {skipped['tie']})")
    share = gold_balance([r["reward_model"]["ground_truth"]["label"] for r in rows], where=str(path))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    gt_type = pa.struct([("label", pa.string()), ("strength", pa.int64())])
    schema = pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", gt_type)])),
        ("extra_info", pa.struct([("index", pa.int64()), ("id", pa.string()), ("source", pa.string()),
                                  ("template", pa.string()), ("split", pa.string()),
                                  *([("twin", pa.string()), ("order", pa.int64())] if twins else [])])),
    ])
    tmp = temp_path(out)  # a writer's own temp name beside the target, renamed once whole
    try:
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
        os.replace(tmp, out)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        failure = write_error(err, out)
        if failure is not None:
            raise failure from None
        raise
    return {"rows": len(rows), "skipped_tie": skipped["tie"], "gold_a_share": share}


def fitted_prompt_length(model: str | Path, data: str | Path, multiple: int = 16) -> int:
    """The longest chat-templated prompt of a verl parquet in tokens, rounded up to ``multiple`` (verl pads every
    prompt to data.max_prompt_length and, without remove-padding, computes on the padding)."""
    from transformers import AutoTokenizer

    from thinkj.records import read_parquet

    tokenizer = AutoTokenizer.from_pretrained(model)
    longest = max(len(tokenizer.apply_chat_template(list(r["prompt"]), add_generation_prompt=True, tokenize=True,
                                                    return_dict=True)["input_ids"])
                  for r in read_parquet(data, ["prompt"]))
    return -(-longest // multiple) * multiple
