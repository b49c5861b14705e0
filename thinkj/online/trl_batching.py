"""How a TRL GRPO step is laid out on the device: micro-batches, gradient checkpointing, and the rollout engine.

A step generates ``prompts_per_step x num_generations`` rollouts (x 2 with both orders). One optimizer update per
step is the algorithm; how many of those rollouts go through one forward and backward is memory, not maths. TRL
0.24 computes the advantages over the whole generation batch, then splits it into ``steps_per_generation``
micro-batches of ``per_device_train_batch_size`` rows and accumulates their gradients; its default loss ("dapo")
divides every micro-batch's token sum by the generation batch's token count (``num_items_in_batch``), and the
trainer sets ``compute_loss_func`` so that transformers' Trainer does not divide by the accumulation steps again:
the accumulated gradient is the one-batch gradient (``trl/trainer/grpo_trainer.py``, ``_compute_loss``; checked in
tests/test_trl_batching.py).

- **micro-batch** (``GRPORun.micro_batch``; 0 = automatic): on a CPU every rollout of a step in one pass (the
  runs of experiments/LOG.md); on a GPU at most :data:`GPU_MICRO_BATCH` rollouts a pass -- a 1.2 B model with
  all 64 rollouts of 512 tokens in one pass ran out of memory on a 141 GB H200 (131 GiB allocated;
  scripts/speed/rl_step.py). It must divide the step's rollouts.
- **gradient checkpointing** (GRPOConfig's ``gradient_checkpointing``, settable as a TRL override): GRPOConfig's
  default, on, on both devices -- what every run so far used except the demo recipe's (which turns it off). TRL
  switches it off while it generates (``unwrap_model_for_generation``), so rollouts keep their KV cache.
- **rollouts** (GRPOConfig's ``use_vllm``, settable as a TRL override; unset: automatic): vLLM colocated in the
  training process (``use_vllm=True, vllm_mode="colocate"``) on a GPU where TRL's vLLM integration is on (see
  :mod:`thinkj.online.trl_compat`: TRL 0.24 needs vLLM 0.10.2's API) and ``import vllm`` works; transformers'
  ``generate`` otherwise, and always with ``--twins`` (the twin sampler lays out the generation batch) and on a
  CPU. The choice and its reason are printed and kept in the run's summary. TRL's vLLM path also applies its
  truncated importance-sampling correction (``vllm_importance_sampling_correction``, on by default): vLLM's
  sampling probabilities differ from the trainer's by kernels and precision.

Of TRL's losses, "dapo" (the default), "grpo" and "dr_grpo" give the one-batch gradient when accumulated over
equal micro-batches; "bnpo" divides each micro-batch by its own token count and does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thinkj.errors import ThinkJError

GPU_MICRO_BATCH = 8  # assumption: 8 rollouts of up to ~4 k tokens a pass fit a 1-2 B policy on one 80 GB GPU


@dataclass(frozen=True)
class StepLayout:
    rollouts: int  # per optimizer step (= TRL's generation batch)
    micro_batch: int  # rows per forward and backward (per_device_train_batch_size)
    accumulation: int  # micro-batches per optimizer step (gradient_accumulation_steps = steps_per_generation)
    gradient_checkpointing: bool
    rollout: str  # "hf" | "vllm"
    rollout_why: str

    def grpo_config_fields(self) -> dict[str, Any]:
        """What :class:`trl.GRPOConfig` gets for this layout (TRL then sets steps_per_generation = accumulation)."""
        fields: dict[str, Any] = {"per_device_train_batch_size": self.micro_batch,
                                  "gradient_accumulation_steps": self.accumulation,
                                  "gradient_checkpointing": self.gradient_checkpointing,
                                  "use_vllm": self.rollout == "vllm"}
        if self.rollout == "vllm":
            fields["vllm_mode"] = "colocate"
        return fields

    def describe(self) -> str:
        return (f"TRL step: {self.rollouts} rollouts in {self.accumulation} micro-batch(es) of {self.micro_batch}; "
                f"gradient checkpointing {'on' if self.gradient_checkpointing else 'off'}; rollouts by "
                f"{'vLLM (colocated)' if self.rollout == 'vllm' else 'transformers generate'}: {self.rollout_why}")


def micro_batch_size(asked: int, rollouts: int, cpu: bool, where: str = "micro_batch") -> int:
    """The rows of one forward and backward: ``asked`` (checked: it divides the step's ``rollouts``), or with 0 all
    of them on a CPU and the largest divisor of ``rollouts`` up to :data:`GPU_MICRO_BATCH` on a GPU."""
    if isinstance(asked, bool) or not isinstance(asked, int) or asked < 0:
        raise ThinkJError(f"{where}={asked!r}: must be a whole number >= 0 (0: automatic)")
    if asked == 0:
        return rollouts if cpu else max(d for d in range(1, min(rollouts, GPU_MICRO_BATCH) + 1) if rollouts % d == 0)
    if asked > rollouts or rollouts % asked:
        raise ThinkJError(f"{where}={asked}: must divide the {rollouts} rollouts of a step (prompts per step x "
                          "generations, x 2 with both orders), so that every step is one whole optimizer update")
    return asked


def vllm_problem() -> str | None:
    """None when TRL can roll out with vLLM here, else why not (one line)."""
    from thinkj.online.trl_compat import fix_trl_availability_flags

    fix_trl_availability_flags()
    import trl.import_utils as flags

    if not flags._vllm_available:  # trl_compat switches it off for a vLLM without the 0.10.2 API TRL 0.24 imports
        version = flags._vllm_version if isinstance(flags._vllm_version, str) else None
        return ("vLLM is not installed" if version in (None, "N/A") else
                f"TRL 0.24's vLLM integration needs vLLM 0.10.2's API (installed: vLLM {version})")
    try:
        import vllm  # noqa: F401
    except Exception as exc:  # noqa: BLE001 -- any failure to import means "use transformers", said with its reason
        return f"vLLM does not import ({type(exc).__name__}: {' '.join(str(exc).split())[:160]})"
    return None


def rollout_engine(cpu: bool, twins: bool, extra: dict[str, Any]) -> tuple[str, str]:
    """("hf" | "vllm", why): ``use_vllm`` among the GRPOConfig overrides decides (checked), else a GPU with a usable
    vLLM and no twins means vLLM."""
    if "use_vllm" in extra:
        if not isinstance(extra["use_vllm"], bool):
            raise ThinkJError(f"TRL override use_vllm={extra['use_vllm']!r}: true or false")
        if not extra["use_vllm"]:
            return "hf", "use_vllm=false given"
        if twins:  # _grpo_config refuses this first; kept so the rule holds wherever a layout is made
            raise ThinkJError("TRL override use_vllm: with --twins the twin sampler lays out each generation batch "
                              "and generation runs with transformers")
        if cpu:
            raise ThinkJError("TRL override use_vllm=true: vLLM colocated with training needs a GPU (--device gpu)")
        problem = vllm_problem()
        if problem:
            raise ThinkJError(f"TRL override use_vllm=true: {problem}")
        return "vllm", "use_vllm=true given"
    if twins:
        return "hf", "both orders in one step (--twins) are laid out by the twin sampler"
    if cpu:
        return "hf", "on a CPU"
    problem = vllm_problem()
    return ("hf", problem) if problem else ("vllm", "a GPU, and TRL's vLLM integration imports")


def step_layout(*, rollouts: int, micro_batch: int, cpu: bool, twins: bool, extra: dict[str, Any]) -> StepLayout:
    """The layout of one step, each setting checked. GRPOConfig overrides of the batch fields are refused (they would
    undo one update per step); ``gradient_checkpointing`` and ``use_vllm`` overrides win over the defaults."""
    clash = [k for k in ("per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
                         "generation_batch_size") if k in extra]
    if clash:
        raise ThinkJError(f"TRL override {clash[0]}: a step's rollouts come from --prompts-per-step and "
                          "--num-generations, and how many go through one pass from --micro-batch")
    micro = micro_batch_size(micro_batch, rollouts, cpu)
    checkpointing = extra.get("gradient_checkpointing", True)  # GRPOConfig's default, what runs used
    if not isinstance(checkpointing, bool):
        raise ThinkJError(f"TRL override gradient_checkpointing={checkpointing!r}: true or false")
    engine, why = rollout_engine(cpu, twins, extra)
    return StepLayout(rollouts, micro, rollouts // micro, checkpointing, engine, why)
