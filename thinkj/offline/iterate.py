"""Iterative critic-guided offline learning (paper §3.2.1 step 4, Table 7).

Iteration k judges the training pairs with the current judge (iteration 1: the SFT judge; later: the
previous iteration's DPO model), builds critic-guided pairs with the fixed critic, and trains DPO (+SFT term)
from the current judge. Everything of iteration k stays under ``<run>/offline/iter_<k>/``:
``data/`` (dataset, pairs_log.jsonl, summary.json, generation cache) and ``model/`` (the DPO model). A rerun
skips finished iterations (cached generations, finished training directories). The pairs' generation budget
is the profile's ``max_new_tokens`` unless ``pair_kwargs`` gives one.

    thinkj train offline --pairs runs/x/task/train.jsonl --judge runs/x/train/judge_sft \\
        --critic runs/x/train/critic_sft --run-dir runs/x --iterations 3 --model tiny max_steps=20
    # GPU: --model qwen2.5-7b-instruct --backend vllm (generation), DPO through torchrun + DeepSpeed ZeRO-2
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thinkj.errors import StageIncomplete, ThinkJError
from thinkj.offline.build import DPO_DATASET, build_critic_pairs
from thinkj.records import PreferencePair, write_json
from thinkj.train.config import parse_overrides
from thinkj.train.launch import run_stage


def iteration_dir(run_dir: str | Path, k: int) -> Path:
    return Path(run_dir) / "offline" / f"iter_{k}"


def run_offline_iterations(pairs: str | Path | list[PreferencePair], init_model: str | Path, critic_model: str | Path,
                           run_dir: str | Path, *, iterations: int = 1, stage_config: str = "dpo",
                           profile: str | None = None, overrides: Iterable[str] | dict[str, Any] = (),
                           device: str | None = None, force: bool = False, cpu_bf16: bool = False,
                           processes: int = 1, pair_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Run iterations 1..N; returns one summary per iteration (pairs, model dir)."""
    if iterations < 1:
        raise ThinkJError("iterations must be >= 1")
    extra = dict(overrides) if isinstance(overrides, dict) else parse_overrides(overrides)
    judge = Path(init_model)
    history = []
    for k in range(1, iterations + 1):
        it = iteration_dir(run_dir, k)
        data = build_critic_pairs(pairs, judge, critic_model, it / "data", dataset=DPO_DATASET,
                                  **{"profile": profile, **(pair_kwargs or {})})
        if data["pairs"] == 0:  # a stage that keeps nothing is not done: DPO on no pairs is no training
            raise StageIncomplete(f"iteration {k}: no DPO pairs were kept -- see {it / 'data' / 'summary.json'} "
                                  f"for why (counts: {data['counts']})")
        # The judge being improved is also DPO's reference model (LlamaFactory copies it when ref_model is unset).
        model = run_stage("dpo", stage_config, profile=profile, run_dir=it, name="model", device=device, force=force,
                          cpu_bf16=cpu_bf16, processes=processes,
                          overrides={**extra, "model_name_or_path": str(judge), "dataset": DPO_DATASET,
                                     "dataset_dir": str((it / "data").resolve())})
        history.append({"iteration": k, "judge": str(judge), "pairs": data["pairs"], "counts": data["counts"],
                        "model": str(model)})
        judge = model
    write_json(Path(run_dir) / "offline" / "iterations.json", history)
    return history
