"""Run one LlamaFactory stage: in-process on CPU, or with torchrun + DeepSpeed on GPUs (thinkj.train.lf_launcher).

    run_stage("sft", "judge_sft", profile="tiny", overrides=["dataset_dir=..."], run_dir="runs/x")

The stage's outputs (model, logs, the merged config ``train_config.yaml`` and ``thinkj_train.json``) go to
``<run_dir>/<name>/``, where ``name`` defaults to the stage YAML's file name. A finished output directory
is not trained again (pass ``force=True``); an interrupted one resumes from its last checkpoint
(LlamaFactory does that by itself when ``output_dir`` holds ``checkpoint-*`` folders).

Multi-node runs read the usual torchrun variables: ``NNODES``, ``NODE_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``, ``NPROC_PER_NODE`` (default: the GPUs visible on this node).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from thinkj.records import write_json
from thinkj.train.config import ConfigError, build_config, for_cpu, global_batch, save_config, set_global_batch
from thinkj.train.untie import has_tied_embeddings, untied_copy

STAGE_KINDS = ("sft", "dpo", "rm")
DONE_FILE = "thinkj_train.json"
CONFIG_FILE = "train_config.yaml"
# Distributed settings read from the environment (same names as llamafactory-cli's torchrun launcher).
DIST_ENV = ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE")


@dataclass
class LaunchPlan:
    kind: str
    config: dict[str, Any]
    output_dir: Path
    device: str  # "cpu" | "gpu"
    world_size: int
    command: list[str] | None  # None: run in-process
    env: dict[str, str]

    def shell(self) -> str:
        """The command as one copy-pasteable line (environment first)."""
        if self.command is None:
            return f"(in-process) llamafactory.train.tuner.run_exp({self.output_dir / CONFIG_FILE})"
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{env} {shlex.join(self.command)}".strip()


def detect_device() -> str:
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


def _gpus_per_node() -> int:
    if os.environ.get("NPROC_PER_NODE"):
        return int(os.environ["NPROC_PER_NODE"])
    import torch

    return max(torch.cuda.device_count(), 1)


def plan_stage(kind: str, stage_config: str | os.PathLike, *, profile: str | None = None,
               overrides: Iterable[str] | dict[str, Any] = (), run_dir: str | os.PathLike = "runs/default",
               name: str | None = None, device: str | None = None, global_batch_size: int | None = None,
               cpu_bf16: bool = False) -> LaunchPlan:
    """Merge and check the config, pick the output directory and the way to launch; runs nothing.

    On CPU the run is fp32 unless ``cpu_bf16`` asks for bf16 autocast and the CPU has native bf16 (``for_cpu``).
    """
    if kind not in STAGE_KINDS:
        raise ConfigError(f"unknown stage kind {kind!r}; one of {', '.join(STAGE_KINDS)}")
    config = build_config(stage_config, profile, overrides)
    if config.get("stage", kind) != kind:
        raise ConfigError(f"{stage_config}: stage is {config['stage']!r} but the command was `thinkj train {kind}`")
    config["stage"] = kind
    config.setdefault("do_train", True)
    stage_name = name or Path(str(stage_config)).stem
    output_dir = Path(run_dir) / stage_name
    config["output_dir"] = str(output_dir.resolve())
    device = device or detect_device()
    if device == "cpu":
        config = for_cpu(config, bf16=cpu_bf16)
        world_size = 1
    else:
        world_size = int(os.environ.get("NNODES", "1")) * _gpus_per_node()
    if global_batch_size is not None:
        config = set_global_batch(config, global_batch_size, world_size)
    if device == "cpu":
        return LaunchPlan(kind, config, output_dir, device, world_size, None, {})
    env = {k: os.environ[k] for k in DIST_ENV if k in os.environ}
    env.setdefault("NPROC_PER_NODE", str(_gpus_per_node()))
    # torchrun on our wrapper rather than `llamafactory-cli train`: the wrapper applies the TRL import fix in every
    # worker (thinkj/train/lf_launcher.py), then calls LlamaFactory's run_exp exactly as llamafactory-cli does.
    command = [_torchrun(), "--nnodes", env.get("NNODES", "1"), "--node_rank", env.get("NODE_RANK", "0"),
               "--nproc_per_node", env["NPROC_PER_NODE"], "--master_addr", env.get("MASTER_ADDR", "127.0.0.1"),
               "--master_port", env.get("MASTER_PORT", "29500"), "-m", "thinkj.train.lf_launcher",
               str((output_dir / CONFIG_FILE).resolve())]
    return LaunchPlan(kind, config, output_dir, device, world_size, command, env)


def _torchrun() -> str:
    """The ``torchrun`` of this interpreter's environment (a bare name if it is not installed beside it)."""
    beside = Path(sys.executable).parent / "torchrun"
    return str(beside) if beside.exists() else "torchrun"


def is_finished(output_dir: str | os.PathLike) -> bool:
    return (Path(output_dir) / DONE_FILE).exists()


HASHED_INPUT_BYTES = 16 << 20  # input files up to this size are fingerprinted by content, larger ones by size + mtime


def _fingerprint(path: Path) -> list[Any]:
    """Content hash for small files (datasets, configs: a stage that rewrites the same data keeps the cache), size and
    mtime for large ones (weights: hashing 0.5-16 GB on every call costs more than it saves)."""
    import hashlib

    stat = path.stat()
    if stat.st_size <= HASHED_INPUT_BYTES:
        return [path.name, stat.st_size, hashlib.sha256(path.read_bytes()).hexdigest()]
    return [path.name, stat.st_size, stat.st_mtime_ns]


def _normalised(config: dict[str, Any]) -> Any:
    """The config as it reads back from YAML, plus a fingerprint of the files in its local model and dataset folders:
    a finished run is reused only if neither its settings nor its inputs (a retrained model at the same path)
    changed."""
    inputs = {}
    for key in ("model_name_or_path", "dataset_dir"):
        folder = Path(str(config.get(key, "")))
        if config.get(key) and folder.is_dir():
            inputs[key] = sorted(_fingerprint(p) for p in folder.iterdir() if p.is_file())
    return yaml.safe_load(yaml.safe_dump({"config": config, "inputs": inputs}, sort_keys=True))


def finished_with(output_dir: str | os.PathLike, config: dict[str, Any]) -> bool:
    """Finished, and trained with exactly ``config`` (a run with other settings is stale, not a cache hit)."""
    if not is_finished(output_dir):
        return False
    record = json.loads((Path(output_dir) / DONE_FILE).read_text())
    return record.get("planned") == _normalised(config)


def run_plan(plan: LaunchPlan, *, force: bool = False, dry_run: bool = False) -> Path:
    """Write the merged config, then train (in-process on CPU, torchrun on GPU). Returns output_dir."""
    out = plan.output_dir
    if not force and finished_with(out, plan.config):
        print(f"[thinkj train] {out} is finished with this config ({DONE_FILE}); pass --force to train again",
              file=sys.stderr)
        return out
    if not force and is_finished(out):
        print(f"[thinkj train] {out} finished with another config: training again", file=sys.stderr)
        force = True
    config = dict(plan.config)
    if force:
        config["overwrite_output_dir"] = True
        (out / DONE_FILE).unlink(missing_ok=True)
    save_config(config, out / CONFIG_FILE)
    print(f"[thinkj train] {plan.kind} on {plan.device}: global batch = per_device_train_batch_size "
          f"{config.get('per_device_train_batch_size', 8)} x gradient_accumulation_steps "
          f"{config.get('gradient_accumulation_steps', 1)} x {plan.world_size} GPU(s) = "
          f"{global_batch(config, plan.world_size)}", file=sys.stderr)
    print(f"[thinkj train] {plan.shell()}", file=sys.stderr)
    if dry_run:
        return out
    if plan.kind == "rm" and has_tied_embeddings(config["model_name_or_path"]):
        config["model_name_or_path"] = str(untied_copy(config["model_name_or_path"], out / "untied_base"))
        save_config(config, out / CONFIG_FILE)
        print(f"[thinkj train] tied embeddings untied for the rm stage: {config['model_name_or_path']}", file=sys.stderr)
    # fingerprint the inputs now: files changed while training must not be recorded as what it trained on
    planned = _normalised(plan.config)
    start = time.monotonic()
    if plan.command is None:
        from thinkj.online.trl_compat import fix_trl_availability_flags

        fix_trl_availability_flags()  # LlamaFactory's dpo stage imports TRL's DPOTrainer (see lf_launcher)
        from llamafactory.train.tuner import run_exp

        run_exp(config)
    else:
        result = subprocess.run(plan.command, env={**os.environ, **plan.env})
        if result.returncode != 0:
            raise RuntimeError(f"`{plan.shell()}` failed with exit code {result.returncode}")
    write_json(out / DONE_FILE, {
        "kind": plan.kind, "device": plan.device, "world_size": plan.world_size,
        "seconds": round(time.monotonic() - start, 2), "command": plan.shell(),
        "global_batch": global_batch(config, plan.world_size), "planned": planned})
    return out


def run_stage(kind: str, stage_config: str | os.PathLike, *, profile: str | None = None,
              overrides: Iterable[str] | dict[str, Any] = (), run_dir: str | os.PathLike = "runs/default",
              name: str | None = None, device: str | None = None, global_batch_size: int | None = None,
              force: bool = False, dry_run: bool = False, cpu_bf16: bool = False) -> Path:
    """Plan and run one stage; returns its output directory (the trained model lives there)."""
    plan = plan_stage(kind, stage_config, profile=profile, overrides=overrides, run_dir=run_dir, name=name,
                      device=device, global_batch_size=global_batch_size, cpu_bf16=cpu_bf16)
    return run_plan(plan, force=force, dry_run=dry_run)
