"""The end-to-end reproduction pipeline behind ``scripts/reproduce*.sh``: one ordered list of shell commands.

    thinkj run configs/recipes/qwen2.5-7b.yaml --dry-run            # print every command, run nothing
    DRY_RUN=1 bash scripts/reproduce_qwen2.5-7b.sh                 # the same (the script runs that recipe)
    bash scripts/reproduce_qwen2.5-7b.sh                           # run; finished stages are skipped
    LEARNING=offline OFFLINE_ITERATIONS=2 bash scripts/reproduce_llama3-8b.sh
    W_STR=0.5 bash scripts/reproduce_qwen2.5-32b.sh                # one reward weight changed
    SEED=1 bash scripts/reproduce_qwen2.5-7b.sh                    # another seed, in runs/<profile>_seed1
    python -m thinkj.pipeline --print-env                          # the settings and their defaults

Stages (paper §3), after what a run may prepare for itself (:mod:`thinkj.pipeline_prep`: a model built in the run
folder, a generated task; the CPU recipes): load -> difficulty -> dedup -> decontaminate (ours: no pair holding an
item of BENCHMARKS) -> traces -> clip -> seed-set (data selection, LIMJ707) ->
judge SFT (+ critic SFT for offline) -> offline critic-guided DPO or online RL (verl) -> evaluation on
each benchmark -> tables.

Every setting is declared once in :mod:`thinkj.run_settings` (type, default, why); a recipe
(``configs/recipes/<model>.yaml``) sets a model's, an environment variable or ``--set`` overrides one. All of them
are checked before stage 1 (``validate``): a bad one fails in one line naming the variable, and so does a
variable that looks like a setting but is none (``W_STRR``, any unknown ``W_*``, ``BENCHMARK``: "did you mean
…?") -- ignored, it would run the default as if it were the ablation asked for.

Done means a completion record: when a stage's command exits 0 and its output exists, the pipeline writes
``<stage folder>/<stage>.done.json`` (the settings the stage depends on, the sha256 of the content of every
local file or folder it read -- a local source, the previous stage's output, the model profile and training
config, the model it starts from --, its command, counts) as the stage's last act, by temp file + rename.
Only that record makes a rerun skip the stage -- not the output file, nor an engine's checkpoint marker (verl
writes ``latest_checkpointed_iteration.txt`` at every save, so a crash at step 50 left a "finished"
half-trained model). A record made with other settings is never reused silently: the reward preset,
algorithm and weight overrides name the online run's folder (``W_STR=0.0`` is a new run beside the default
one), and any other difference (source, model profile, limits, …) stops the run naming the setting; so does
an input whose content changed since (a source file edited in place). ``SEED`` reaches every seeded stage
(difficulty sampling, LlamaFactory training, offline pair generation, verl, evaluation) and sits in their
records, so a finished stage is never reused under another seed; unset, each stage keeps its own default seed
(``STAGE_SEEDS``). The engines resume inside an unfinished stage (cached generations, verl / LlamaFactory
checkpoints). A failed stage stops the run with its name and log file (``<RUN_DIR>/logs/<stage>.log``).
See docs/runs.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from thinkj import pipeline_prep, stage_runner
from thinkj.errors import ThinkJError, exit_on_user_error
from thinkj.folder_swap import promote
from thinkj.models.profiles import CONFIGS, profile_budget, profile_hub_id, profile_path
from thinkj.pipeline_checks import (
    _check_lf_overrides,
    _check_verl_overrides,
    _finite,
    _one_of,
    _positive_int,
    _split,
    benchmark_data,
    benchmark_inputs,
    decontaminate_against,
)
from thinkj.pipeline_stage import Stage as Stage  # its home before pipeline_stage (tests build Stages here)
from thinkj.records import write_json
from thinkj.run_settings import BY_NAME, DEFAULTS, WEIGHT_SETTINGS, resolve
from thinkj.run_settings import check_names as check_names  # its home before run_settings
from thinkj.stage_runner import fingerprints

# Settings that change what a stage produces, by stage (a stage also depends on every stage before it).
# TP, NNODES, GPUS_PER_NODE, DEVICE, TEACHER_KEY_ENV, RUN_DIR and DRY_RUN change how a stage runs, not its result.
# SEED enters at difficulty, the first seeded stage; every later stage depends on it through that one.
STAGE_SETTINGS: dict[str, tuple[str, ...]] = {
    "model": ("BUILD_MODEL",),  # the stages a run prepares for itself (thinkj.pipeline_prep), each when asked for
    "task": ("SYNTHETIC_TASK", "TASK_TRAIN", "TASK_TEST", "TASK_SEED"),
    "load": ("TRAIN_SOURCE", "SOURCE_LOCATION", "SOURCE_LIMIT"),
    "difficulty": ("MODEL_PROFILE", "JUDGE_BACKEND", "SEED", "DIFFICULTY_MAX_NEW_TOKENS"),
    "dedup": ("DEDUP_MODEL", "DEDUP_THRESHOLD"),
    "decontaminate": ("DECONTAMINATE", "DECONTAM_ENCODER", "DECONTAM_THRESHOLD"),  # + what it checked: DECONTAM_AGAINST
    "traces": ("TEACHER_MODEL", "TEACHER_URL"),
    "judge_sft": ("SFT_OVERRIDES",),
    "offline": ("OFFLINE_ITERATIONS", "DPO_OVERRIDES", "PAIR_LIMIT", "PAIR_MAX_NEW_TOKENS"),
    "online": ("RL_ALGO", "REWARD_PRESET", "W_ACC", "W_FMT", "W_STR", "W_CON", "RL_STEPS", "VERL_OVERRIDES"),
    "eval": ("MODEL_NAME", "TRAIN_DATA_NAME", "EVAL_LIMIT", "MAX_NEW_TOKENS"),  # + BENCHMARK_DATA's entry
}
# The tables stage reads every results file under <RUN_DIR>/eval (the default run's and each ablation's): it
# depends on no single run's settings, and it runs every time (seconds) so the tables show every finished run.
ALWAYS_RUN = ("tables",)
# What each seeded stage uses when SEED is unset: the seeds the runs used before SEED existed, kept so that
# those runs stay reproducible. The traces stage (the teacher's API) takes no seed; dedup, clip, seed_set,
# merge and tables are deterministic.
STAGE_SEEDS: dict[str, str] = {
    "difficulty": "0 (data_prep.difficulty --seed)",
    "judge_sft": "42 (LlamaFactory's seed)",
    "critic_sft": "42 (LlamaFactory's seed)",
    "offline": "0 for the critic-guided pairs (--seed), 42 for DPO (LlamaFactory's seed)",
    "online": "verl's: data.seed null (the shuffle's torch generator at its default seed), rollout.seed 42, "
              "actor / critic data_loader_seed 42",
    "eval": "0 (thinkj eval run --seed)",
}
RL_ALGOS = ("grpo", "ppo", "reinforce_pp", "grpo_consistent")  # the last: both orders per step (not the paper's)
SOURCES = ("skywork", "helpsteer2", "hh_rlhf", "pairs")  # generic needs a column map the pipeline has no setting for


class StageFailed(ThinkJError):
    """A stage's command failed; the message names the stage and its log."""


def settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every setting from the environment alone (empty or unset -> the default; a misspelt one is an error): what
    ``python -m thinkj.pipeline`` runs. ``thinkj run RECIPE`` adds a recipe and ``--set`` (:mod:`thinkj.run_settings`)."""
    return resolve(env=env).values


def _opt(flag: str, value: str) -> list[str]:
    return [flag, value] if value else []


def validate(s: dict[str, str]) -> None:
    """Check every setting before any stage runs; the first bad one fails in one line naming its variable."""
    from thinkj.evaluation.registry import BENCHMARKS
    from thinkj.rewards import PRESETS
    from thinkj.tables.layouts import PAPER_ONLY, SPECS

    _one_of("DRY_RUN", s["DRY_RUN"], ("0", "1"))
    pipeline_prep.check(s)
    if not pipeline_prep.built_profile(s):  # a profile the model stage writes is checked by that stage
        profile_hub_id(s["MODEL_PROFILE"], fetched=s["DRY_RUN"] != "1")
    _one_of("TRAIN_SOURCE", s["TRAIN_SOURCE"], SOURCES)
    _one_of("JUDGE_BACKEND", s["JUDGE_BACKEND"], ("vllm", "hf"))
    _one_of("LEARNING", s["LEARNING"], ("online", "offline"))
    _one_of("RL_ALGO", s["RL_ALGO"], RL_ALGOS)
    _one_of("DECONTAMINATE", s["DECONTAMINATE"], ("drop", "report"))
    _one_of("REWARD_PRESET", s["REWARD_PRESET"], sorted(PRESETS))
    for name in ("TP", "NNODES", "GPUS_PER_NODE", "OFFLINE_ITERATIONS", "MAX_NEW_TOKENS"):
        _positive_int(name, s[name])
    for name in ("SOURCE_LIMIT", "EVAL_LIMIT", "DIFFICULTY_MAX_NEW_TOKENS"):
        if s[name]:
            _positive_int(name, s[name])
    if s["SEED"] and (not s["SEED"].isdigit() or int(s["SEED"]) >= 2**32):
        raise ThinkJError(f"SEED={s['SEED']!r}: must be a whole number from 0 to {2**32 - 1}")
    for name in ("DEDUP_THRESHOLD", "DECONTAM_THRESHOLD"):
        if not 0 < _finite(name, s[name]) <= 1:
            raise ThinkJError(f"{name}={s[name]!r}: must be in (0, 1]")
    check_weight_settings(s)
    if not s["BENCHMARKS"].split():
        raise ThinkJError("BENCHMARKS='': name at least one benchmark")
    for bench in s["BENCHMARKS"].split():
        _one_of("BENCHMARKS", bench, list(BENCHMARKS))
    if not s["TABLES"].split():
        raise ThinkJError("TABLES='': name at least one table")
    for name in ("BENCHMARKS", "TABLES"):  # a name given twice would plan its stage twice
        twice = sorted({x for x in s[name].split() if s[name].split().count(x) > 1})
        if twice:
            raise ThinkJError(f"{name}={s[name]!r}: {', '.join(twice)} named more than once")
    for table in s["TABLES"].split():
        if table not in SPECS or table in PAPER_ONLY:
            raise ThinkJError(f"TABLES={s['TABLES']!r}: no table {table!r} to render from results; "
                              f"known: {', '.join(k for k in SPECS if k.isdigit())}")
    if s["W_CON"] and float(s["W_CON"]) > 0 and s["RL_ALGO"] != "grpo_consistent":
        raise ThinkJError(f"W_CON={s['W_CON']!r}: the consistency term needs both orders of a comparison in one step: "
                          "set RL_ALGO=grpo_consistent")
    _one_of("DEVICE", s["DEVICE"], ("gpu", "cpu"))
    if s["DEVICE"] == "gpu" and int(s["TP"]) > int(s["GPUS_PER_NODE"]):
        raise ThinkJError(f"TP={s['TP']}: more than the node's GPUS_PER_NODE={s['GPUS_PER_NODE']} (the inference "
                          "stages run GPUS_PER_NODE / TP workers of TP GPUs each)")
    for name in ("PAIR_LIMIT", "PAIR_MAX_NEW_TOKENS", "RL_STEPS"):
        if s[name]:
            _positive_int(name, s[name])
    _check_lf_overrides("SFT_OVERRIDES", s["SFT_OVERRIDES"])
    _check_lf_overrides("DPO_OVERRIDES", s["DPO_OVERRIDES"])
    _check_verl_overrides(s["VERL_OVERRIDES"])
    data = benchmark_data(s)
    if "synthetic" in s["BENCHMARKS"].split() and "synthetic" not in data:
        raise ThinkJError("BENCHMARKS names synthetic, which has no hub set: give its held-out pairs as "
                          "BENCHMARK_DATA='synthetic=<PreferencePair JSONL>'")
    if not s["TEACHER_KEY_ENV"].isidentifier():
        raise ThinkJError(f"TEACHER_KEY_ENV={s['TEACHER_KEY_ENV']!r}: must be an environment variable name")
    for name in ("MODEL_NAME", "TRAIN_DATA_NAME", "TEACHER_MODEL", "TEACHER_URL", "DEDUP_MODEL"):
        if not s[name].strip():
            raise ThinkJError(f"{name}='': must not be empty")


def check_weight_settings(s: Mapping[str, str]) -> None:
    """The W_* overrides through the rewards' one rule (:func:`thinkj.rewards.weights.check_weights`, via the
    preset): a weight the preset has, a finite number, >= 0, bounded."""
    from thinkj.rewards import PRESETS
    from thinkj.rewards.weights import RewardWeightError

    preset = PRESETS.lookup(s["REWARD_PRESET"])
    for name in WEIGHT_SETTINGS:
        if not s[name]:
            continue
        try:
            preset.weights({name.lower(): s[name]})
        except RewardWeightError as exc:
            if name.lower() not in preset.defaults:
                raise ThinkJError(f"{name}={s[name]!r}: reward preset {preset.name!r} has no weight {name.lower()} "
                                  f"(its weights: {', '.join(sorted(preset.defaults)) or 'none'})") from None
            raise ThinkJError(f"{name}={s[name]!r}: a reward weight {exc.detail.partition(', got ')[0]}") from None


def online_folder(s: dict[str, str]) -> str:
    """The online run's folder: algorithm, preset and weight overrides, so changing one makes a new run."""
    overrides = "".join(f"_{n.lower()}{s[n]}" for n in WEIGHT_SETTINGS if s[n])
    return f"online_{s['RL_ALGO']}_{s['REWARD_PRESET']}{overrides}"


def _with_settings(stages: list[Stage], s: dict[str, str]) -> list[Stage]:
    """Give each stage the settings its output depends on: its own and those of every stage before it."""
    seen: dict[str, str] = {}
    out = []
    data = benchmark_data(s)
    for stage in stages:
        kind = "eval" if stage.name.startswith("eval_") else stage.name
        if kind in ALWAYS_RUN:
            out.append(Stage(stage.name, stage.argv, stage.output, {"TABLES": s["TABLES"]}, stage.inputs))
            continue
        seen.update({name: record_value(name, s[name]) for name in STAGE_SETTINGS.get(kind, ())})
        if kind == "decontaminate":  # the benchmarks it checked bind every later stage (a new one redoes them)
            seen["DECONTAM_AGAINST"] = " ".join(a for i, a in enumerate(stage.argv) if stage.argv[i - 1] == "--against")
        extra = {}
        if kind == "eval":
            bench = stage.name[len("eval_"):]
            extra = {"BENCHMARK": bench, **({"BENCHMARK_DATA": data[bench]} if bench in data else {})}
        out.append(Stage(stage.name, stage.argv, stage.output, {**seen, **extra}, stage.inputs))
    return out


def record_value(name: str, value: str) -> str:
    """A setting as a completion record keeps it. A teacher on this machine (the CPU rehearsal's scripted R1) gets
    a free port each run: the port is where it listens, not which teacher it is, so it is left out."""
    if name == "TEACHER_URL":
        return _LOOPBACK_PORT.sub(r"\1:*", value)
    return value


_LOOPBACK_PORT = re.compile(r"^(https?://(?:127\.0\.0\.1|localhost|\[::1\])):[^/]*")


def plan(s: dict[str, str]) -> list[Stage]:
    """The ordered stages for one model and one learning mode."""
    _one_of("LEARNING", s["LEARNING"], ("online", "offline"))
    if s["TEACHER_URL"] == pipeline_prep.SCRIPTED:  # run_pipeline gives the served teacher's address
        s = {**s, "TEACHER_URL": pipeline_prep.SCRIPTED_PLACEHOLDER}
    run, py = Path(s["RUN_DIR"]), "python"
    data, train = run / "data", run / "train"
    source, hard, kept = data / "source.jsonl", data / "difficulty" / "kept.jsonl", data / "dedup" / "kept.jsonl"
    traces, clipped, seed = data / "traces" / "traces.jsonl", data / "clip" / "clipped.jsonl", data / "seed_set"
    clean = data / "decontaminate" / "kept.jsonl"
    against = decontaminate_against(s, clean.parent / "decontaminate.done.json")
    built = pipeline_prep.built_profile(s)  # the model stage's profile: what it will hold
    hub = built["model_name_or_path"] if built else profile_hub_id(s["MODEL_PROFILE"], fetched=s["DRY_RUN"] != "1")
    profile = Path(s["MODEL_PROFILE"]) if built else profile_path(s["MODEL_PROFILE"])
    budget = s["DIFFICULTY_MAX_NEW_TOKENS"] or str(built["max_new_tokens"] if built else profile_budget(s["MODEL_PROFILE"]))
    planned = pipeline_prep.planned_files(s)  # inputs even before they exist: their content enters the records
    lf_config = CONFIGS / "llamafactory"
    tp = ["--tp", s["TP"]] if s["JUDGE_BACKEND"] == "vllm" else []
    # the inference stages use every GPU of the node: GPUS_PER_NODE / TP workers (thinkj.inference.data_parallel)
    workers = int(s["GPUS_PER_NODE"]) // int(s["TP"]) if s["DEVICE"] == "gpu" else 1
    dp = ["--data-parallel", str(workers)] if workers > 1 else []
    # unset SEED passes nothing: each stage keeps its own default (STAGE_SEEDS)
    seed_opt, lf_seed = _opt("--seed", s["SEED"]), [f"seed={s['SEED']}"] if s["SEED"] else []
    # A local SOURCE_LOCATION is an input whose content the load stage's record keeps; a hub name is not local.
    local_source = {"source": Path(s["SOURCE_LOCATION"])} if s["SOURCE_LOCATION"] else {}
    judge_sft = train / "judge_sft"
    cpu = ["--device", "cpu"] if s["DEVICE"] == "cpu" else []
    sft_over, dpo_over = _split("SFT_OVERRIDES", s["SFT_OVERRIDES"]), _split("DPO_OVERRIDES", s["DPO_OVERRIDES"])
    bench_data = benchmark_data(s)
    stages = [
        *pipeline_prep.stages(s),
        Stage("load", [py, "-m", "data_prep.load_source", s["TRAIN_SOURCE"], "--out", str(source),
                       *_opt("--location", s["SOURCE_LOCATION"]), *_opt("--limit", s["SOURCE_LIMIT"])], source,
              inputs=local_source),
        Stage("difficulty", [py, "-m", "data_prep.difficulty", "--in", str(source), "--out", str(hard), "--model", hub,
                             "--backend", s["JUDGE_BACKEND"], *tp, *dp, "--k", "3", "--temperature", "1.0",
                             "--max-new-tokens", budget, *seed_opt],
              hard, inputs={"pairs": source, "profile": profile}),
        Stage("dedup", [py, "-m", "data_prep.dedup", "--in", str(hard), "--out", str(kept), "--model", s["DEDUP_MODEL"],
                        "--threshold", s["DEDUP_THRESHOLD"]], kept, inputs={"pairs": hard}),
        Stage("decontaminate", ["thinkj", "data", "decontaminate", str(kept), str(clean),
                                *[x for item in against for x in ("--against", item)], "--encoder",
                                s["DECONTAM_ENCODER"] or s["DEDUP_MODEL"], "--threshold", s["DECONTAM_THRESHOLD"],
                                *(["--report-only"] if s["DECONTAMINATE"] == "report" else [])],
              clean, inputs={"pairs": kept, **benchmark_inputs(against, planned)}),
        Stage("traces", ["thinkj", "data", "traces", str(clean), str(traces), "--model", s["TEACHER_MODEL"],
                         "--base-url", s["TEACHER_URL"], "--api-key-env", s["TEACHER_KEY_ENV"]], traces,
              inputs={"pairs": clean}),
        Stage("clip", ["thinkj", "data", "clip", str(traces), str(clipped), "--tokenizer", hub], clipped,
              inputs={"traces": traces, "profile": profile}),
        Stage("seed_set", ["thinkj", "data", "seed-set", str(clipped), str(seed)], seed / "dataset_info.json",
              inputs={"clipped": clipped}),
        Stage("judge_sft", ["thinkj", "train", "sft", "judge_sft", "--model", s["MODEL_PROFILE"], "--run-dir", str(train),
                            *cpu, f"dataset_dir={seed}", *lf_seed, *sft_over], judge_sft / "thinkj_train.json",
              inputs={"dataset": seed, "profile": profile, "config": lf_config / "judge_sft.yaml"}),
    ]
    if s["LEARNING"] == "offline":
        k = s["OFFLINE_ITERATIONS"]
        critic = train / "critic_sft"
        stages += [
            Stage("critic_sft", ["thinkj", "train", "sft", "critic_sft", "--model", s["MODEL_PROFILE"], "--run-dir",
                                 str(train), *cpu, f"dataset_dir={seed}", *lf_seed, *sft_over],
                  critic / "thinkj_train.json",
                  inputs={"dataset": seed, "profile": profile, "config": lf_config / "critic_sft.yaml"}),
            Stage("offline", ["thinkj", "train", "offline", "--pairs", str(seed / "rl_pairs.jsonl"), "--judge", str(judge_sft),
                              "--critic", str(critic), "--iterations", k, "--model", s["MODEL_PROFILE"],
                              "--run-dir", str(train), "--backend", s["JUDGE_BACKEND"], *cpu,
                              *_opt("--limit", s["PAIR_LIMIT"]), *_opt("--max-new-tokens", s["PAIR_MAX_NEW_TOKENS"]),
                              *seed_opt, *lf_seed, *dpo_over],
                  train / "offline" / "iterations.json",
                  inputs={"pairs": seed / "rl_pairs.jsonl", "judge": judge_sft, "critic": critic, "profile": profile,
                          "config": lf_config / "dpo.yaml"}),
        ]
        final, method = train / "offline" / f"iter_{k}" / "model", "offline (Critic-guided)"
    else:
        online = train / online_folder(s)
        weights = [x for name in WEIGHT_SETTINGS if s[name] for x in ("--weight", f"{name.lower()}={s[name]}")]
        verl_seed = verl_seed_overrides(int(s["SEED"])) if s["SEED"] else []
        rl_data = seed / "rl.parquet"
        if s["RL_ALGO"] == "grpo_consistent":  # each comparison and its swapped twin side by side
            rl_data = seed / "rl_twins.parquet"
            stages.append(Stage("twins", ["thinkj", "data", "verl-parquet", str(seed / "rl_pairs.jsonl"), str(rl_data),
                                          "--twins", *seed_opt], rl_data, inputs={"pairs": seed / "rl_pairs.jsonl"}))
        stages += [
            Stage("online", ["thinkj", "train", "rl", "--engine", "verl", "--algo", s["RL_ALGO"], "--model", str(judge_sft),
                             "--data", str(rl_data), "--out", str(online), "--preset", s["REWARD_PRESET"],
                             *weights, "--nnodes", s["NNODES"], "--gpus-per-node", s["GPUS_PER_NODE"], *cpu,
                             *verl_seed, *([f"trainer.total_training_steps={s['RL_STEPS']}"] if s["RL_STEPS"] else []),
                             *_split("VERL_OVERRIDES", s["VERL_OVERRIDES"])],
                  online / "checkpoints",
                  inputs={"data": rl_data, "judge": judge_sft, "config": _verl_config(s["RL_ALGO"])}),
            Stage("merge", [py, "-m", "thinkj.pipeline", "merge-verl", str(online / "checkpoints"), str(online / "hf")],
                  online / "hf" / "config.json"),
        ]
        final, method = online / "hf", {"grpo": "online (GRPO)", "ppo": "online (PPO)",
                                        "reinforce_pp": "online (Reinforce++)",
                                        "grpo_consistent": "online (GRPO, both orders)"}.get(s["RL_ALGO"], s["RL_ALGO"])
    evals = run / "eval" / Path(final).relative_to(train).as_posix().replace("/", "_")
    tags = {"model": s["MODEL_NAME"], "method": method, "train_data": s["TRAIN_DATA_NAME"]}
    tags.update({name.lower(): s[name] for name in ("W_FMT", "W_STR", "W_CON") if s[name]})
    from thinkj.evaluation.registry import get_benchmark
    if s["LEARNING"] == "offline":
        tags["iteration"] = s["OFFLINE_ITERATIONS"]
    tag_args = [x for k, v in tags.items() for x in ("--tag", f"{k}={v}")]
    for bench in s["BENCHMARKS"].split():
        stages.append(Stage(f"eval_{bench}", ["thinkj", "eval", "run", bench, "--model", str(final), "--backend",
                                              s["JUDGE_BACKEND"], "--out", str(evals / bench), *tag_args,
                                              "--max-new-tokens", s["MAX_NEW_TOKENS"], *_opt("--limit", s["EVAL_LIMIT"]),
                                              *seed_opt, *_opt("--data", bench_data.get(bench, "")),
                                              *(["--backend-arg", f"tensor_parallel_size={s['TP']}"]
                                                if s["JUDGE_BACKEND"] == "vllm" else []),
                                              *(dp if get_benchmark(bench).run is None else [])],  # own runner: 1
                            evals / bench / f"{bench}.results.json",
                            inputs={"model": final, **({"data": Path(bench_data[bench])} if bench in bench_data and (
                                Path(bench_data[bench]).exists() or Path(bench_data[bench]) in planned) else {})}))
    tables = run / "tables"
    stages.append(Stage("tables", ["thinkj", "tables", *s["TABLES"].split(), "--results", str(run / "eval"),
                                   "--out", str(tables)], tables / f"table{s['TABLES'].split()[-1]}.md"))
    return _with_settings(stages, s)


def verl_seed_overrides(seed: int) -> list[str]:
    """verl's Hydra overrides for one seed (its key names: :func:`thinkj.online.verl_launch.seed_overrides`)."""
    from thinkj.online.verl_launch import seed_overrides

    return seed_overrides(seed)


def _verl_config(algo: str) -> Path:
    from thinkj.online.verl_launch import ALGOS

    return CONFIGS / "verl" / f"{ALGOS[algo]}.yaml"


def merge_verl(checkpoints: Path, out: Path) -> None:
    """Merge verl's newest actor checkpoint (``latest_checkpointed_iteration.txt``) into an HF model folder."""
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    if not marker.exists():
        raise FileNotFoundError(f"{marker} missing: the verl run did not save a checkpoint")
    actor = checkpoints / f"global_step_{marker.read_text().strip()}" / "actor"
    script = Path(__file__).resolve().parent.parent / "scripts" / "merge_verl_checkpoint.sh"
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = subprocess.run(["bash", str(script), str(actor), str(tmp)])
    if proc.returncode != 0:
        raise StageFailed(f"merging {actor} into {out} failed (exit {proc.returncode})")
    promote(tmp, out)  # a half-merged folder never sits under the final name; the old one goes only after the swap


def _counts(output: Path) -> dict[str, object]:
    """What the completion record says the stage made: lines of a JSONL, files of a folder, the stage summary."""
    counts: dict[str, object] = {}
    if output.is_file() and output.suffix == ".jsonl":
        with open(output, "rb") as handle:
            counts["rows"] = sum(1 for line in handle if line.strip())
    elif output.is_dir():
        counts["files"] = sum(1 for p in output.rglob("*") if p.is_file())
    summary = output.with_suffix(".summary.json") if output.suffix else output / f"{output.name}.summary.json"
    if summary.is_file():
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
            counts.update({k: data[k] for k in ("n_in", "n_out") if k in data})
        except ValueError:
            pass
    return counts


def input_fingerprints(stage: Stage) -> dict[str, str | None]:
    """What each local input of the stage holds (:func:`thinkj.stage_runner.fingerprints`); a local source folder
    with all its files."""
    return fingerprints(stage.inputs, recursive=("source",))


def write_record(stage: Stage, inputs: dict[str, str | None] | None = None) -> Path:
    """The stage's last act: its completion record (settings, inputs' content, command, counts), by temp file +
    rename, through the one record writer (:func:`thinkj.stage_runner.write_record`). ``inputs`` are the
    fingerprints taken when the stage started (now, when not given)."""
    return stage_runner.write_record(stage.record, stage.name, stage.settings,
                                     input_fingerprints(stage) if inputs is None else inputs, stage.inputs,
                                     **_details(stage))


def _details(stage: Stage) -> dict[str, object]:
    return {"argv": stage.argv, "output": str(stage.output), "counts": _counts(stage.output)}


# A record made with other settings or on other input content stops the run with this advice.
REDO_HINT = "use another RUN_DIR, or delete that record to redo the stage and everything after it"


def _step(stage: Stage) -> stage_runner.Step:
    """The stage as the shared loop runs it: its command, output shown and logged, then the output checked."""

    def work(log: Path) -> dict[str, object]:
        argv = [sys.executable if stage.argv[0] == "python" else stage.argv[0], *stage.argv[1:]]
        status = stage_runner.run_logged(argv, log)
        if status != 0:
            raise StageFailed(f"stage {stage.name} failed (exit {status}); its log: {log}")
        if not stage.output.exists():
            raise StageFailed(f"stage {stage.name} exited 0 but did not write {stage.output}; its log: {log}")
        return _details(stage)

    return stage_runner.Step(stage.name, stage.record, stage.settings, work, inputs=lambda: stage.inputs,
                             recursive=("source",), always=stage.name in ALWAYS_RUN,
                             brief=lambda record: " ".join(f"{k}={v}" for k, v in (record.get("counts") or {}).items()))


def is_done(stage: Stage) -> bool:
    """True when the stage's completion record exists and was made with the same settings on the same input
    content; a record made otherwise is an error naming the difference (reusing it would hand later stages
    another experiment's output). A damaged record is not a completion record."""
    return _step(stage).check(stage_runner.REFUSE, REDO_HINT)[0] is not None


def run_pipeline(s: dict[str, str], out=sys.stdout) -> list[str]:
    """Run (or with DRY_RUN=1 print) the stages in order; returns the names of the stages that ran. The loop,
    the records and the logs are :mod:`thinkj.stage_runner`'s, shared with the demo."""
    dry = s.get("DRY_RUN") == "1"
    if not dry:  # before validate, which reads the fetched folder
        pipeline_prep.check(s)
        pipeline_prep.fetch_catalog_model(s, out)
    validate(s)
    stages = plan(s)
    teacher_needed = not dry and not all(is_done(st) for st in stages if st.name == "traces")
    with pipeline_prep.scripted_teacher(s, teacher_needed, out) as served:  # stopped however the run ends
        return _run_stages(served, out)


def _run_stages(s: dict[str, str], out) -> list[str]:
    dry = s["DRY_RUN"] == "1"
    stages = plan(s)
    key = s["TEACHER_KEY_ENV"]
    if not dry and not os.environ.get(key) and not all(is_done(st) for st in stages if st.name == "traces"):
        # Checked now, not hours later when the difficulty filter is done and the traces stage starts.
        raise ThinkJError(f"TEACHER_KEY_ENV={key}: the variable {key} holding the teacher's API key is not set "
                          "(the traces stage needs it; any value for a local teacher that takes none)")
    if not dry and any(st.name == "online" and not is_done(st) for st in stages):
        # now, not after the data stages: a missing node or no cluster at all is found in seconds
        from thinkj.online.ray_cluster import preflight

        print(f"# {preflight(int(s['NNODES']), int(s['GPUS_PER_NODE']), s['DEVICE'])}", file=out, flush=True)
    by_name = {stage.name: stage for stage in stages}

    def announce(step: stage_runner.Step, event: str) -> None:
        stage = by_name[step.name]
        if event == "skip":
            print(f"# skip {stage.name}: done ({stage.record})", file=out, flush=True)
        else:
            print(f"# stage {stage.name} -> {stage.output}", file=out, flush=True)
            print(stage.line, file=out, flush=True)

    logs = Path(s["RUN_DIR"]) / "logs"
    outcome = stage_runner.run_steps([_step(stage) for stage in stages], policy=stage_runner.REFUSE,
                                     hint=REDO_HINT, logs=logs, out=out, dry=dry, announce=announce)
    if not dry:  # every stage's wall and CPU seconds (a skipped one's as recorded), as the demo's demo_stages.json
        write_json(logs / "stage_times.json", stage_runner.timings_record(
            outcome.seconds, outcome.cpu_seconds, ran=outcome.ran, skipped=outcome.skipped))
    return outcome.ran


def run_recipe(recipe: str | os.PathLike | None, sets: Iterable[str] = (), *, dry_run: bool = False) -> list[str]:
    """``thinkj run RECIPE``: resolve the settings, then validate and run (or print) the pipeline. A value the
    pipeline refuses is named with where it came from (``TP='0': ... (from configs/recipes/x.yaml: tp)``)."""
    if recipe is not None and not Path(recipe).is_file():
        raise ThinkJError(f"{recipe}: no such recipe file (the recipes: configs/recipes/*.yaml)")
    resolved = resolve(recipe, sets=[*sets, *(["dry_run=1"] if dry_run else [])])
    try:
        return run_pipeline(resolved.values)
    except ThinkJError as exc:
        name = re.match(r"[A-Z][A-Z0-9_]*", str(exc))
        suffix = resolved.where(name.group(0)) if name and name.group(0) in BY_NAME else ""
        if not suffix:
            raise
        raise ThinkJError(f"{exc}{suffix}") from None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge-verl"] and len(argv) == 3:
        merge_verl(Path(argv[1]), Path(argv[2]))
    elif argv[:1] == ["build-model"] and len(argv) == 3:
        pipeline_prep.build_model(argv[1], Path(argv[2]))
    elif argv == ["--print-env"]:
        for name, value in settings().items():
            print(f"{name}={value}    # {DEFAULTS[name][1]}")
            if name == "SEED":
                print("\n".join(f"#   {stage}: {seed}" for stage, seed in STAGE_SEEDS.items()))
    elif not argv:
        run_pipeline(settings())
    else:
        sys.exit("usage: python -m thinkj.pipeline [--print-env | merge-verl CHECKPOINTS OUT | build-model NAME DIR]")


if __name__ == "__main__":
    exit_on_user_error(main)
