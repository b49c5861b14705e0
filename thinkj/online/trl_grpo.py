"""GRPO with the Think-J reward on one machine, through TRL's ``GRPOTrainer`` (CPU or a single GPU).

    # tiny model, CPU, a few steps (what `thinkj smoke` and the tests run)
    thinkj train rl --engine trl --algo grpo --model runs/tiny/model --data runs/smoke/synthetic_data/train.jsonl \\
        --out runs/cpu/online_trl --steps 4 --num-generations 4 --max-completion-length 32
    # one GPU, a real judge, the paper's GRPO learning rate and KL coefficient (Table 11)
    thinkj train rl --engine trl --algo grpo --model runs/qwen7b/judge_sft --data data/verl/train.parquet \\
        --out runs/qwen7b/online_trl --steps 500 --num-generations 8 --max-completion-length 3072 --preset thinkj_qwen

The data is either a PreferencePair JSONL (the prompt is rendered with ``judge_strength_v2``, ties left
out and counted) or the verl parquet from ``thinkj.export.verl`` (its ``prompt`` column as is; the gold
label and strength from ``reward_model.ground_truth``). The reward is the same preset function verl
calls (``thinkj.rewards``); its accuracy and format terms are also passed to TRL as zero-weight reward
functions so TRL logs them per step (``rewards/acc/mean``, ``rewards/format/mean``) for the curves.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from thinkj.records import RecordError, load_pairs, write_jsonl
from thinkj.rewards import get_preset
from thinkj.rewards.trl import TRLReward, completion_text

DONE_MARKER = "thinkj_online_done.json"


def load_rl_rows(path: str | os.PathLike, template: str = "judge_strength_v2") -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows ``{prompt: messages, label, strength}`` from a PreferencePair JSONL or a verl parquet, plus skip counts."""
    path = Path(path)
    if not path.exists():
        raise RecordError("RL data file not found", path=path)
    if path.suffix == ".parquet":
        return _rows_from_parquet(path)
    from thinkj.export.verl import verl_rows

    rows, skipped = verl_rows(load_pairs(path), template)
    return [{"prompt": r["prompt"], **_gold(r["reward_model"], path, i + 1)} for i, r in enumerate(rows)], skipped


def _gold(reward_model: Any, path: Path, row: int) -> dict[str, Any]:
    gt = (reward_model or {}).get("ground_truth") if isinstance(reward_model, dict) else None
    if not isinstance(gt, dict) or gt.get("label") not in ("a", "b", "tie"):
        raise RecordError(f"expected {{'label': 'a'|'b'|'tie', 'strength'}} , got {gt!r:.80}", path=path, line=row,
                          field="reward_model.ground_truth")
    return {"label": gt["label"], "strength": gt.get("strength")}


def _rows_from_parquet(path: Path) -> tuple[list[dict[str, Any]], dict[str, int]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    for column in ("prompt", "reward_model"):
        if column not in table.column_names:
            raise RecordError(f"missing column (has {table.column_names})", path=path, field=column)
    rows, skipped = [], {"tie": 0}
    for i, rec in enumerate(table.select(["prompt", "reward_model"]).to_pylist()):
        gold = _gold(rec["reward_model"], path, i + 1)
        if gold["label"] == "tie":
            skipped["tie"] += 1
            continue
        if not isinstance(rec["prompt"], list) or not rec["prompt"]:
            raise RecordError("expected a non-empty list of chat messages", path=path, line=i + 1, field="prompt")
        rows.append({"prompt": rec["prompt"], **gold})
    return rows, skipped


class RewardComponent:
    """One term of a preset's output (e.g. ``acc``) as a TRL reward function, so TRL logs it per step."""

    def __init__(self, preset: str, key: str, **weights: Any):
        self.preset, self.key, self.weights = get_preset(preset), key, weights
        self.__name__ = key

    def __call__(self, prompts: list | None = None, completions: list | None = None, label: list | None = None,
                 strength: list | None = None, **kwargs: Any) -> list[float]:
        completions = completions or []
        strength = strength if strength is not None else [None] * len(completions)
        return [float(self.preset(completion_text(c), {"label": g, "strength": s}, **self.weights)[self.key])
                for c, g, s in zip(completions, label or [], strength)]


class RecordingReward(TRLReward):
    """The preset's total reward for TRL, keeping the last batch's samples for ``last_samples.jsonl``."""

    def __init__(self, preset: str = "thinkj_qwen", **weights: Any):
        super().__init__(preset, **weights)
        self.last_samples: list[dict[str, Any]] = []

    def __call__(self, prompts: list | None = None, completions: list | None = None, label: list | None = None,
                 strength: list | None = None, **kwargs: Any) -> list[float]:
        scores = super().__call__(prompts=prompts, completions=completions, label=label, strength=strength, **kwargs)
        strength = strength if strength is not None else [None] * len(scores)
        self.last_samples = [{"completion": completion_text(c), "label": g, "strength": s, "score": x}
                             for c, g, s, x in zip(completions or [], label, strength, scores)]
        return scores


@dataclass
class GRPORun:
    """One TRL GRPO run. Defaults are for the tiny CPU model; pass the paper's values on a GPU."""

    model: str
    data: str
    out_dir: str
    preset: str = "thinkj_qwen"
    weights: dict[str, float] = field(default_factory=dict)  # overrides of the preset's w_acc / w_fmt / w_str
    template: str = "judge_strength_v2"
    steps: int = 4
    learning_rate: float = 1e-6  # Table 11, GRPO actor lr
    beta: float = 0.001  # KL coefficient (Table 11: kl_loss_coef 0.001)
    num_generations: int = 4  # the paper's group is 8 (Table 11); 4 keeps CPU runs small
    prompts_per_step: int = 2
    max_prompt_length: int = 1024  # Table 11
    max_completion_length: int = 64  # Table 11 uses 3072; the tiny model only needs a short tail
    temperature: float = 1.0
    seed: int = 0
    device: str = "auto"  # auto | cpu | gpu
    save_steps: int = 50
    max_rows: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # further GRPOConfig fields, applied last


def _use_cpu(device: str) -> bool:
    import torch

    if device == "gpu" and not torch.cuda.is_available():
        raise RuntimeError("--device gpu was asked for but torch sees no CUDA device")
    return device == "cpu" or not torch.cuda.is_available()


def run_trl_grpo(run: GRPORun, force: bool = False) -> dict[str, Any]:
    """Train, save the policy to ``out_dir/model``, plot ``out_dir/curves.png``; returns a summary dict.

    A finished run with the same settings (marker file) is not redone unless ``force``; an interrupted one
    resumes from its last checkpoint under ``out_dir/checkpoints``.
    """
    out = Path(run.out_dir)
    marker, settings_file = out / DONE_MARKER, out / "run_settings.json"
    settings = json.loads(json.dumps(asdict(run), default=str))
    if marker.exists() and not force and json.loads(marker.read_text()).get("run") == settings:
        return json.loads(marker.read_text())
    previous = json.loads(settings_file.read_text()) if settings_file.exists() else None
    if force or previous != settings:
        # new settings (model, data, steps, ...) or --force: never resume another run's checkpoints
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        marker.unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(json.dumps(settings, indent=1))

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thinkj.online.trl_compat import fix_trl_availability_flags

    fix_trl_availability_flags()
    from trl import GRPOConfig, GRPOTrainer

    rows, skipped = load_rl_rows(run.data, run.template)
    if run.max_rows:
        rows = rows[: run.max_rows]
    if not rows:
        raise RecordError(f"no usable rows (ties skipped: {skipped['tie']})", path=run.data)
    get_preset(run.preset)(" ", {"label": "a", "strength": None}, **run.weights)  # unknown weight names fail here

    cpu = _use_cpu(run.device)
    ckpt_dir = out / "checkpoints"
    settings = dict(
        output_dir=str(ckpt_dir), max_steps=run.steps, learning_rate=run.learning_rate, beta=run.beta,
        num_generations=run.num_generations, per_device_train_batch_size=run.num_generations * run.prompts_per_step,
        gradient_accumulation_steps=1, max_prompt_length=run.max_prompt_length,
        max_completion_length=run.max_completion_length, temperature=run.temperature, seed=run.seed,
        use_cpu=cpu, bf16=not cpu, fp16=False, use_vllm=False, logging_steps=1, report_to="none",
        save_strategy="steps", save_steps=run.save_steps, save_total_limit=2,
        # [total, acc, format]: only the preset's score drives the advantage; the two terms are logged
        reward_weights=[1.0, 0.0, 0.0], dataloader_num_workers=0, disable_tqdm=False,
        # SFT checkpoints from LlamaFactory are saved with use_cache=false; without the KV cache every sampled
        # token recomputes the whole prompt (measured: 18 s instead of ~2 s per step on the tiny model).
        generation_kwargs={"use_cache": True},
    )
    config = GRPOConfig(**{**settings, **run.extra})  # extra GRPOConfig fields from the command line win
    from thinkj.models import resolve_model

    model_path = resolve_model(run.model)  # a catalog name (smollm2) is its converted folder
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    total = RecordingReward(run.preset, **run.weights)
    reward_funcs = [total, RewardComponent(run.preset, "acc", **run.weights),
                    RewardComponent(run.preset, "format", **run.weights)]
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype="float32" if cpu else "bfloat16")
    if not hasattr(model, "warnings_issued"):
        model.warnings_issued = {}  # TRL 0.24 writes to this dict, which transformers 5 models no longer carry
    trainer = GRPOTrainer(model=model, reward_funcs=reward_funcs, args=config,
                          train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    resume = any(ckpt_dir.glob("checkpoint-*")) if ckpt_dir.exists() else False
    trainer.train(resume_from_checkpoint=True if resume else None)

    model_dir = out / "model"
    trainer.save_model(str(model_dir))
    tokenizer.save_pretrained(str(model_dir))
    write_jsonl(out / "last_samples.jsonl", total.last_samples)  # what the judge wrote in the last step, and its reward
    log_path = out / "trainer_state.json"
    trainer.state.save_to_json(str(log_path))

    from thinkj.online.curves import load_metrics, plot_curves

    curves = plot_curves(load_metrics(log_path), out / "curves.png", title=f"TRL GRPO ({run.preset})")
    history = [h for h in trainer.state.log_history if "reward" in h]
    summary = {
        "engine": "trl", "algo": "grpo", "model_dir": str(model_dir), "curves": str(curves), "log": str(log_path),
        "samples": str(out / "last_samples.jsonl"),
        "rows": len(rows), "skipped_tie": skipped["tie"], "steps": trainer.state.global_step, "device": "cpu" if cpu else "gpu",
        "first_reward": history[0]["reward"] if history else None, "last_reward": history[-1]["reward"] if history else None,
        "run": asdict(run),
    }
    marker.write_text(json.dumps(summary, indent=1, default=str))
    return summary
