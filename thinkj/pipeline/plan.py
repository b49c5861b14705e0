"""The stage list: every stage of one run, in order, each with the settings its output depends on.

:func:`plan` lays out the phases -- what a run prepares for itself (:mod:`thinkj.pipeline.prep`), the data stages
(load -> difficulty -> dedup -> decontaminate -> traces -> clip -> seed_set, below), the learning phase
(:mod:`thinkj.pipeline.learn`), the evaluation phase (:mod:`thinkj.pipeline.evaluate`) and the tables -- and
:func:`validate` checks every setting before stage 1. Running the list is :mod:`thinkj.pipeline.run`'s.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.models.profiles import profile_budget, profile_hub_id, profile_path
from thinkj.pipeline import prep
from thinkj.pipeline.checks import (
    _check_lf_overrides,
    _check_verl_overrides,
    _finite,
    _one_of,
    _positive_int,
    benchmark_data,
    benchmark_inputs,
    decontaminate_against,
)
from thinkj.pipeline.evaluate import eval_benchmark, eval_stages
from thinkj.pipeline.learn import (
    OFFLINE_BRANCH,
    check_learning_settings,
    check_verl_layout,
    learning_stages,
    online_folder,
)
from thinkj.pipeline.settings import WEIGHT_SETTINGS
from thinkj.pipeline.stage import Stage, Where, hf_args, opt

# Settings that change what a stage produces, by stage (a stage also depends on every stage before it).
# TP, NNODES, GPUS_PER_NODE, DEVICE, LF_PROCESSES, TEACHER_KEY_ENV, RUN_DIR and DRY_RUN change how a stage runs, not
# its result (LF_PROCESSES: the same model to 5e-7 of the update, tests/test_lf_deepspeed.py).
# SEED enters at difficulty, the first seeded stage; every later stage depends on it through that one.
STAGE_SETTINGS: dict[str, tuple[str, ...]] = {
    "model": ("BUILD_MODEL",),  # the stages a run prepares for itself (thinkj.pipeline.prep), each when asked for
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


def validate(s: dict[str, str]) -> None:
    """Check every setting before any stage runs; the first bad one fails in one line naming its variable."""
    from thinkj.evaluation.registry import BENCHMARKS
    from thinkj.rewards import PRESETS
    from thinkj.tables.layouts import PAPER_ONLY, SPECS

    _one_of("DRY_RUN", s["DRY_RUN"], ("0", "1"))
    prep.check(s)
    if not prep.built_profile(s):  # a profile the model stage writes is checked by that stage
        profile_hub_id(s["MODEL_PROFILE"], fetched=s["DRY_RUN"] != "1")
    _one_of("TRAIN_SOURCE", s["TRAIN_SOURCE"], SOURCES)
    _one_of("JUDGE_BACKEND", s["JUDGE_BACKEND"], ("vllm", "hf"))
    _one_of("LEARNING", s["LEARNING"], LEARNING)
    _one_of("RL_ALGO", s["RL_ALGO"], RL_ALGOS)
    check_learning_settings(s)
    _one_of("DECONTAMINATE", s["DECONTAMINATE"], ("drop", "report"))
    _one_of("REWARD_PRESET", s["REWARD_PRESET"], sorted(PRESETS))
    for name in ("TP", "NNODES", "GPUS_PER_NODE", "OFFLINE_ITERATIONS", "MAX_NEW_TOKENS", "LF_PROCESSES"):
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
    if s["DEVICE"] == "gpu" and int(s["LF_PROCESSES"]) != 1:
        raise ThinkJError(f"LF_PROCESSES={s['LF_PROCESSES']}: a DEVICE=cpu setting; on GPUs each LlamaFactory stage "
                          "runs one process per GPU of the node")
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
    check_verl_layout(s)  # last: it composes verl's config from settings checked above


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
    if s["TEACHER_URL"] == prep.SCRIPTED:  # run_pipeline gives the served teacher's address
        s = {**s, "TEACHER_URL": prep.SCRIPTED_PLACEHOLDER}
    run, py = Path(s["RUN_DIR"]), "python"
    data = run / "data"
    source, hard, kept = data / "source.jsonl", data / "difficulty" / "kept.jsonl", data / "dedup" / "kept.jsonl"
    traces, clipped, seed = data / "traces" / "traces.jsonl", data / "clip" / "clipped.jsonl", data / "seed_set"
    clean = data / "decontaminate" / "kept.jsonl"
    against = decontaminate_against(s, clean.parent / "decontaminate.done.json")
    built = prep.built_profile(s)  # the model stage's profile: what it will hold
    hub = built["model_name_or_path"] if built else profile_hub_id(s["MODEL_PROFILE"], fetched=s["DRY_RUN"] != "1")
    profile = Path(s["MODEL_PROFILE"]) if built else profile_path(s["MODEL_PROFILE"])
    budget = s["DIFFICULTY_MAX_NEW_TOKENS"] or str(built["max_new_tokens"] if built else profile_budget(s["MODEL_PROFILE"]))
    planned = prep.planned_files(s)  # inputs even before they exist: their content enters the records
    tp = ["--tp", s["TP"]] if s["JUDGE_BACKEND"] == "vllm" else []
    # the inference stages use every GPU of the node: GPUS_PER_NODE / TP workers (thinkj.inference.data_parallel)
    workers = int(s["GPUS_PER_NODE"]) // int(s["TP"]) if s["DEVICE"] == "gpu" else 1
    dp = ["--data-parallel", str(workers)] if workers > 1 else []
    # unset SEED passes nothing: each stage keeps its own default (STAGE_SEEDS)
    seed_opt = opt("--seed", s["SEED"])
    # A local SOURCE_LOCATION is an input whose content the load stage's record keeps; a hub name is not local.
    local_source = {"source": Path(s["SOURCE_LOCATION"])} if s["SOURCE_LOCATION"] else {}
    bench_data = benchmark_data(s)
    where = Where(run, source, seed, hub, profile, frozenset(planned), bool(built) or Path(hub).is_dir())
    stages = [
        *prep.stages(s),
        Stage("load", [py, "-m", "data_prep.load_source", s["TRAIN_SOURCE"], "--out", str(source),
                       *opt("--location", s["SOURCE_LOCATION"]), *opt("--limit", s["SOURCE_LIMIT"])], source,
              inputs=local_source),
        Stage("difficulty", [py, "-m", "data_prep.difficulty", "--in", str(source), "--out", str(hard), "--model", hub,
                             "--backend", s["JUDGE_BACKEND"], *tp, *dp, "--k", "3", "--temperature", "1.0",
                             "--max-new-tokens", budget, *seed_opt, *opt("--limit", s["DIFFICULTY_LIMIT"]),
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
    return _online_cell(_with_settings(stages, s), s)


def _online_cell(stages: list[Stage], s: Mapping[str, str]) -> list[Stage]:
    """Mark the stages of this run's online run (those whose record, or the model they judge, lies in its folder,
    which its settings name, and the rows' table of that model, ``compare/<folder>``): runs that share a RUN_DIR and
    differ in those settings run them side by side, so their logs go to a folder of their own (:attr:`Stage.log`)."""
    if s["LEARNING"] == "offline":
        return stages
    name = online_folder(s)
    own = (Path(s["RUN_DIR"]) / "train" / name, Path(s["RUN_DIR"]) / "compare" / name)
    return [replace(st, cell=name)
            if any(p.is_relative_to(o) for p in (st.record, st.inputs.get("model", st.record)) for o in own) else st
            for st in stages]
