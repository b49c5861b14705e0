"""Compose the verl command line for GRPO / PPO / Reinforce++ from ``configs/verl`` and run it (GPU nodes).

    # print the command for GRPO on 2 x 8 GPUs (no GPU needed to print)
    python -m thinkj.online.verl_launch --algo grpo --model runs/qwen7b/judge_sft --data data/verl/train.parquet \\
        --val-data data/verl/val.parquet --out runs/qwen7b/online_grpo --dry-run
    # one node, 8 GPUs, Llama preset, strength weight changed by one override, then run
    python -m thinkj.online.verl_launch --algo reinforce_pp --model runs/llama8b/judge_sft --data data/verl/train.parquet \\
        --nnodes 1 --preset thinkj_llama --weight w_str=0.2 -- trainer.total_epochs=2
    # one seed for the data shuffle, the rollout sampling and the mini-batches (default: verl's own)
    python -m thinkj.online.verl_launch --algo grpo --model runs/qwen7b/judge_sft --data data/verl/train.parquet --seed 3

Everything after ``--`` is passed to verl as Hydra overrides, last, so any Table 11 value can be changed
for an ablation without copying a config. ``scripts/train_verl.sh`` and ``thinkj train rl --engine verl``
are thin wrappers around :func:`build_command`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from thinkj.errors import ThinkJError, exit_on_user_error
from thinkj.locks import exclusive, output_lock
from thinkj.models.catalog import resolve_model
from thinkj.online import ray_cluster, verl_cpu, verl_gpu, verl_layout
from thinkj.paths import PROJECT_ROOT, cache_root
from thinkj.records import write_json
from thinkj.rewards import get_preset

CONFIG_DIR = PROJECT_ROOT / "configs" / "verl"
# CLI algorithm names -> config files in configs/verl/
ALGOS = {"grpo": "grpo", "grpo_consistent": "grpo_consistent", "ppo": "ppo", "reinforce_pp": "reinforce_plus_plus",
         "reinforce_plus_plus": "reinforce_plus_plus"}
# configs whose data must hold both orders of every comparison side by side (thinkj.rewards.designs.twins)
TWIN_CONFIGS = ("grpo_consistent",)
# verl 0.9 accepts these old top-level reward keys but its trainer never reads them (see docs/online_learning.md)
LEGACY_REWARD_KEYS = ("custom_reward_function.", "reward_model.reward_manager")
DEVICES = ("gpu", "cpu")
# nodes x workers per node when not given: Table 11 on GPUs; one worker on the CPU (a tiny model on a laptop)
DEFAULT_WORLD = {"gpu": (2, 8), "cpu": (1, 1)}
# Every seed verl 0.9.1's legacy trainer (trainer.use_v1: false) reads, in its own key names: the training
# data shuffle (data.seed, verl's default null = torch's default generator seed), vLLM's sampling
# (rollout.seed, 42) and the PPO mini-batch order of the actor and the critic (data_loader_seed, 42).
SEED_KEYS = ("data.seed", "actor_rollout_ref.rollout.seed", "actor_rollout_ref.actor.data_loader_seed",
             "critic.data_loader_seed")


class LaunchError(ThinkJError):
    pass


@dataclass
class VerlLaunch:
    algo: str
    model: str
    train_files: str
    val_files: str | None = None
    out_dir: str = "runs/default/online_verl"
    preset: str = "thinkj_qwen"
    weights: dict[str, float] = field(default_factory=dict)
    nnodes: int | None = None  # None: the device's default (DEFAULT_WORLD): Table 11's 2 x 8 on GPUs, 1 x 1 on CPU
    gpus_per_node: int | None = None
    experiment_name: str | None = None
    overrides: list[str] = field(default_factory=list)
    config_dir: str = str(CONFIG_DIR)
    python: str = sys.executable
    device: str = "gpu"  # gpu | cpu (verl_cpu: the real trainer on the host CPU, tiny models only)
    allow_think_tokens: bool = False  # launch even if <think> would be hidden from the reward (think_check)
    seed: int | None = None  # None: verl's own seeds (SEED_KEYS)
    allow_val_on_train: bool = False  # validate on the training parquet (the curve is then training-set accuracy)


def check_override(override: str) -> None:
    """Refuse overrides verl would silently ignore, and ones that are not ``key=value``."""
    key = override.lstrip("+~").split("=", 1)[0]
    if "=" not in override and not override.startswith("~"):
        raise LaunchError(f"override {override!r} is not key=value")
    if any(key == k.rstrip(".") or key.startswith(k) for k in LEGACY_REWARD_KEYS):
        raise LaunchError(f"override {override!r} uses an old top-level reward key that verl 0.9 ignores; "
                          "use reward.custom_reward_function.* (and reward_kwargs for the preset and weights)")


def seed_overrides(seed: int) -> list[str]:
    """Hydra overrides that give every seed verl reads (:data:`SEED_KEYS`) the value ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise LaunchError(f"seed {seed!r}: must be a whole number from 0 to {2**32 - 1}")
    return [f"{key}={seed}" for key in SEED_KEYS]


def build_command(spec: VerlLaunch) -> tuple[list[str], dict[str, str]]:
    """The argv of ``python -m verl.trainer.main_ppo ...`` and the environment variables it needs."""
    if spec.algo not in ALGOS:
        raise LaunchError(f"unknown algorithm {spec.algo!r}; choose from {', '.join(ALGOS)}")
    if spec.device not in DEVICES:
        raise LaunchError(f"unknown device {spec.device!r}; choose from {', '.join(DEVICES)}")
    config_dir = Path(spec.config_dir).resolve()
    if not (config_dir / f"{ALGOS[spec.algo]}.yaml").exists():
        raise LaunchError(f"{config_dir}/{ALGOS[spec.algo]}.yaml not found (pass --config-dir to a checkout's configs/verl)")
    preset = get_preset(spec.preset)
    preset.weights(spec.weights, where="--weight ")  # the rewards' one rule: known, finite, >= 0, bounded
    for override in spec.overrides:
        check_override(override)
    if ALGOS[spec.algo] not in TWIN_CONFIGS:
        from thinkj.rewards.designs.twins import needs_twins

        problem = needs_twins(spec.weights, f"--algo {spec.algo}")
        if problem:
            raise LaunchError(f"--weight {problem}")

    out = Path(spec.out_dir).resolve()
    on_cpu = spec.device == "cpu"
    nnodes, gpus_per_node = world_shape(spec)
    # a running Ray cluster (a job of `ray job submit`, or RAY_ADDRESS set by hand) owns the nodes and resources
    cluster = bool(os.environ.get("RAY_ADDRESS"))
    experiment = spec.experiment_name or f"thinkj_{ALGOS[spec.algo]}"
    kwargs = "reward.custom_reward_function.reward_kwargs"
    # a catalog name (``smollm2``) means its converted folder in the cache, as for every other engine
    val_overrides = validation_plan(spec)
    model, train, val = resolve_model(spec.model), spec.train_files, spec.val_files or spec.train_files
    if on_cpu or cluster:
        # Ray workers do not share our working directory (on a cluster they run on other nodes, from the job's copy
        # of the checkout): a path that exists here is made absolute; one only the cluster's nodes see stays as given
        model, train, val = (_local(p) for p in (model, train, val))
    argv = [spec.python, "-m", "verl.trainer.main_ppo", "--config-path", str(config_dir), "--config-name", ALGOS[spec.algo],
            f"actor_rollout_ref.model.path={hydra_value(model)}",
            f"data.train_files={hydra_value(train)}",
            f"data.val_files={hydra_value(val)}",
            f"{kwargs}.preset={spec.preset}",
            *[f"++{kwargs}.{name}={value}" for name, value in sorted(spec.weights.items())],
            *([] if on_cpu else [f"trainer.nnodes={nnodes}", f"trainer.n_gpus_per_node={gpus_per_node}"]),
            f"trainer.experiment_name={experiment}",
            f"trainer.default_local_dir={hydra_value(out / 'checkpoints')}",
            # Hydra's own run folder (config + log), inside the output folder instead of ./outputs
            f"hydra.run.dir={hydra_value(out / 'hydra')}",
            *(verl_cpu.cpu_overrides(spec.algo, nnodes, gpus_per_node, cluster=cluster) if on_cpu else []),
            *([] if on_cpu else verl_gpu.attention_overrides(verl_gpu.attention_choice()[0], critic=spec.algo == "ppo",
                                                             user_overrides=spec.overrides)),
            *val_overrides,
            *(seed_overrides(spec.seed) if spec.seed is not None else []),
            *spec.overrides]
    # verl's file logger writes <root>/<project>/<experiment>.jsonl; tensorboard goes to TENSORBOARD_DIR
    env = {"VERL_FILE_LOGGER_ROOT": str(out / "logs"), "TENSORBOARD_DIR": str(out / "logs" / "tensorboard"),
           "TOKENIZERS_PARALLELISM": "false"}
    if on_cpu:
        env.update(verl_cpu.cpu_environment(cache_root() / "verl_cpu"))
    if cluster:
        at = len(argv) - len(spec.overrides)  # before the user's overrides, which stay last
        argv[at:at] = [*runtime_env_overrides(env), *ray_cluster.runtime_env_overrides()]
    return argv, env


# verl's switches that run validation (trainer.test_freq > 0: every so many steps and after the last one)
VALIDATION_KEYS = ("trainer.test_freq", "trainer.val_before_train")
VALIDATION_OFF = ["trainer.test_freq=-1", "trainer.val_before_train=False"]


def validation_plan(spec: VerlLaunch) -> list[str]:
    """Overrides that keep verl from validating on the training data.

    verl needs ``data.val_files`` either way (it builds the dataset at start); given no ``--val-data`` it gets the
    training parquet and validation is switched off, since a curve on the data being trained on measures
    memorisation, not the judge (a held-out parquet in both orders, split off the RL pairs: ``thinkj data verl-parquet
    PAIRS.jsonl train.parquet --val-out val.parquet``; docs/online_learning.md "Held-out validation"). ``--val-data``
    naming the training file itself, or overrides that switch validation back on without a held-out file, are
    refused unless ``allow_val_on_train``.
    """
    same = spec.val_files is None or _same_file(spec.val_files, spec.train_files)
    if not same or spec.allow_val_on_train:
        return []
    if spec.val_files is not None:
        raise LaunchError(f"--val-data {spec.val_files} is the training data (--data): the validation curve would be "
                          "training-set accuracy; pass a held-out parquet (thinkj data verl-parquet PAIRS.jsonl "
                          "train.parquet --val-out val.parquet), or --allow-val-on-train to validate on it anyway")
    for override in spec.overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key in VALIDATION_KEYS and value.strip().lower() not in ("-1", "0", "false"):
            raise LaunchError(f"override {override!r} turns validation on, but no --val-data was given (it would run "
                              "on the training data): pass a held-out parquet with --val-data, or --allow-val-on-train")
    return VALIDATION_OFF


def _same_file(a: str, b: str) -> bool:
    if _is_remote(a) or _is_remote(b):
        return a == b
    try:
        return Path(a).samefile(b)
    except OSError:  # one does not exist (yet, or on this machine): compare the paths
        return Path(a).resolve() == Path(b).resolve()


def runtime_env_overrides(env: dict[str, str]) -> list[str]:
    """Hydra overrides that hand ``env`` to every Ray worker of the run through verl's ``ray.init(runtime_env=...)``.

    A Ray that verl's driver starts passes the driver's environment on to its workers; the raylets of a running
    cluster were started with their own, so the metric-log folder (else verl's file logger writes into the job's
    scratch copy of the checkout) and, on CPU, the platform's variables must travel with the job. A variable this
    process already has with the same value is left out: it came from the raylet or from the job's own runtime
    env, which Ray refuses to merge with a driver's that names the same variable.
    """
    return [f"+ray_kwargs.ray_init.runtime_env.env_vars.{key}='{value}'" for key, value in env.items()
            if os.environ.get(key) != value]


def world_shape(spec: VerlLaunch) -> tuple[int, int]:
    """Nodes and workers per node: the spec's, else the device's default; a CPU run outside a Ray cluster must fit
    this machine (one FSDP worker and one vLLM engine per declared GPU, each a process on these cores)."""
    default_nodes, default_gpus = DEFAULT_WORLD[spec.device]
    nnodes = default_nodes if spec.nnodes is None else spec.nnodes
    gpus_per_node = default_gpus if spec.gpus_per_node is None else spec.gpus_per_node
    for option, number in (("--nnodes", nnodes), ("--gpus-per-node", gpus_per_node)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise LaunchError(f"{option} {number!r}: must be a whole number >= 1")
    cores = os.cpu_count() or 1
    if spec.device == "cpu" and not os.environ.get("RAY_ADDRESS") and nnodes * gpus_per_node > cores:
        raise LaunchError(f"--device cpu with {nnodes} node(s) x {gpus_per_node} worker(s) starts "
                          f"{nnodes * gpus_per_node} training workers on this machine's {cores} cores: use --nnodes 1 "
                          "--gpus-per-node 1 (one worker), or a Ray cluster (scripts/ray_cluster.sh) for more")
    return nnodes, gpus_per_node


_HYDRA_PLAIN = re.compile(r"[\w./:+@~-]*")


def hydra_value(path: str | Path) -> str:
    """A path as a Hydra override value: as it is when plain, else single-quoted. A sweep's run folder is named
    ``model=..._w_str=0.2-<hash>``, and an unquoted ``=`` (or comma, bracket, space) breaks Hydra's override
    grammar ("mismatched input '='")."""
    text = str(path)
    if _HYDRA_PLAIN.fullmatch(text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _local(path: str) -> str:
    """An existing local path made absolute (verl's Ray workers do not share our working directory)."""
    return str(Path(path).resolve()) if Path(path).exists() else path


def shell_line(argv: list[str], env: dict[str, str]) -> str:
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *map(shlex.quote, argv)])


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


def run(spec: VerlLaunch, dry_run: bool = False) -> int:
    """Print the command; unless ``dry_run``, run it (refuses on a machine without GPUs and no Ray cluster).

    A dry run checks the data files as the real run does before its first step (:func:`check_inputs`: they exist,
    read as parquet, and every row is one the reward can score), so a bad file fails here, not on the cluster."""
    argv, env = build_command(spec)
    check_layout(spec, argv)
    if dry_run:
        check_inputs(spec)
    print(shell_line(argv, env), flush=True)
    if dry_run:
        _say_gpu_choices(spec)
        return 0
    if not spec.allow_think_tokens:
        from thinkj.online.think_check import think_problems, think_trap_message

        model = resolve_model(spec.model)
        problems = think_problems(model)
        if problems:
            raise LaunchError(think_trap_message(model, problems))
    if spec.device == "gpu" and not ray_cluster.cluster_address() and not gpu_available():
        raise LaunchError("this machine has no GPU and no Ray cluster (RAY_ADDRESS): run verl's trainer on the CPU "
                          "with --device cpu (DEVICE=cpu for scripts/train_verl.sh; tiny models, for checking), "
                          "or use --dry-run to print the GPU command")
    # before anything launches (after the model's and this machine's own refusals, which say more): verl would wait
    # for ever on nodes or GPUs the cluster does not have
    summary = ray_cluster.preflight(*world_shape(spec), spec.device)
    print(summary, flush=True)
    check_inputs(spec)
    # one launch at a time into --out (its checkpoints, its launch record): a second waits for the first
    with exclusive(output_lock(spec.out_dir), f"[thinkj train rl] {spec.out_dir}", lambda line: print(line, flush=True)):
        record = launch_record(spec)
        check_resumable(spec, record)
        Path(spec.out_dir).mkdir(parents=True, exist_ok=True)
        write_json(Path(spec.out_dir) / LAUNCH_FILE, record)
        _say_gpu_choices(spec)
        with ray_cluster.turn(*world_shape(spec), log=lambda line: print(line, flush=True)):  # others' runs end first
            return subprocess.call(argv, env={**os.environ, **env})


def check_layout(spec: VerlLaunch, argv: list[str]) -> None:
    """Compose the run's config as verl will and refuse batch or parallel sizes that do not fit its nodes x GPUs
    (:mod:`thinkj.online.verl_layout`): verl itself asserts them only minutes into the job."""
    at = argv.index("--config-name")
    try:
        cfg = verl_layout.compose(argv[argv.index("--config-path") + 1], argv[at + 1], argv[at + 2:])
    except ImportError as err:  # no Hydra, so no verl here either (a dry run on a laptop): said, not refused
        print(f"verl sizes: not checked here ({err}); the machine that runs verl checks them", file=sys.stderr)
        return
    except Exception as err:  # Hydra's errors: an override that names no key, a value that does not parse
        raise LaunchError(f"verl's config does not compose with these overrides: {' '.join(str(err).split())}") from err
    problems = verl_layout.layout_problems(cfg, *world_shape(spec), critic=verl_layout.uses_critic(cfg))
    if problems:
        raise LaunchError("the run's sizes do not fit its world (verl would stop minutes after start):\n  "
                          + "\n  ".join(problems))


def _say_gpu_choices(spec: VerlLaunch) -> None:
    """The attention implementation and the validation plan a GPU launch chose, on stderr (after every refusal, so a
    refused launch stays one line; a CPU run always uses sdpa and never validates: verl_cpu.CPU_OVERRIDES)."""
    if spec.device != "gpu":
        return
    implementation, why = verl_gpu.attention_choice()
    print(f"verl attention: {implementation} ({why})", file=sys.stderr, flush=True)
    if spec.val_files is None and not spec.allow_val_on_train:
        print("verl validation: off (no --val-data; validating on the training data would only show training-set "
              "accuracy)", file=sys.stderr, flush=True)


LAUNCH_FILE = "thinkj_launch.json"  # what the checkpoints in this folder were trained with


def _is_remote(path: str) -> bool:
    return "://" in path


def check_inputs(spec: VerlLaunch) -> None:
    """The data files exist here (unless a Ray cluster elsewhere reads them, or they are remote URLs); the training
    data's gold position is balanced (a warning otherwise); a twin config's data holds both orders side by side."""
    from thinkj.checks import check_input_file

    if os.environ.get("RAY_ADDRESS") and spec.device != "cpu":
        return  # the cluster's nodes read the paths as given; this machine may not see them
    for option, path in (("--data", spec.train_files), ("--val-data", spec.val_files)):
        if path and not _is_remote(path):
            check_input_file(option, path)
            if path.endswith(".parquet"):
                check_rl_parquet(option, path, twins=ALGOS[spec.algo] in TWIN_CONFIGS, balance=option == "--data")


def check_rl_parquet(option: str, path: str, *, twins: bool, balance: bool = True) -> None:
    """Every row is one the reward can score (``thinkj.export.verl.check_rl_row``; a file that is no readable parquet
    is named in one line); warn when the gold position is off balance (``thinkj.rewards.designs.twins.gold_balance``); with
    ``twins``, refuse a file whose rows 2k and 2k+1 are not the two orders of one comparison (``extra_info.twin`` /
    ``order``)."""
    from thinkj.export.verl import check_rl_row
    from thinkj.records import read_parquet_rows
    from thinkj.rewards.designs.twins import gold_balance

    labels, infos = [], []
    for line, row in read_parquet_rows(path, ["prompt", "reward_model", *(["extra_info"] if twins else [])]):
        labels.append(check_rl_row(row, path=path, line=line)[1])
        infos.append(row.get("extra_info") or {})
    if not labels:
        raise LaunchError(f"{option} {path}: holds no rows")
    if balance:
        gold_balance(labels, where=f"{option} {path}")
    if not twins:
        return
    for i in range(0, len(infos), 2):
        first, second = infos[i], infos[i + 1] if i + 1 < len(infos) else {}
        if (not first.get("twin") or first.get("twin") != second.get("twin")
                or (first.get("order"), second.get("order")) != (0, 1)):
            raise LaunchError(f"{option} {path}: rows {i + 1} and {i + 2} are not the two orders of one comparison "
                              "(extra_info.twin / order); the consistent config needs both orders side by side: "
                              "`thinkj data verl-parquet PAIRS OUT --twins`")


def _result_overrides(overrides: list[str]) -> list[str]:
    """The overrides that change what is trained: ``trainer.*`` (steps, epochs, saving, logging, nodes) only changes
    how long and where, and a resumed run may extend its steps."""
    return [o for o in overrides if not o.lstrip("+~").startswith("trainer.")]


def launch_record(spec: VerlLaunch) -> dict:
    """What a verl run in ``out_dir`` trains: algorithm, preset and weights, seed, the overrides that change results,
    and the content of its model, data and config (sha256; a hub model by name and revision)."""
    from thinkj.fingerprint import fingerprint
    from thinkj.inference.identity import model_identity

    def content(path: str | None) -> str | None:
        return None if not path or _is_remote(path) else fingerprint(path)

    model = resolve_model(spec.model)
    return {"launch": {"algo": ALGOS[spec.algo], "model": spec.model, "train_files": spec.train_files,
                       "val_files": spec.val_files or spec.train_files, "preset": spec.preset,
                       "weights": dict(sorted(spec.weights.items())), "seed": spec.seed,
                       "experiment_name": spec.experiment_name, "device": spec.device,
                       "overrides": _result_overrides(spec.overrides)},
            "inputs": {"model": model_identity(model).split("#", 1)[-1], "train_files": content(spec.train_files),
                       "val_files": content(spec.val_files or spec.train_files),
                       "config": content(str(Path(spec.config_dir) / f"{ALGOS[spec.algo]}.yaml"))}}


def check_resumable(spec: VerlLaunch, record: dict) -> None:
    """verl resumes from the newest checkpoint in ``out_dir/checkpoints``: refuse when those were made by another
    launch (other algorithm, weights, data, model ...), which would silently continue someone else's run."""
    out = Path(spec.out_dir)
    checkpoints = out / "checkpoints"
    if not checkpoints.is_dir() or not any(checkpoints.glob("global_step_*")):
        return
    if any(o.lstrip("+").startswith("trainer.resume_mode=") and not o.endswith("=auto") for o in spec.overrides):
        return  # resume_mode disable or an explicit checkpoint: the user chose
    before = _read_record(out / LAUNCH_FILE)
    if before is None:
        return  # checkpoints from before launch records existed: verl's own resume, as it always was
    changed = [f"{part}.{key}: {before.get(part, {}).get(key)!r} then, {record[part].get(key)!r} now"
               for part in ("launch", "inputs") for key in record[part]
               if before.get(part, {}).get(key) != record[part].get(key)]
    if changed:
        raise LaunchError(f"{checkpoints} holds checkpoints of another launch ({'; '.join(changed)}), which verl would "
                          f"resume: use another --out, or delete {checkpoints} to start this run over")


def _read_record(path: Path) -> dict | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) and isinstance(document.get("launch"), dict) else None


def parse_weights(items: list[str] | None) -> dict[str, float]:
    """``--weight NAME=NUMBER`` items through the one key=value parser (a name given twice is refused); whether a
    weight is one the preset has, finite and not negative is the rewards' rule (:mod:`thinkj.rewards.weights`)."""
    from thinkj.overrides import parse_key_values

    def number(key: str, value: str, origin: str) -> float:
        try:
            return float(value)
        except ValueError:
            raise LaunchError(f"--weight {key}={value!r}: expected NAME=NUMBER, e.g. w_str=0.2") from None

    return parse_key_values(items, "--weight", number, example="e.g. w_str=0.2", error=LaunchError)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", required=True, choices=sorted(ALGOS))
    parser.add_argument("--model", required=True, help="HF model dir or hub id (the SFT-initialised judge)")
    parser.add_argument("--data", required=True, help="verl parquet (thinkj.export.verl)")
    parser.add_argument("--val-data", default=None,
                        help="held-out validation parquet (default: none, and validation off)")
    parser.add_argument("--allow-val-on-train", action="store_true",
                        help="validate on the training parquet (the curve is then training-set accuracy)")
    parser.add_argument("--out", default="runs/default/online_verl", help="checkpoints and metric logs go here")
    parser.add_argument("--preset", default="thinkj_qwen", help="reward preset (thinkj rewards lists them)")
    parser.add_argument("--weight", action="append",
                        help="reward weight NAME=VALUE, repeatable (w_acc, w_fmt, w_str; w_con with grpo_consistent)")
    parser.add_argument("--nnodes", type=int, default=None, help="nodes [gpu: 2 (Table 11); cpu: 1]")
    parser.add_argument("--gpus-per-node", type=int, default=None,
                        help="workers per node, one GPU each [gpu: 8; cpu: 1, each a declared GPU on the CPU]")
    parser.add_argument("--experiment-name", default=None)
    parser.add_argument("--seed", type=int, default=None,
                        help="seed of the data shuffle, rollout sampling and mini-batches [verl's own: null, 42, 42]")
    parser.add_argument("--config-dir", default=str(CONFIG_DIR))
    parser.add_argument("--device", default="gpu", choices=DEVICES,
                        help="cpu: verl's trainer on this machine's CPU (tiny models; see thinkj/online/verl_cpu.py)")
    parser.add_argument("--dry-run", action="store_true", help="print the command only")
    parser.add_argument("--allow-think-tokens", action="store_true",
                        help="launch even if the tokenizer or chat template hides <think> from the reward")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for verl, after --")
    args = parser.parse_args(argv)
    spec = VerlLaunch(algo=args.algo, model=args.model, train_files=args.data, val_files=args.val_data, out_dir=args.out,
                      preset=args.preset, weights=parse_weights(args.weight), nnodes=args.nnodes,
                      gpus_per_node=args.gpus_per_node, experiment_name=args.experiment_name,
                      overrides=list(args.overrides), config_dir=args.config_dir, device=args.device,
                      allow_think_tokens=args.allow_think_tokens, seed=args.seed,
                      allow_val_on_train=args.allow_val_on_train)
    try:
        return run(spec, dry_run=args.dry_run)
    except ThinkJError as err:  # a LaunchError, or a bad input found before launching
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(exit_on_user_error(main))
