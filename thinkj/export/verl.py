"""verl RL data: parquet rows that verl's ``RLHFDataset`` reads and our reward receives.

Columns: ``data_source`` (str), ``prompt`` (chat messages), ``ability`` (str),
``reward_model`` = ``{"style": "rule", "ground_truth": {"label": "a"|"b", "strength": int|None}}``,
``extra_info`` = ``{"index", "id", "source", "template", "split"}``. Gold ties cannot be earned
with the Think-J answer format (see ``thinkj.rewards.judge``), so they are left out and counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thinkj.atomic import temp_path, write_error
from thinkj.errors import ThinkJError
from thinkj.prompts import get_template
from thinkj.records import PreferencePair

DATA_SOURCE = "thinkj/pairwise_judge"


def verl_rows(pairs: Iterable[PreferencePair], template: str = "judge_strength_v2",
              split: str = "train") -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows for the parquet plus counts of what was left out and why."""
    tmpl = get_template(template)
    rows, skipped = [], {"tie": 0}
    for i, pair in enumerate(pairs):
        if pair.label == "tie":
            skipped["tie"] += 1
            continue
        strength = pair.strength if pair.strength else None
        rows.append({
            "data_source": DATA_SOURCE,
            "prompt": tmpl.render(pair),
            "ability": "judge",
            "reward_model": {"style": "rule", "ground_truth": {"label": pair.label, "strength": strength}},
            "extra_info": {"index": i, "id": pair.id, "source": pair.source, "template": template, "split": split},
        })
    return rows, skipped


def write_verl_parquet(path: str | os.PathLike, pairs: Iterable[PreferencePair], template: str = "judge_strength_v2",
                       split: str = "train") -> dict[str, int]:
    """Write the parquet; returns ``{"rows": n, "skipped_tie": k}``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, skipped = verl_rows(pairs, template, split)
    if not rows:
        raise ThinkJError(f"{path}: no pairs left to write (ties skipped: {skipped['tie']})")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    gt_type = pa.struct([("label", pa.string()), ("strength", pa.int64())])
    schema = pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", gt_type)])),
        ("extra_info", pa.struct([("index", pa.int64()), ("id", pa.string()), ("source", pa.string()),
                                  ("template", pa.string()), ("split", pa.string())])),
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
    return {"rows": len(rows), "skipped_tie": skipped["tie"]}
