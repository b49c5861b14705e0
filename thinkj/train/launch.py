"""Run one LlamaFactory stage: in-process on CPU, or with torchrun + DeepSpeed on GPUs (thinkj.train.lf_launcher).

    run_stage("sft", "judge_sft", profile="tiny", overrides=["dataset_dir=..."], run_dir="runs/x")
    run_stage("sft", "judge_sft", ..., device="cpu", processes=2)   # the GPU launch on a CPU: torchrun, gloo, ZeRO

With ``processes`` > 1 a CPU run takes the GPU node's path (torchrun on our wrapper, the config's DeepSpeed stage
on DeepSpeed's CPU accelerator, gloo between the processes), so the cluster's launch, ZeRO partitioning and the
gathered save are rehearsed here (tests/test_lf_deepspeed.py: the same weights as one process).

The stage's outputs (model, logs, the merged config ``train_config.yaml`` and ``thinkj_train.json``) go to
``<run_dir>/<name>/``, where ``name`` defaults to the stage YAML's file name. The model and the datasets are
checked before anything there changes. A finished output directory is not trained again while its config and
the content of its model and dataset files are the same (pass ``force=True``); with another config it is
replaced only when the new run has finished beside it in ``<name>.next`` (:mod:`thinkj.folder_swap`). An
interrupted run resumes from its last checkpoint (LlamaFactory does that by itself when ``output_dir`` holds
``checkpoint-*`` folders) -- only if it was started with the same config (``thinkj_train_started.json``).

Multi-node runs read torchrun's variables, the node count under its own name: ``LF_NNODES`` (default 1),
``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, ``NPROC_PER_NODE`` (default: the GPUs visible on this node).
``NNODES`` is not read: it is the pipeline's verl setting (``scripts/reproduce_*.sh``), and a judge SFT started
with it would wait for nodes that never join. ``LF_NNODES`` above 1 needs ``MASTER_ADDR`` (node 0's address).
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from thinkj.errors import StageIncomplete
from thinkj.fingerprint import file_sha256
from thinkj.folder_swap import promote, restore, staging_dir
from thinkj.locks import exclusive, output_lock
from thinkj.records import write_json
from thinkj.train.config import (
    ConfigError,
    build_config,
    for_cpu,
    global_batch,
    save_config,
    set_global_batch,
    split_batch,
)
from thinkj.train.untie import has_tied_embeddings, untied_copy

STAGE_KINDS = ("sft", "dpo", "rm")
DONE_FILE = "thinkj_train.json"
STARTED_FILE = "thinkj_train_started.json"  # what the run in this folder was started with (its checkpoints' config)
CONFIG_FILE = "train_config.yaml"
# Distributed settings read from the environment (same names as llamafactory-cli's torchrun launcher).
# The node count has a name of its own, LF_NNODES (NNODES is the pipeline's verl setting); torchrun gets it as --nnodes.
DIST_ENV = ("LF_NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT", "NPROC_PER_NODE")


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


def _lf_nodes() -> int:
    """Nodes of a LlamaFactory stage: ``LF_NNODES`` (default 1); more than one needs ``MASTER_ADDR``."""
    value = os.environ.get("LF_NNODES") or "1"
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"LF_NNODES={value!r}: must be a whole number >= 1 (nodes of a LlamaFactory stage)")
    if int(value) > 1 and not os.environ.get("MASTER_ADDR"):
        raise ConfigError(f"LF_NNODES={value}: a multi-node LlamaFactory stage needs MASTER_ADDR (node 0's address; "
                          "torchrun would wait for nodes that never join): set MASTER_ADDR and NODE_RANK on every node")
    rank = os.environ.get("NODE_RANK", "")
    if int(value) > 1 and not (rank.isdigit() and int(rank) < int(value)):
        # unset, every node would launch as node 0: two torchrun masters, and neither run starts
        raise ConfigError(f"LF_NNODES={value}: NODE_RANK={rank!r} on this node: each node needs its own number, 0 to "
                          f"{int(value) - 1} (0 on MASTER_ADDR's node)")
    return int(value)


def plan_stage(kind: str, stage_config: str | os.PathLike, *, profile: str | None = None,
               overrides: Iterable[str] | dict[str, Any] = (), run_dir: str | os.PathLike = "runs/default",
               name: str | None = None, device: str | None = None, global_batch_size: int | None = None,
               cpu_bf16: bool = False, processes: int = 1) -> LaunchPlan:
    """Merge and check the config, pick the output directory and the way to launch; runs nothing.

    On CPU the run is fp32 unless ``cpu_bf16`` asks for bf16 autocast and the CPU has native bf16 (``for_cpu``).
    ``processes`` > 1 (CPU only) launches the GPU node's way, torchrun with that many processes on gloo and the
    config's DeepSpeed stage: the cluster's launch rehearsed on this machine. On GPUs the process count is
    ``NPROC_PER_NODE`` or the visible GPUs.
    """
    if kind not in STAGE_KINDS:
        raise ConfigError(f"unknown stage kind {kind!r}; one of {', '.join(STAGE_KINDS)}")
    if not isinstance(processes, int) or processes < 1:
        raise ConfigError(f"--processes {processes!r}: must be a whole number >= 1")
    config = build_config(stage_config, profile, overrides)
    if config.get("stage", kind) != kind:
        raise ConfigError(f"{stage_config}: stage is {config['stage']!r} but the command was `thinkj train {kind}`")
    config["stage"] = kind
    config.setdefault("do_train", True)
    stage_name = name or Path(str(stage_config)).stem
    output_dir = Path(run_dir) / stage_name
    config["output_dir"] = str(output_dir.resolve())
    device = device or detect_device()
    nodes = 1
    if device == "cpu":
        config = for_cpu(config, bf16=cpu_bf16, processes=processes)
        world_size = processes
    elif processes != 1:
        raise ConfigError(f"--processes {processes}: CPU only; on GPUs a stage runs one process per visible GPU "
                          "(NPROC_PER_NODE to choose)")
    else:
        nodes = _lf_nodes()
        world_size = nodes * _gpus_per_node()
    if device == "cpu" and processes > 1 and global_batch_size is None:
        # the one-process run's global batch split over the processes: the same run, launched the GPU node's way
        # (a GPU run instead multiplies the per-GPU batch by the GPUs, Table 10's reading)
        config = split_batch(config, processes)
    if global_batch_size is not None:
        config = set_global_batch(config, global_batch_size, world_size)
    if device == "cpu" and processes == 1:
        return LaunchPlan(kind, config, output_dir, device, world_size, None, {})
    if device == "cpu":
        # one node of this machine; no GPU seen even where one is; a free port, so that two rehearsals side by side
        # do not meet in one rendezvous
        env = {"LF_NNODES": "1", "NPROC_PER_NODE": str(processes), "CUDA_VISIBLE_DEVICES": "",
               "MASTER_PORT": os.environ.get("MASTER_PORT") or str(_free_port())}
    else:
        env = {k: os.environ[k] for k in DIST_ENV if k in os.environ}
        env.setdefault("NPROC_PER_NODE", str(_gpus_per_node()))
        env["LF_NNODES"] = str(nodes)
    # torchrun on our wrapper rather than `llamafactory-cli train`: the wrapper applies the TRL import fix in every
    # worker (thinkj/train/lf_launcher.py), then calls LlamaFactory's run_exp exactly as llamafactory-cli does.
    command = [_torchrun(), "--nnodes", env["LF_NNODES"], "--node_rank", env.get("NODE_RANK", "0"),
               "--nproc_per_node", env["NPROC_PER_NODE"], "--master_addr", env.get("MASTER_ADDR", "127.0.0.1"),
               "--master_port", env.get("MASTER_PORT", "29500"), "-m", "thinkj.train.lf_launcher",
               str((output_dir / CONFIG_FILE).resolve())]
    return LaunchPlan(kind, config, output_dir, device, world_size, command, env)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _torchrun() -> str:
    """The ``torchrun`` of this interpreter's environment (a bare name if it is not installed beside it)."""
    beside = Path(sys.executable).parent / "torchrun"
    return str(beside) if beside.exists() else "torchrun"


def is_finished(output_dir: str | os.PathLike) -> bool:
    return (Path(output_dir) / DONE_FILE).exists()


def _fingerprint(path: Path) -> list[Any]:
    """A file's name and content hash (:mod:`thinkj.fingerprint`, remembered for big files): a stage that rewrites
    the same data keeps the finished run, and weights copied over with their old size and mtime do not."""
    return [path.name, path.stat().st_size, file_sha256(path)]


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


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing or damaged: proves nothing
    return document if isinstance(document, dict) else None


def finished_with(output_dir: str | os.PathLike, config: dict[str, Any], world_size: int) -> bool:
    """Finished, and trained with exactly ``config`` on ``world_size`` processes (a run with other settings is stale,
    not a cache hit: the same config on other GPUs or processes is another global batch)."""
    record = _read_json(Path(output_dir) / DONE_FILE)
    return record is not None and record.get("planned") == _normalised(config) and \
        record.get("world_size") == world_size


def check_deepspeed(config: dict[str, Any]) -> None:
    """A config naming a DeepSpeed JSON needs DeepSpeed installed and the JSON readable: said once here, not by every
    rank of a torchrun in its traceback."""
    path = config.get("deepspeed")
    if not path:
        return
    if importlib.util.find_spec("deepspeed") is None:
        raise ConfigError(f"deepspeed={path}: DeepSpeed is not installed in this environment (pip install "
                          "deepspeed==0.19.8, the pin of requirements/constraints-gpu.txt), or override deepspeed=null")
    try:
        document = json.loads(Path(str(path)).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"{path}: not a readable DeepSpeed JSON ({err})") from None
    if not isinstance(document, dict) or not isinstance(document.get("zero_optimization", {}), dict):
        raise ConfigError(f"{path}: a DeepSpeed config is a JSON object (zero_optimization an object)")


def check_inputs(config: dict[str, Any]) -> None:
    """The model and every dataset the stage names exist: checked before anything in the output folder changes."""
    from thinkj.inference.identity import check_model_source

    model = config.get("model_name_or_path")
    if not model:
        raise ConfigError("model_name_or_path is not set (pass --model PROFILE or model_name_or_path=...)")
    check_model_source(str(model), what="model_name_or_path")
    check_deepspeed(config)
    names = {key: [n.strip() for n in str(config.get(key) or "").split(",") if n.strip()]
             for key in ("dataset", "eval_dataset")}
    if config.get("do_train", True) and not names["dataset"]:
        raise ConfigError("dataset is not set (the name of an entry in dataset_dir/dataset_info.json)")
    folder = Path(str(config.get("dataset_dir") or "data"))
    if str(folder) == "ONLINE":  # LlamaFactory's hub datasets
        return
    info_path = folder / "dataset_info.json"
    if not folder.is_dir():
        raise ConfigError(f"{folder}: dataset_dir does not exist")
    if not info_path.is_file():
        raise ConfigError(f"{info_path}: not found (dataset_dir must hold LlamaFactory's dataset_info.json)")
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ConfigError(f"{info_path}: not valid JSON ({err})") from None
    if not isinstance(info, dict):
        raise ConfigError(f"{info_path}: expected a JSON object of dataset entries")
    for key, listed in names.items():
        for name in listed:
            if name not in info:
                close = difflib.get_close_matches(name, info, n=1)
                raise ConfigError(f"{info_path}: {key} {name!r} is not listed" + (f" (did you mean {close[0]}?)" if close
                                  else f" (listed: {', '.join(sorted(info)) or 'none'})"))
            entry = info[name]
            file_name = entry.get("file_name") if isinstance(entry, dict) else None
            if file_name and not any(entry.get(k) for k in ("hf_hub_url", "ms_hub_url", "om_hub_url", "script_url")) \
                    and not (folder / str(file_name)).exists():
                raise ConfigError(f"{folder / str(file_name)}: the file of {key} {name!r} does not exist")


def _resumable(work: Path, config: dict[str, Any], planned: Any, world_size: int) -> bool:
    """Whether checkpoints in ``work`` belong to this very run (an interrupted one), so training may resume them.
    On another number of processes they do not: a ZeRO checkpoint holds one partition per rank."""
    started = _read_json(work / STARTED_FILE)
    if started is not None:
        return started.get("planned") == planned and started.get("world_size", world_size) == world_size
    saved = work / CONFIG_FILE  # a run started before STARTED_FILE existed: its merged config says what it was
    if not saved.is_file():
        return True
    try:
        return yaml.safe_load(saved.read_text(encoding="utf-8")) == yaml.safe_load(yaml.safe_dump(config))
    except yaml.YAMLError:
        return False


def _started(work: Path) -> bool:
    return (work / STARTED_FILE).exists() or (work / DONE_FILE).exists() or any(work.glob("checkpoint-*"))


def _moved(config: dict[str, Any], src: Path, dst: Path) -> dict[str, Any]:
    """``config`` with the paths under ``src`` (output_dir, an untied base model) moved under ``dst``."""
    src_s, dst_s = str(src.resolve()), str(dst.resolve())
    return {k: dst_s + v[len(src_s):] if isinstance(v, str) and (v == src_s or v.startswith(src_s + os.sep)) else v
            for k, v in config.items()}


def train_lock(plan: LaunchPlan) -> Path:
    """The lock of the plan's output folder: ``<run_dir>/.locks/<name>.lock``, one per node of a multi-node stage
    (every node runs this launch into the same folder, and each must start for the others' torchrun to meet)."""
    return output_lock(plan.output_dir, f".node{plan.env.get('NODE_RANK', '0')}"
                       if int(plan.env.get("LF_NNODES", "1")) > 1 else "")


def run_plan(plan: LaunchPlan, *, force: bool = False, dry_run: bool = False) -> Path:
    """Write the merged config, then train (in-process on CPU, torchrun on GPU). Returns output_dir.

    The model and datasets are checked before anything in the output folder changes, in a dry run too (the chat
    template was checked when the config was built: ``thinkj.train.config.check_template``). A finished run with the same
    config and inputs is kept; one with another config (or ``force``) stays in place until its successor has
    finished in ``<output_dir>.next`` (:mod:`thinkj.folder_swap`). Checkpoints of an interrupted run with another
    config are never resumed: they are removed when the new run starts.

    One launch at a time trains into an output folder (:func:`train_lock`): a second, started while the first trains,
    waits for it, then finds its finished run (kept when the config is the same) instead of training into the same
    checkpoints. A dry run does not wait.
    """
    if dry_run:
        return _run_plan(plan, force=force, dry_run=True)
    check_inputs(plan.config)  # bad input fails before the lock's folder is made (and again under it: cheap)
    with exclusive(train_lock(plan), f"[thinkj train] {plan.output_dir}",
                   lambda line: print(line, file=sys.stderr, flush=True)):
        return _run_plan(plan, force=force, dry_run=False)


def _run_plan(plan: LaunchPlan, *, force: bool, dry_run: bool) -> Path:
    out = plan.output_dir
    restore(out)
    if not force and finished_with(out, plan.config, plan.world_size):
        print(f"[thinkj train] {out} is finished with this config ({DONE_FILE}); pass --force to train again",
              file=sys.stderr)
        return out
    check_inputs(plan.config)  # a dry run fails on what the real run would fail on before its first step
    planned = _normalised(plan.config)  # the inputs now: files changed while training are not what it trained on
    work = staging_dir(out) if is_finished(out) else out
    if work != out:
        if not force and finished_with(work, plan.config, plan.world_size):
            return promote(work, out)  # the successor had finished; its swap was interrupted
        print(f"[thinkj train] {out} is finished with "
              f"{'another config or process count' if not force else 'this config (--force)'}: "
              f"training in {work}, which replaces it when it finishes", file=sys.stderr)
    config = _moved(plan.config, out, work)
    command = [str((work / CONFIG_FILE).resolve()) if a == str((out / CONFIG_FILE).resolve()) else a
               for a in plan.command] if plan.command is not None else None
    plan = replace(plan, config=config, output_dir=work, command=command)
    if dry_run:
        # a dry run leaves a started run's files alone
        target = work / (CONFIG_FILE if not _started(work) else "train_config.dry_run.yaml")
        save_config(config, target)
        print(f"[thinkj train] {plan.shell()} (dry run; merged config in {target})", file=sys.stderr)
        return out

    # Nothing was changed on disk before this line.
    if force and work != out:
        shutil.rmtree(work, ignore_errors=True)
    if force or not _resumable(work, config, planned, plan.world_size):
        for checkpoint in work.glob("checkpoint-*"):  # another config's: resuming them would mix two runs
            shutil.rmtree(checkpoint, ignore_errors=True)
        (work / DONE_FILE).unlink(missing_ok=True)
        config["overwrite_output_dir"] = True
    work.mkdir(parents=True, exist_ok=True)
    write_json(work / STARTED_FILE, {"planned": planned, "world_size": plan.world_size})
    save_config(config, work / CONFIG_FILE)
    units = "GPU(s)" if plan.device == "gpu" else "process(es)"
    print(f"[thinkj train] {plan.kind} on {plan.device}: global batch = per_device_train_batch_size "
          f"{config.get('per_device_train_batch_size', 8)} x gradient_accumulation_steps "
          f"{config.get('gradient_accumulation_steps', 1)} x {plan.world_size} {units} = "
          f"{global_batch(config, plan.world_size)}", file=sys.stderr)
    print(f"[thinkj train] {plan.shell()}", file=sys.stderr)
    if plan.kind == "rm" and has_tied_embeddings(config["model_name_or_path"]):
        config["model_name_or_path"] = str(untied_copy(config["model_name_or_path"], work / "untied_base"))
        save_config(config, work / CONFIG_FILE)
        print(f"[thinkj train] tied embeddings untied for the rm stage: {config['model_name_or_path']}", file=sys.stderr)
    start = time.monotonic()
    if plan.command is None:
        from thinkj.online.trl_compat import fix_trl_availability_flags

        fix_trl_availability_flags()  # LlamaFactory's dpo stage imports TRL's DPOTrainer (see lf_launcher)
        from llamafactory.train.tuner import run_exp

        run_exp(config)
    else:
        result = subprocess.run(plan.command, env={**os.environ, **plan.env})
        if result.returncode != 0:  # each rank's traceback is above; this stage has no completion record
            raise StageIncomplete(f"`{plan.shell()}` failed with exit code {result.returncode} (the ranks' output is "
                                  "above); rerun the same command to resume from the last checkpoint")
    if work != out:
        save_config(_moved(config, work, out), work / CONFIG_FILE)  # the paths it will have after the swap
    write_json(work / DONE_FILE, {
        "kind": plan.kind, "device": plan.device, "world_size": plan.world_size,
        "seconds": round(time.monotonic() - start, 2), "command": plan.shell(),
        "global_batch": global_batch(config, plan.world_size), "planned": planned})
    return promote(work, out) if work != out else out


def run_stage(kind: str, stage_config: str | os.PathLike, *, profile: str | None = None,
              overrides: Iterable[str] | dict[str, Any] = (), run_dir: str | os.PathLike = "runs/default",
              name: str | None = None, device: str | None = None, global_batch_size: int | None = None,
              force: bool = False, dry_run: bool = False, cpu_bf16: bool = False, processes: int = 1) -> Path:
    """Plan and run one stage; returns its output directory (the trained model lives there)."""
    plan = plan_stage(kind, stage_config, profile=profile, overrides=overrides, run_dir=run_dir, name=name,
                      device=device, global_batch_size=global_batch_size, cpu_bf16=cpu_bf16, processes=processes)
    return run_plan(plan, force=force, dry_run=dry_run)
