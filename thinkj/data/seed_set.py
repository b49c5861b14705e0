"""Seed set (LIMJ707): the clipped traces as judge SFT and critic SFT data, and the RL data for verl / TRL.

* ``thinkj_judge_sft`` (LlamaFactory, sharegpt): prompt = the judge template (``judge_strength_v2``)
  rendered for the pair, target = the clipped trace (explanation in ``<think>``, then the verdict sentence).
* ``thinkj_critic_sft``: prompt = the critic template (``critic_strength_v2``) told the gold verdict and the
  strength the target states (the teacher's when it gave one, else the dataset's -- told and written
  strength must agree or the critic learns to contradict its instruction), same target.
* ``rl.parquet`` (verl: ``data_source``, ``prompt``, ``ability``, ``reward_model.ground_truth``,
  ``extra_info``) and ``rl_pairs.jsonl`` (the same pairs as PreferencePair JSONL, for TRL). By default the
  RL pairs are the clipped pairs; pass another PreferencePair file to train RL on other data.

All files go into one folder with a merged ``dataset_info.json`` and ``seed_set.summary.json``. Every input
(the clipped traces and ``--rl-pairs``) is read and checked before the first file is written, so a bad input
leaves no half-made seed set behind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thinkj.checks import check_output_dir
from thinkj.data.traces import trace_pair
from thinkj.errors import ThinkJError
from thinkj.export.llamafactory import write_sft_dataset
from thinkj.export.verl import write_verl_parquet
from thinkj.prompts import get_template
from thinkj.records import RecordError, load_pairs, read_jsonl, write_json, write_jsonl

JUDGE_DATASET, CRITIC_DATASET = "thinkj_judge_sft", "thinkj_critic_sft"


def run_seed_set(clipped_path: str | os.PathLike, out_dir: str | os.PathLike, *, rl_pairs: str | os.PathLike | None = None,
                 template: str = "judge_strength_v2", critic_template: str = "critic_strength_v2") -> dict[str, Any]:
    """Write both SFT datasets, the verl parquet and the RL pairs JSONL; return (and save) a summary."""
    clipped_path, out = Path(clipped_path), Path(out_dir)
    judge, critic = get_template(template), get_template(critic_template)
    if critic.kind != "critic":
        raise ThinkJError(f"{critic_template} is a {critic.kind} template, not a critic")
    judge_rows, critic_rows, pairs = [], [], []
    for line, row in read_jsonl(clipped_path):
        pair = trace_pair(row, clipped_path, line)
        target = row.get("target")
        if not isinstance(target, str) or not target.strip():
            raise RecordError("clipped trace needs a non-empty 'target'", path=clipped_path, line=line, field="target")
        if row.get("verdict") != pair.label:
            raise RecordError(f"verdict {row.get('verdict')!r} differs from the label {pair.label!r} (not accuracy-filtered?)",
                              path=clipped_path, line=line, field="verdict")
        judge_rows.append((judge.render(pair), target))
        critic_rows.append((critic.render(pair, verdict=pair.label, strength=row.get("strength", pair.strength)), target))
        pairs.append(pair)
    if not pairs:
        raise ThinkJError(f"{clipped_path}: no clipped traces to build a seed set from")
    rl = load_pairs(rl_pairs) if rl_pairs else pairs  # read (and validated) before anything is written
    if not rl:
        raise ThinkJError(f"{rl_pairs}: no RL pairs in the file")
    check_output_dir("OUT_DIR", out)
    out.mkdir(parents=True, exist_ok=True)
    n_judge = write_sft_dataset(out, JUDGE_DATASET, judge_rows)
    n_critic = write_sft_dataset(out, CRITIC_DATASET, critic_rows)
    rl_jsonl = out / "rl_pairs.jsonl"
    write_jsonl(rl_jsonl, rl)
    verl = write_verl_parquet(out / "rl.parquet", rl, template)
    summary = {"stage": "seed_set", "input": str(clipped_path), "output": str(out), "n_in": len(pairs),
               "n_out": n_judge, "datasets": {JUDGE_DATASET: n_judge, CRITIC_DATASET: n_critic},
               "templates": {"judge": template, "critic": critic_template},
               "rl_pairs": str(rl_jsonl), "rl_parquet": str(out / "rl.parquet"), "rl_rows": verl["rows"],
               "rl_skipped_tie": verl["skipped_tie"], "rl_source": str(rl_pairs or clipped_path)}
    write_json(out / "seed_set.summary.json", summary)
    return summary
