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
from thinkj.models.profiles import profile_budget, profile_hub_id, profile_path
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
from thinkj.pipeline_learn import (
    OFFLINE_BRANCH,
    Where,
    eval_benchmark,
    eval_stages,
    hf_args,
    learning_stages,
)
from thinkj.pipeline_learn import online_folder as online_folder  # its home before pipeline_learn
from thinkj.pipeline_learn import verl_seed_overrides as verl_seed_overrides
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
    "difficulty": ("MODEL_PROFILE", "JUDGE_BACKEND", "SEED", "DIFFICULTY_MAX_NEW_TOKENS", "DIFFICULTY_LIMIT",
                   "DIFFICULTY_BATCH", "CPU_BF16"),
    "dedup": ("DEDUP_MODEL", "DEDUP_THRESHOLD", "DEDUP_TEXT_FIELD"),
    "decontaminate": ("DECONTAMINATE", "DECONTAM_ENCODER", "DECONTAM_THRESHOLD"),  # + what it checked: DECONTAM_AGAINST
    "traces": ("TEACHER_MODEL", "TEACHER_URL"),
    "judge_sft": ("SFT_OVERRIDES",),
    "critic_data": ("CRITIC_WRONG_SIDE_EVERY",),
    "critic_sft": ("CRITIC_OVERRIDES",),
    "offline_pool": ("OFFLINE_PAIRS",),
    "offline": ("OFFLINE_ITERATIONS", "DPO_OVERRIDES", "PAIR_LIMIT", "PAIR_MAX_NEW_TOKENS", "PAIR_BATCH"),
    "rl_data": ("RL_DATA",),
    "rl_split": ("RL_DATA", "RL_VAL_FRACTION"),
    "online": ("RL_ENGINE", "RL_DATA", "RL_ALGO", "REWARD_PRESET", "W_ACC", "W_FMT", "W_STR", "W_CON", "RL_STEPS",
               "VERL_OVERRIDES", "TRL_OVERRIDES"),
    # + the settings of the stage that made the judged model, and BENCHMARK_DATA's entry
    "eval": ("MODEL_NAME", "TRAIN_DATA_NAME", "EVAL_LIMIT", "MAX_NEW_TOKENS", "EVAL_BATCH"),
}
# The tables stage reads every results file under <RUN_DIR>/eval (the default run's and each ablation's): it
# depends on no single run's settings, and it runs every time (seconds) so the tables show every finished run.
ALWAYS_RUN = ("tables", "compare")
# What each seeded stage uses when SEED is unset: the seeds the runs used before SEED existed, kept so that
# those runs stay reproducible. The traces stage (the teacher's API) takes no seed; dedup, clip, seed_set,
# merge and tables are deterministic.
STAGE_SEEDS: dict[str, str] = {
    "difficulty": "0 (data_prep.difficulty --seed)",
    "judge_sft": "42 (LlamaFactory's seed)",
    "critic_sft": "42 (LlamaFactory's seed)",
    "offline": "0 for the critic-guided pairs (--seed), 42 for DPO (LlamaFactory's seed)",
    "online": "verl's: data.seed null (the shuffle's torch generator at its default seed), rollout.seed 42, "
              "actor / critic data_loader_seed 42; TRL's (RL_ENGINE=trl): 0 (GRPORun.seed)",
    "eval": "0 (thinkj eval run --seed)",
}
LEARNING = ("online", "offline", "both")
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
    _one_of("LEARNING", s["LEARNING"], LEARNING)
    _one_of("RL_ALGO", s["RL_ALGO"], RL_ALGOS)
    check_learning_settings(s)
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


def check_learning_settings(s: Mapping[str, str]) -> None:
    """The settings of the learning and evaluation stages (:mod:`thinkj.pipeline_learn`) and the rules between them."""
    from thinkj.pipeline_learn import ROWS

    _one_of("RL_ENGINE", s["RL_ENGINE"], ("verl", "trl"))
    _one_of("RL_DATA", s["RL_DATA"], ("seed_set", "source"))
    _one_of("DEDUP_TEXT_FIELD", s["DEDUP_TEXT_FIELD"], ("instruction", "instruction+responses"))
    _one_of("OFFLINE_PAIRS", s["OFFLINE_PAIRS"], ("seed_set", "outside_seed_set"))
    for name in ("CPU_BF16", "IN_PROCESS"):
        _one_of(name, s[name], ("0", "1"))
    for name in ("DIFFICULTY_LIMIT", "DIFFICULTY_BATCH", "PAIR_BATCH", "EVAL_BATCH"):
        if s[name]:
            _positive_int(name, s[name])
    if not 0 <= _finite("RL_VAL_FRACTION", s["RL_VAL_FRACTION"] or "0") < 1:
        raise ThinkJError(f"RL_VAL_FRACTION={s['RL_VAL_FRACTION']!r}: must be in [0, 1) (0: no held-out pairs)")
    every = s["CRITIC_WRONG_SIDE_EVERY"]
    if not every.isdigit():
        raise ThinkJError(f"CRITIC_WRONG_SIDE_EVERY={every!r}: must be a whole number >= 0 (0: none)")
    if int(every) and not s["SYNTHETIC_TASK"]:
        raise ThinkJError(f"CRITIC_WRONG_SIDE_EVERY={every}: wrong-side critic examples are written by a generated "
                          "task's rules: set SYNTHETIC_TASK, or 0")
    if s["RL_ENGINE"] == "trl" and s["RL_ALGO"] not in ("grpo", "grpo_consistent"):
        raise ThinkJError(f"RL_ENGINE=trl: runs GRPO only (RL_ALGO grpo or grpo_consistent), not {s['RL_ALGO']!r}; "
                          "PPO and Reinforce++ run with RL_ENGINE=verl")
    from thinkj.overrides import parse_key_values

    for key in parse_key_values(_split("TRL_OVERRIDES", s["TRL_OVERRIDES"]), "TRL_OVERRIDES",
                                example="a GRPORun or GRPOConfig field"):
        if not key.isidentifier():
            raise ThinkJError(f"TRL_OVERRIDES {key}: not a GRPORun or GRPOConfig field name")
    _check_lf_overrides("CRITIC_OVERRIDES", s["CRITIC_OVERRIDES"])
    rows = s["EVAL_ROWS"].split()
    for row in rows:
        _one_of("EVAL_ROWS", row, ROWS)
    if len(set(rows)) < len(rows):
        raise ThinkJError(f"EVAL_ROWS={s['EVAL_ROWS']!r}: a row named more than once")
    ran = {"offline": ("offline", "both"), "online": ("online", "both")}
    for row, learning in ran.items():
        if row in rows and s["LEARNING"] not in learning:
            raise ThinkJError(f"EVAL_ROWS names {row}, which LEARNING={s['LEARNING']} does not train: set LEARNING="
                              f"{learning[-1]}")


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


def _with_settings(stages: list[Stage], s: dict[str, str]) -> list[Stage]:
    """Give each stage the settings its output depends on: its own and those of every stage it builds on -- every
    earlier stage, except that the online branch does not depend on the offline branch's settings, and an
    evaluation depends on its model's stage (and its benchmark's data)."""
    seen: dict[str, str] = {}
    offline: dict[str, str] = {}  # the offline branch's own (OFFLINE_BRANCH)
    made: dict[str, tuple[Stage, dict[str, str]]] = {}  # stage -> (it, its settings): for evaluating its model
    out = []
    data = benchmark_data(s)
    for stage in stages:
        kind = "eval" if stage.name.startswith("eval_") else stage.name
        if kind in ALWAYS_RUN:
            out.append(Stage(stage.name, stage.argv, stage.output, {"TABLES": s["TABLES"]}, stage.inputs))
            continue
        own = {name: record_value(name, s[name]) for name in STAGE_SETTINGS.get(kind, ())}
        if kind == "decontaminate":  # the benchmarks it checked bind every later stage (a new one redoes them)
            own["DECONTAM_AGAINST"] = " ".join(a for i, a in enumerate(stage.argv) if stage.argv[i - 1] == "--against")
        if kind == "eval":
            bench = eval_benchmark(stage)
            model = Path(stage.argv[stage.argv.index("--model") + 1])
            # the stage that made the model: the last whose folder holds it (none: the base model)
            folder = [n for n, (st, _) in made.items() if model.is_relative_to(st.record.parent)]
            upstream = made[folder[-1]][1] if folder else {"MODEL_PROFILE": s["MODEL_PROFILE"]}
            settings = {**upstream, **own, "BENCHMARK": bench, **({"BENCHMARK_DATA": data[bench]} if bench in data else {})}
        elif kind in OFFLINE_BRANCH:
            offline.update(own)
            settings = {**seen, **offline}
        else:
            seen.update(own)
            settings = dict(seen)
        made[stage.name] = (stage, settings)
        out.append(Stage(stage.name, stage.argv, stage.output, settings, stage.inputs))
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
    _one_of("LEARNING", s["LEARNING"], LEARNING)
    if s["TEACHER_URL"] == pipeline_prep.SCRIPTED:  # run_pipeline gives the served teacher's address
        s = {**s, "TEACHER_URL": pipeline_prep.SCRIPTED_PLACEHOLDER}
    run, py = Path(s["RUN_DIR"]), "python"
    data = run / "data"
    source, hard, kept = data / "source.jsonl", data / "difficulty" / "kept.jsonl", data / "dedup" / "kept.jsonl"
    traces, clipped, seed = data / "traces" / "traces.jsonl", data / "clip" / "clipped.jsonl", data / "seed_set"
    clean = data / "decontaminate" / "kept.jsonl"
    against = decontaminate_against(s, clean.parent / "decontaminate.done.json")
    built = pipeline_prep.built_profile(s)  # the model stage's profile: what it will hold
    hub = built["model_name_or_path"] if built else profile_hub_id(s["MODEL_PROFILE"], fetched=s["DRY_RUN"] != "1")
    profile = Path(s["MODEL_PROFILE"]) if built else profile_path(s["MODEL_PROFILE"])
    budget = s["DIFFICULTY_MAX_NEW_TOKENS"] or str(built["max_new_tokens"] if built else profile_budget(s["MODEL_PROFILE"]))
    planned = pipeline_prep.planned_files(s)  # inputs even before they exist: their content enters the records
    tp = ["--tp", s["TP"]] if s["JUDGE_BACKEND"] == "vllm" else []
    # the inference stages use every GPU of the node: GPUS_PER_NODE / TP workers (thinkj.inference.data_parallel)
    workers = int(s["GPUS_PER_NODE"]) // int(s["TP"]) if s["DEVICE"] == "gpu" else 1
    dp = ["--data-parallel", str(workers)] if workers > 1 else []
    # unset SEED passes nothing: each stage keeps its own default (STAGE_SEEDS)
    seed_opt = _opt("--seed", s["SEED"])
    # A local SOURCE_LOCATION is an input whose content the load stage's record keeps; a hub name is not local.
    local_source = {"source": Path(s["SOURCE_LOCATION"])} if s["SOURCE_LOCATION"] else {}
    bench_data = benchmark_data(s)
    where = Where(run, source, seed, hub, profile, frozenset(planned), bool(built) or Path(hub).is_dir())
    stages = [
        *pipeline_prep.stages(s),
        Stage("load", [py, "-m", "data_prep.load_source", s["TRAIN_SOURCE"], "--out", str(source),
                       *_opt("--location", s["SOURCE_LOCATION"]), *_opt("--limit", s["SOURCE_LIMIT"])], source,
              inputs=local_source),
        Stage("difficulty", [py, "-m", "data_prep.difficulty", "--in", str(source), "--out", str(hard), "--model", hub,
                             "--backend", s["JUDGE_BACKEND"], *tp, *dp, "--k", "3", "--temperature", "1.0",
                             "--max-new-tokens", budget, *seed_opt, *_opt("--limit", s["DIFFICULTY_LIMIT"]),
                             *hf_args(s, s["DIFFICULTY_BATCH"])],
              hard, inputs={"pairs": source, "profile": profile}),
        Stage("dedup", [py, "-m", "data_prep.dedup", "--in", str(hard), "--out", str(kept), "--model", s["DEDUP_MODEL"],
                        "--threshold", s["DEDUP_THRESHOLD"],
                        *(["--text-field", s["DEDUP_TEXT_FIELD"]] if s["DEDUP_TEXT_FIELD"] != "instruction" else [])],
              kept, inputs={"pairs": hard}),
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
    ]
    learning, models, methods = learning_stages(s, where)
    stages += learning + eval_stages(s, where, models, methods, bench_data, dp)
    tables = run / "tables"
    stages.append(Stage("tables", ["thinkj", "tables", *s["TABLES"].split(), "--results", str(run / "eval"),
                                   "--out", str(tables)], tables / f"table{s['TABLES'].split()[-1]}.md"))
    return _with_settings(stages, s)


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


def _program(name: str) -> str:
    """A stage's program from this installation: ``python`` is this interpreter, a console script (``thinkj``) the one
    beside it when there is one (a run started as ``.venv/bin/thinkj run`` without the venv on PATH finds it)."""
    if name == "python":
        return sys.executable
    local = Path(sys.executable).parent / name
    return str(local) if "/" not in name and local.is_file() else name


def _step(stage: Stage, in_process: bool = False) -> stage_runner.Step:
    """The stage as the shared loop runs it: its command, output shown and logged (or, ``in_process``, run inside
    this process with its output in the log), then the output checked."""

    def work(log: Path) -> dict[str, object]:
        command = [_program(stage.argv[0]), *stage.argv[1:]]  # the same program in process or as a child
        status = (stage_runner.run_in_process if in_process else stage_runner.run_logged)(command, log)
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
    return _step(stage).check(REDO_HINT)[0] is not None


def run_pipeline(s: dict[str, str], out=sys.stdout) -> list[str]:
    """Run (or with DRY_RUN=1 print) the stages in order; returns the names of the stages that ran. The loop,
    the records and the logs are :mod:`thinkj.stage_runner`'s."""
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
    if not dry and s["RL_ENGINE"] == "verl" and any(st.name == "online" and not is_done(st) for st in stages):
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
    in_process = s["IN_PROCESS"] == "1"
    outcome = stage_runner.run_steps([_step(stage, in_process) for stage in stages],
                                     hint=REDO_HINT, logs=logs, out=out, dry=dry, announce=announce)
    if not dry:  # every stage's wall and CPU seconds (a skipped one's as recorded)
        times = stage_runner.timings_record(outcome.seconds, outcome.cpu_seconds, ran=outcome.ran,
                                            skipped=outcome.skipped)
        write_json(logs / "stage_times.json", times)
        compared = [st.output for st in stages if st.name == "compare" and st.output.is_file()]
        if compared:  # the rows' table on the terminal (the stage's own output went to its log)
            from thinkj.evaluation.row_compare import print_results

            print_results(json.loads(compared[0].read_text(encoding="utf-8")))
        print(f"\nstage time {times['total_seconds']:.0f} s wall, {times['total_cpu_seconds']:.0f} s CPU; stage "
              f"logs: {logs}/<stage>.log", file=out, flush=True)
    return outcome.ran


def run_recipe(recipe: str | os.PathLike | None, sets: Iterable[str] = (), *, dry_run: bool = False) -> list[str]:
    """``thinkj run RECIPE``: resolve the settings, then validate and run (or print) the pipeline. A value the
    pipeline refuses is named with where it came from (``TP='0': ... (from configs/recipes/x.yaml: tp)``)."""
    if recipe is not None and not Path(recipe).is_file():
        raise ThinkJError(f"{recipe}: no such recipe file (the recipes: configs/recipes/*.yaml)")
    if dry_run:  # --dry-run wins over a dry_run= item (one key, given once to the parser)
        sets = [item for item in sets if item.partition("=")[0].strip() != "dry_run"] + ["dry_run=1"]
    resolved = resolve(recipe, sets=list(sets))
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
