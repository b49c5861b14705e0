"""Critic SFT data for a generated task: the seed set's critic examples plus rule-written wrong-side ones.

    thinkj data critic-data runs/cpu/data/seed_set runs/cpu/data/critic_data --wrong-side-from train.jsonl \\
        --task facts --every 2

The paper's critic is told the right verdict and writes the thinking that leads to it. A small model trained on
those alone learns to judge rather than to argue the side it is told, and then writes no negatives for the
critic-guided pairs (measured on the tiny model: 0 of 43). So every ``every``-th training pair also gives an example
told the *wrong* side, argued by the task's rule (:meth:`thinkj.synthetic.tasks.Task.argue`). Both datasets sit in
one folder, as LlamaFactory reads several datasets from one ``dataset_dir``:
``dataset=thinkj_critic_sft,thinkj_critic_wrong_side``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from thinkj.records import RecordError, read_json

SEED_SET_CRITIC = "thinkj_critic_sft"
WRONG_SIDE = "thinkj_critic_wrong_side"


def write_critic_data(seed_set: str | os.PathLike, out: str | os.PathLike, pairs_path: str | os.PathLike, *,
                      task: str, every: int, template: str = "critic_strength_v2") -> dict[str, Any]:
    """Copy the seed set's critic dataset into ``out`` and add the wrong-side one; returns the counts."""
    from thinkj.checks import check_range
    from thinkj.export.llamafactory import register_dataset, write_sft_dataset
    from thinkj.records import load_pairs
    from thinkj.synthetic.sft_examples import critic_sft_examples
    from thinkj.synthetic.tasks import get_task

    check_range("--every", every, low=1)
    seed_set, out = Path(seed_set), Path(out)
    info_path = seed_set / "dataset_info.json"
    info = read_json(info_path)
    if not isinstance(info, dict) or not isinstance(info.get(SEED_SET_CRITIC), dict):
        raise RecordError(f"no {SEED_SET_CRITIC!r} dataset (run `thinkj data seed-set` first)", path=info_path,
                          field=SEED_SET_CRITIC)
    entry = info[SEED_SET_CRITIC]
    generated = get_task(task)
    pairs = load_pairs(pairs_path)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(seed_set / entry["file_name"], out / entry["file_name"])
    register_dataset(out, SEED_SET_CRITIC, entry)
    wrong = critic_sft_examples(pairs[::every], template, wrong_side_every=1, explain=generated.explain,
                                argue=generated.argue)
    n = write_sft_dataset(out, WRONG_SIDE, wrong)
    return {"seed_set_examples": len(read_json(out / entry["file_name"])), "wrong_side_examples": n, "task": task, "every": every,
            "datasets": f"{SEED_SET_CRITIC},{WRONG_SIDE}"}


def exclude_pairs(pairs_path: str | os.PathLike, exclude_path: str | os.PathLike,
                  out: str | os.PathLike) -> dict[str, int]:
    """The pairs of ``pairs_path`` whose id is not in ``exclude_path``, in their order (the comparisons outside the
    seed set, for critic-guided pairs that do not replay what the SFT judge was trained on)."""
    from thinkj.records import load_pairs, write_jsonl

    pairs = load_pairs(pairs_path)
    seen = {p.id for p in load_pairs(exclude_path)}
    kept = [p for p in pairs if p.id not in seen]
    write_jsonl(out, kept)
    return {"n_in": len(pairs), "n_out": len(kept), "excluded": len(pairs) - len(kept)}
