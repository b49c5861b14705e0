"""Cost of one GRPO step of the demo judge on CPU, TRL and verl, with today's ("before") and the faster ("after")
settings: s/step, rollouts/s and where one step's time goes.

    python scripts/speed/rl_step.py                                 # SmolLM2-135M-Instruct, both engines, 3 steps
    python scripts/speed/rl_step.py --engines trl --steps 4 --generations 4 --prompts 2
    python scripts/speed/rl_step.py --model tiny --steps 2          # the 0.4 M-parameter model: a quick check
    # one GPU: a random 1.2 B model of SmolLM2's architecture, 8 prompts x 8 rollouts x 512 tokens; every
    # rollout in one pass and transformers generate (gpu_before: ran out of memory on an H200) vs GRPORun's GPU
    # layout with transformers generate (gpu_hf) and with vLLM where TRL can use it (gpu_after, gpu_no_ckpt: each in
    # a process of its own, as a colocated vLLM engine keeps its GPU memory while the process lives). A setting that
    # runs out of GPU memory is a row with its error; the others still run.
    for s in gpu_hf,gpu_before gpu_after gpu_no_ckpt; do
      python scripts/speed/rl_step.py --engines trl --device gpu --settings $s \
        --model random-1.2b --tokenizer SMOLLM2_DIR --keep runs/rl_step_gpu --json runs/rl_step_gpu/${s%%,*}.json \
        --prompts 8 --generations 8 --max-completion 512 --steps 3; done

A benchmark, not a test: it trains on ``--prompts`` x ``--generations`` rollouts of the demo's facts pairs (judge
template ``judge_strength_v2``, Think-J reward ``thinkj_qwen``, beta 0.001, the demo's 96-token completions) from a
fresh folder per run. The first step is reported apart (warm-up: allocator, oneDNN kernels, vLLM's graph); the table
averages the others. Breakdown of a step:

* TRL: wall-clock timers around ``GRPOTrainer``'s own methods -- generation (``_generate_single_turn``), reward
  (``_calculate_rewards``), reference log-probs (the no-grad ``_get_per_token_logps_and_entropies`` call on the
  reference model), update (``training_step`` minus input preparation, plus the optimizer step: forward, backward,
  AdamW); overhead is the rest of the step (tokenising, padding, advantages, logging).
* verl: its own ``timing_s/*`` metrics from the file logger -- ``gen``, ``reward``, ``ref``, ``old_log_prob``,
  ``update_actor``, ``update_weights`` (actor -> vLLM); overhead is ``timing_s/step`` minus those.

``--settings`` picks from ``before``, ``after`` and the single changes between them (TRL: ``prefix``,
``bf16_rollout``, ``fused_adamw``; verl: ``bf16``, ``fit``), defined in TRL_SETTINGS and VERL_SETTINGS below.
Results of 2026-11-26: experiments/LOG.md, "RL step cost on CPU". Run it under the heavy-job lock on an otherwise
idle machine; timings of concurrent jobs mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PARTS = ("gen", "update", "reward", "ref", "old_logp", "sync", "overhead")


# ------------------------------------------------------------------------------------------------------------- data
def write_data(folder: Path, rows: int) -> dict[str, Path]:
    """The demo's facts pairs as a PreferencePair JSONL (TRL) and a verl parquet (verl), ties left out."""
    from thinkj.export.verl import write_verl_parquet
    from thinkj.records import write_jsonl
    from thinkj.synthetic import fact_task

    pairs = [p for p in fact_task.make_pairs(rows, seed=0) if p.label != "tie"]
    folder.mkdir(parents=True, exist_ok=True)
    write_jsonl(folder / "pairs.jsonl", [p.to_dict() for p in pairs])
    write_verl_parquet(folder / "train.parquet", pairs)
    return {"jsonl": folder / "pairs.jsonl", "parquet": folder / "train.parquet"}


# SmolLM2-1.7B's layer shape (hidden 2048, 32 heads, MLP 8192; its config on the hub) with 16 instead of 24 layers:
# 1.07 B in the layers + 0.10 B tied embeddings = 1.17 B parameters, the size whose one-pass step ran out of memory on an H200
RANDOM_1_2B = {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
               "num_key_value_heads": 32, "head_dim": 64}


def random_smollm2(out: Path, tokenizer: str) -> Path:
    """A randomly initialised ~1.2 B model of SmolLM2's architecture (config and tokenizer from the SmolLM2 folder
    ``tokenizer``), written once to ``out``: costs of a step, not a judge (it samples to the length limit)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    if (out / "model.safetensors").exists():
        return out
    config = AutoConfig.from_pretrained(tokenizer)
    for key, value in RANDOM_1_2B.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    print(f"# random SmolLM2-architecture model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B "
          "parameters", flush=True)
    model.save_pretrained(str(out))
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(str(out))
    model.generation_config.save_pretrained(str(out))
    return out


def model_path(name: str, folder: Path, tokenizer: str = "smollm2") -> str:
    from thinkj.models import resolve_model

    if name == "random-1.2b":
        return str(random_smollm2(folder / "random_1.2b", str(resolve_model(tokenizer))))
    if name != "tiny":
        return str(resolve_model(name))
    from thinkj.models.tiny import build_tiny_model

    out = folder / "tiny_model"
    if not out.exists():
        build_tiny_model(out)
    return str(out)


# -------------------------------------------------------------------------------------------------------------- TRL
class _Clock:
    """Seconds per part in the current step, filled by wrappers around GRPOTrainer's methods."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}
        self.steps: list[dict[str, float]] = []
        self.step_start = 0.0
        self.active: set[str] = set()

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds


def _timed(clock: _Clock, method: Any, part: Any) -> Any:
    """``method`` timed into ``part`` (a name, or a function of the call naming it); a call inside a timed call of
    the same part (a subclass's override calling TRL's own) is counted once."""
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = part(self, args) if callable(part) else part
        if not name or name in clock.active:
            return method(self, *args, **kwargs)
        clock.active.add(name)
        start = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            clock.active.discard(name)
            clock.add(name, time.perf_counter() - start)
    wrapper.__wrapped__ = method
    return wrapper


@contextlib.contextmanager
def trl_clock() -> Any:
    """Wrap GRPOTrainer's generation, reward, log-prob and training-step methods with timers for one run."""
    import torch
    from transformers import TrainerCallback

    from thinkj.online import trl_speed
    from thinkj.online.trl_compat import fix_trl_availability_flags

    fix_trl_availability_flags()
    from trl import GRPOTrainer

    clock = _Clock()

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            clock.parts, clock.step_start = {}, time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            clock.steps.append({**clock.parts, "step": time.perf_counter() - clock.step_start})

    def logp_part(trainer: Any, args: tuple) -> str | None:
        if torch.is_grad_enabled():
            return None  # the loss's own forward: inside training_step, counted as update
        return "ref" if args and args[0] is getattr(trainer, "ref_model", None) else "old_logp"

    saved = {name: getattr(GRPOTrainer, name) for name in
             ("__init__", "_generate_single_turn", "_calculate_rewards", "_get_per_token_logps_and_entropies",
              "_prepare_inputs", "training_step")}

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        saved["__init__"](self, *args, **kwargs)
        self.add_callback(StepTimer())

    GRPOTrainer.__init__ = init
    # the CPU speed subclass overrides two of the methods: time its versions too
    saved_fast = trl_speed.fast_rollout_trainer

    def fast_rollout_trainer(base: Any, **kwargs: Any) -> Any:
        cls = saved_fast(base, **kwargs)
        if cls is not base:
            cls._generate_single_turn = _timed(clock, cls._generate_single_turn, "gen")
            cls._get_per_token_logps_and_entropies = _timed(clock, cls._get_per_token_logps_and_entropies, logp_part)
        return cls

    trl_speed.fast_rollout_trainer = fast_rollout_trainer
    GRPOTrainer._generate_single_turn = _timed(clock, saved["_generate_single_turn"], "gen")
    GRPOTrainer._calculate_rewards = _timed(clock, saved["_calculate_rewards"], "reward")
    GRPOTrainer._get_per_token_logps_and_entropies = _timed(clock, saved["_get_per_token_logps_and_entropies"],
                                                            logp_part)
    GRPOTrainer._prepare_inputs = _timed(clock, saved["_prepare_inputs"], "prepare")
    GRPOTrainer.training_step = _timed(clock, saved["training_step"], "training_step")
    try:
        yield clock
    finally:
        for name, method in saved.items():
            setattr(GRPOTrainer, name, method)
        trl_speed.fast_rollout_trainer = saved_fast


def trl_breakdown(raw: dict[str, float]) -> dict[str, float]:
    """Seconds per part of one TRL step from the timers' raw sums."""
    step = raw["step"]
    prepare = raw.get("prepare", 0.0)
    parts = {"gen": raw.get("gen", 0.0), "reward": raw.get("reward", 0.0), "ref": raw.get("ref", 0.0),
             "old_logp": raw.get("old_logp", 0.0), "sync": 0.0}
    parts["update"] = step - prepare  # forward + backward of the loss, the optimizer step
    parts["overhead"] = step - sum(parts.values())
    return {"step": step, **parts}


def run_trl(setting: str, model: str, data: Path, out: Path,
            args: argparse.Namespace) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """Per-step breakdowns, and the step layout the run used (micro-batches, checkpointing, rollout engine)."""
    from thinkj.online.trl_grpo import GRPORun, run_trl_grpo

    setting_fields = dict(TRL_SETTINGS[setting])
    extra = setting_fields.pop("extra")
    if setting_fields.get("micro_batch") == "all":  # every rollout of a step in one pass (what ran out of memory)
        setting_fields["micro_batch"] = args.generations * args.prompts
    setting_fields.setdefault("micro_batch", args.micro_batch)
    with trl_clock() as clock:
        summary = run_trl_grpo(GRPORun(
            model=model, data=str(data), out_dir=str(out), preset="thinkj_qwen", template="judge_strength_v2",
            steps=args.steps, learning_rate=5e-6, beta=0.001, num_generations=args.generations,
            prompts_per_step=args.prompts, max_completion_length=args.max_completion, save_steps=10_000,
            seed=0, device=args.device, extra=extra, **setting_fields), force=True)
    state = json.loads((out / "trainer_state.json").read_text())
    lengths = [h["completions/mean_length"] for h in state["log_history"] if "completions/mean_length" in h]
    return [{**trl_breakdown(s), "completion_tokens": n} for s, n in zip(clock.steps, lengths)], summary["layout"]


# The demo's online stage (configs/recipes/smollm2-cpu.yaml: RL_ENGINE=trl, cpu_bf16, gradient_checkpointing=false in
# trl_overrides): bf16 autocast for the loss where the CPU has native bf16, no gradient checkpointing. "before" is
# that with TRL's own rollouts; the middle settings add one change each; "after" is GRPORun's defaults.
DEMO_EXTRA = {"gradient_checkpointing": False, "bf16": True}
TRL_SETTINGS: dict[str, dict[str, Any]] = {
    "before": {"shared_prefix": False, "rollout_bf16": False, "extra": DEMO_EXTRA},
    "prefix": {"shared_prefix": True, "rollout_bf16": False, "extra": DEMO_EXTRA},
    "bf16_rollout": {"shared_prefix": False, "rollout_bf16": True, "extra": DEMO_EXTRA},
    # one GPU: all rollouts in one pass and transformers generate (what TRL ran before; GRPOConfig's
    # gradient checkpointing, on); GRPORun's GPU layout (micro-batches of up to 8) with transformers generate; its
    # defaults, which add vLLM colocated rollouts where TRL can use vLLM (thinkj/online/trl_batching.py); and those
    # without gradient checkpointing (faster where the micro-batches fit without it)
    "gpu_before": {"micro_batch": "all", "extra": {"use_vllm": False}},
    "gpu_hf": {"extra": {"use_vllm": False}},
    "gpu_after": {"extra": {}},
    "gpu_no_ckpt": {"extra": {"gradient_checkpointing": False}},
    "fused_adamw": {"shared_prefix": False, "rollout_bf16": False,
                    "extra": {**DEMO_EXTRA, "optim": "adamw_torch_fused"}},
    "after": {"extra": DEMO_EXTRA},
}


# ------------------------------------------------------------------------------------------------------------- verl
# verl's timers (ray_trainer.py's marked_timer names) -> the table's parts
VERL_PARTS = {"gen": "gen", "update": "update_actor", "reward": "reward", "ref": "ref", "old_logp": "old_log_prob",
              "sync": "update_weights"}
# "before": the CPU settings of thinkj/online/verl_cpu.py (fp32 rollout, actor and reference); "after" adds its
# opt-in BF16_OVERRIDES
# opt-in BF16_OVERRIDES, and data.max_prompt_length fitted to the data ("FIT"): verl pads every prompt to that length
# and, without remove-padding (a FlashAttention path, CUDA only), runs the padding through the actor and reference
VERL_SETTINGS: dict[str, list[str]] = {"before": [], "bf16": ["BF16"], "fit": ["FIT"], "after": ["BF16", "FIT"]}


def verl_breakdown(row: dict[str, Any]) -> dict[str, float]:
    timing = {k.removeprefix("timing_s/"): float(v) for k, v in row.items() if k.startswith("timing_s/")}
    parts = {part: timing.get(key, 0.0) for part, key in VERL_PARTS.items()}
    parts["ref"] = parts["ref"] or timing.get("ref_log_prob", 0.0)
    step = timing["step"]
    parts["overhead"] = step - sum(parts.values())
    return {"step": step, **parts}


def run_verl(setting: str, model: str, data: Path, out: Path, args: argparse.Namespace) -> list[dict[str, float]]:
    from thinkj.export.verl import fitted_prompt_length
    from thinkj.online import verl_cpu
    from thinkj.online.verl_launch import VerlLaunch, run

    overrides = [f"trainer.total_training_steps={args.steps}", "trainer.save_freq=-1",
                 f"data.train_batch_size={args.prompts}", f"actor_rollout_ref.actor.ppo_mini_batch_size={args.prompts}",
                 f"actor_rollout_ref.rollout.n={args.generations}", f"data.max_response_length={args.max_completion}",
                 "actor_rollout_ref.actor.optim.lr=5e-6"]
    for item in VERL_SETTINGS[setting]:
        if item == "BF16":
            overrides += list(verl_cpu.BF16_OVERRIDES)
        elif item == "FIT":
            overrides.append(f"data.max_prompt_length={fitted_prompt_length(model, data)}")
        else:
            overrides.append(item)
    code = run(VerlLaunch(algo="grpo", model=model, train_files=str(data), out_dir=str(out), device="cpu",
                          overrides=overrides))
    if code != 0:
        raise SystemExit(f"verl ({setting}) exited with {code}")
    return verl_steps(out)


def verl_steps(out: Path) -> list[dict[str, float]]:
    """One breakdown per step from verl's file logger (rows ``{"step": n, "data": {metric: value}}``)."""
    rows = [json.loads(line).get("data", {}) for line in open(out / "logs" / "thinkj" / "thinkj_grpo.jsonl")]
    return [{**verl_breakdown(r), "completion_tokens": r.get("response_length/mean", 0.0)} for r in rows
            if "timing_s/step" in r]


# ------------------------------------------------------------------------------------------------------------ table
def summarise(steps: list[dict[str, float]], rollouts: int) -> dict[str, Any]:
    if not steps:
        raise SystemExit("no step was timed: the engine logged no step (see its log above)")
    timed = steps[1:] or steps  # the first step warms up
    mean = {k: statistics.fmean(s.get(k, 0.0) for s in timed) for k in ("step", *PARTS)}
    # generation time grows with the completions' length, which sampling decides: report it beside the time
    tokens = statistics.fmean(s.get("completion_tokens", 0.0) for s in timed)
    return {"first_step_s": round(steps[0]["step"], 2), "s_per_step": round(mean["step"], 2),
            "completion_tokens_mean": round(tokens, 1),
            "rollouts_per_s": round(rollouts / mean["step"], 3),
            "breakdown_s": {k: round(mean[k], 2) for k in PARTS}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="trl,verl", help="comma-separated: trl, verl")
    ap.add_argument("--settings", default="before,after", help="comma-separated: before, after")
    ap.add_argument("--model", default="smollm2", help="a catalog name, a model folder, tiny, or random-1.2b")
    ap.add_argument("--tokenizer", default="smollm2", help="random-1.2b: the SmolLM2 folder (or catalog name) whose "
                                                          "config and tokenizer it takes")
    ap.add_argument("--micro-batch", type=int, default=0, help="trl: rollouts per forward and backward where the "
                                                               "setting leaves it (0: GRPORun's default)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=("cpu", "gpu"), help="trl: where the run trains")
    ap.add_argument("--generations", type=int, default=4, help="rollouts per prompt (the group)")
    ap.add_argument("--prompts", type=int, default=2, help="prompts per step")
    ap.add_argument("--max-completion", type=int, default=96)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--keep", type=Path, help="run folders here instead of a temporary folder")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="rl_step_") as tmp:
        work = args.keep or Path(tmp)
        data = write_data(work / "data", 64)
        model = model_path(args.model, work, args.tokenizer)
        rollouts = args.generations * args.prompts
        results = []
        for engine in args.engines.split(","):
            for setting in args.settings.split(","):
                start = time.perf_counter()
                row = {"engine": engine, "setting": setting, "model": args.model, "rollouts_per_step": rollouts}
                try:
                    if engine == "trl":
                        steps, row["layout"] = run_trl(setting, model, data["jsonl"], work / f"trl_{setting}", args)
                    elif engine == "verl":
                        steps = run_verl(setting, model, data["parquet"], work / f"verl_{setting}", args)
                    else:
                        raise SystemExit(f"--engines: unknown engine {engine!r}")
                    row.update(steps=len(steps), **summarise(steps, rollouts))
                except Exception as exc:  # noqa: BLE001 -- a GPU setting that runs out of memory is a result too
                    if args.device != "gpu" or "out of memory" not in str(exc):
                        raise
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    import gc

                    import torch

                    gc.collect()
                    torch.cuda.empty_cache()
                row["run_wall_s"] = round(time.perf_counter() - start, 1)
                if args.device == "gpu":  # peak memory of this run (the GPU runs train in this process)
                    import torch

                    row["peak_gpu_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
                    torch.cuda.reset_peak_memory_stats()
                results.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{'engine':6} {'setting':8} {'s/step':>7} {'rollouts/s':>10} {'first':>6}  "
          + " ".join(f"{p:>8}" for p in PARTS))
    for r in results:
        if "error" in r:
            print(f"{r['engine']:6} {r['setting']:8} {r['error']}")
            continue
        b = r["breakdown_s"]
        print(f"{r['engine']:6} {r['setting']:8} {r['s_per_step']:7.2f} {r['rollouts_per_s']:10.3f} "
              f"{r['first_step_s']:6.1f}  " + " ".join(f"{b[p]:8.2f}" for p in PARTS))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
