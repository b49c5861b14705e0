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
leaves no half-made seed set behind. Each SFT target is read by the one verdict parser
(:func:`thinkj.verdict_parser.parse_verdict`): a target whose verdict contradicts the pair's label, that states none, or
whose strength differs from the one the critic prompt is told is refused with file, line and field -- SFT on it
would teach the judge the wrong side, or the critic to contradict its instruction.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thinkj.checks import check_output_dir, check_template_kind
from thinkj.data.traces import trace_pair
from thinkj.errors import ThinkJError
from thinkj.export.llamafactory import write_sft_dataset
from thinkj.export.verl import write_verl_parquet
from thinkj.prompts import AnswerFormat, get_template
from thinkj.records import PreferencePair, RecordError, load_pairs, read_jsonl, write_json, write_jsonl
from thinkj.verdict_parser import STRENGTH_RANGE, parse_verdict

JUDGE_DATASET, CRITIC_DATASET = "thinkj_judge_sft", "thinkj_critic_sft"


# Targets are the clip stage's choice sentence (strength optional), whatever prompt the seed set renders.
TARGET_FORMAT = AnswerFormat(think=True, strength="optional")


def check_target(target: str, pair: PreferencePair, strength: object, path: Path, line: int) -> None:
    """The target's verdict is the pair's label, and a strength it states is the one the critic prompt is told (a
    preference strength 1-3, or none)."""
    low, high = STRENGTH_RANGE
    if strength is not None and (isinstance(strength, bool) or not isinstance(strength, int)
                                 or not low <= strength <= high):
        raise RecordError(f"must be an integer {low}-{high} or null, got {strength!r}", path=path, line=line,
                          field="strength")
    verdict = parse_verdict(target, TARGET_FORMAT, strict=False)
    if verdict.choice == "none":
        raise RecordError(f"the target states no verdict the parser reads ({verdict.reason})", path=path, line=line,
                          field="target")
    if verdict.choice != pair.label:
        raise RecordError(f"the target's verdict {verdict.choice!r} contradicts the label {pair.label!r}", path=path,
                          line=line, field="target")
    if verdict.strength is not None and verdict.strength != strength:
        raise RecordError(f"the target states strength {verdict.strength} but the record's is {strength!r}: the "
                          "critic would be told one and taught the other", path=path, line=line, field="strength")


def run_seed_set(clipped_path: str | os.PathLike, out_dir: str | os.PathLike, *, rl_pairs: str | os.PathLike | None = None,
                 template: str = "judge_strength_v2", critic_template: str = "critic_strength_v2") -> dict[str, Any]:
    """Write both SFT datasets, the verl parquet and the RL pairs JSONL; return (and save) a summary."""
    clipped_path, out = Path(clipped_path), Path(out_dir)
    check_template_kind("--template", template, ("judge", "double_score"))
    check_template_kind("--critic-template", critic_template, ("critic",))
    judge, critic = get_template(template), get_template(critic_template)
    judge_rows, critic_rows, pairs = [], [], []
    for line, row in read_jsonl(clipped_path):
        pair = trace_pair(row, clipped_path, line)
        target = row.get("target")
        if not isinstance(target, str) or not target.strip():
            raise RecordError("clipped trace needs a non-empty 'target'", path=clipped_path, line=line, field="target")
        if row.get("verdict") != pair.label:
            raise RecordError(f"verdict {row.get('verdict')!r} differs from the label {pair.label!r} (not accuracy-filtered?)",
                              path=clipped_path, line=line, field="verdict")
        strength = row.get("strength", pair.strength)
        check_target(target, pair, strength, clipped_path, line)
        judge_rows.append((judge.render(pair), target))
        critic_rows.append((critic.render(pair, verdict=pair.label, strength=strength), target))
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
