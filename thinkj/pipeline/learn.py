"""The learning phase, after the seed set: judge SFT, then offline and / or online learning.

Planned by :func:`learning_stages` for :func:`thinkj.pipeline.plan.plan`, from the settings alone (what each one
means: :mod:`thinkj.pipeline.settings`). ``LEARNING`` picks the branches -- ``online`` (RL from the SFT judge, verl
or TRL), ``offline`` (critic SFT, critic-guided pairs, DPO with the SFT term) or ``both``, each from the one SFT
judge; the models it makes are what the evaluation phase (:mod:`thinkj.pipeline.evaluate`) judges, row by row.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.pipeline.checks import _check_lf_overrides, _finite, _one_of, _positive_int, _split
from thinkj.pipeline.evaluate import ROWS
from thinkj.pipeline.settings import WEIGHT_SETTINGS
from thinkj.pipeline.stage import Stage, Where, bf16, hf_args, opt

# The offline branch's stages: the online branch does not depend on their settings (LEARNING=both).
OFFLINE_BRANCH = ("critic_data", "critic_sft", "offline_pool", "offline")
METHODS = {"grpo": "online (GRPO)", "ppo": "online (PPO)", "reinforce_pp": "online (Reinforce++)",
           "grpo_consistent": "online (GRPO, both orders)"}
WRONG_SIDE_DATASET = "thinkj_critic_wrong_side"


def online_folder(s: Mapping[str, str]) -> str:
    """The online run's folder: engine (when not verl), algorithm, preset and weight overrides, so changing one makes
    a new run beside the others."""
    overrides = "".join(f"_{n.lower()}{s[n]}" for n in WEIGHT_SETTINGS if s[n])
    engine = "" if s["RL_ENGINE"] == "verl" else f"{s['RL_ENGINE']}_"
    return f"online_{engine}{s['RL_ALGO']}_{s['REWARD_PRESET']}{overrides}"


def verl_seed_overrides(seed: int) -> list[str]:
    """verl's Hydra overrides for one seed (its key names: :func:`thinkj.online.verl_launch.seed_overrides`)."""
    from thinkj.online.verl_launch import seed_overrides

    return seed_overrides(seed)


def verl_config(algo: str) -> Path:
    from thinkj.models.profiles import CONFIGS
    from thinkj.online.verl_launch import ALGOS

    return CONFIGS / "verl" / f"{ALGOS[algo]}.yaml"


def learning_stages(s: Mapping[str, str], w: Where) -> tuple[list[Stage], dict[str, Path], dict[str, str]]:
    """The stages from judge SFT to the RL / DPO models; returns them, the model of each row (base, init, offline,
    online, and "final"), and each row's method tag."""
    from thinkj.models.profiles import CONFIGS

    train, lf_config = w.run / "train", CONFIGS / "llamafactory"
    cpu = ["--device", "cpu"] if s["DEVICE"] == "cpu" else []
    seed_opt, lf_seed = opt("--seed", s["SEED"]), [f"seed={s['SEED']}"] if s["SEED"] else []
    lf_cpu = ["--cpu-bf16"] if bf16(s) else []
    lf_cpu += ["--processes", s["LF_PROCESSES"]] if s["DEVICE"] == "cpu" and int(s["LF_PROCESSES"] or 1) > 1 else []
    sft_over = _split("SFT_OVERRIDES", s["SFT_OVERRIDES"])
    judge_sft = train / "judge_sft"
    stages = [Stage("judge_sft", ["thinkj", "train", "sft", "judge_sft", "--model", s["MODEL_PROFILE"], "--run-dir",
                                  str(train), *cpu, *lf_cpu, f"dataset_dir={w.seed}", *lf_seed, *sft_over],
                    judge_sft / "thinkj_train.json",
                    inputs={"dataset": w.seed, "profile": w.profile, "config": lf_config / "judge_sft.yaml"})]
    models: dict[str, Path] = {"base": Path(w.hub), "init": judge_sft}
    # tags.method: a row's name (the demo table's rows; Table 4 reads them as its aliases), the final model's label
    methods = {row: row for row in ROWS}
    if s["LEARNING"] in ("offline", "both"):
        k = s["OFFLINE_ITERATIONS"]
        critic, critic_data, critic_set = train / "critic_sft", w.seed, []
        if int(s["CRITIC_WRONG_SIDE_EVERY"] or 0):
            critic_data = w.run / "data" / "critic_data"
            stages.append(Stage("critic_data", ["thinkj", "data", "critic-data", str(w.seed), str(critic_data),
                                                "--wrong-side-from", str(w.source), "--task", s["SYNTHETIC_TASK"],
                                                "--every", s["CRITIC_WRONG_SIDE_EVERY"]],
                                critic_data / "dataset_info.json", inputs={"seed_set": w.seed, "pairs": w.source}))
            critic_set = [f"dataset=thinkj_critic_sft,{WRONG_SIDE_DATASET}"]
        pairs = w.seed / "rl_pairs.jsonl"
        if s["OFFLINE_PAIRS"] == "outside_seed_set":
            pool = w.run / "data" / "offline_pool" / "pairs.jsonl"
            stages.append(Stage("offline_pool", ["thinkj", "data", "exclude", str(w.source), str(pairs), str(pool)],
                                pool, inputs={"pairs": w.source, "seed_set": pairs}))
            pairs = pool
        stages += [
            Stage("critic_sft", ["thinkj", "train", "sft", "critic_sft", "--model", s["MODEL_PROFILE"], "--run-dir",
                                 str(train), *cpu, *lf_cpu, f"dataset_dir={critic_data}", *critic_set, *lf_seed,
                                 *critic_overrides(s)],
                  critic / "thinkj_train.json",
                  inputs={"dataset": critic_data, "profile": w.profile, "config": lf_config / "critic_sft.yaml"}),
            Stage("offline", ["thinkj", "train", "offline", "--pairs", str(pairs), "--judge", str(judge_sft),
                              "--critic", str(critic), "--iterations", k, "--model", s["MODEL_PROFILE"],
                              "--run-dir", str(train), "--backend", s["JUDGE_BACKEND"], *cpu, *lf_cpu,
                              *hf_args(s, s["PAIR_BATCH"]), *opt("--limit", s["PAIR_LIMIT"]),
                              *opt("--max-new-tokens", s["PAIR_MAX_NEW_TOKENS"]), *seed_opt, *lf_seed,
                              *_split("DPO_OVERRIDES", s["DPO_OVERRIDES"])],
                  train / "offline" / "iterations.json",
                  inputs={"pairs": pairs, "judge": judge_sft, "critic": critic, "profile": w.profile,
                          "config": lf_config / "dpo.yaml"}),
        ]
        models["offline"] = train / "offline" / f"iter_{k}" / "model"
    if s["LEARNING"] in ("online", "both"):
        stages += _online_stages(s, w, judge_sft, models)
    final = "offline" if s["LEARNING"] == "offline" else "online"
    models["final"] = models[final]
    methods["final"] = "offline (Critic-guided)" if final == "offline" else METHODS.get(s["RL_ALGO"], s["RL_ALGO"])
    return stages, models, methods


def critic_overrides(s: Mapping[str, str]) -> list[str]:
    """SFT_OVERRIDES with CRITIC_OVERRIDES in place of the keys it sets (each key once on the command line)."""
    critic = _split("CRITIC_OVERRIDES", s["CRITIC_OVERRIDES"])
    keys = {item.partition("=")[0] for item in critic}
    return [item for item in _split("SFT_OVERRIDES", s["SFT_OVERRIDES"]) if item.partition("=")[0] not in keys] + critic


def _online_stages(s: Mapping[str, str], w: Where, judge_sft: Path, models: dict[str, Path]) -> list[Stage]:
    online = w.run / "train" / online_folder(s)
    weights = [x for name in WEIGHT_SETTINGS if s[name] for x in ("--weight", f"{name.lower()}={s[name]}")]
    pairs = w.seed / "rl_pairs.jsonl" if s["RL_DATA"] == "seed_set" else w.source
    cpu = ["--device", "cpu"] if s["DEVICE"] == "cpu" else []
    stages: list[Stage] = []
    val: list[str] = []
    if float(s["RL_VAL_FRACTION"] or 0) > 0:  # held-out pairs judged during RL (both engines read the parquets)
        folder = w.run / "data" / "rl_split"
        twins = s["RL_ALGO"] == "grpo_consistent" and s["RL_ENGINE"] == "verl"  # verl's twins are rows 2k, 2k+1
        train_part = folder / f"rl_train{'_twins' if twins else ''}.parquet"
        stages.append(Stage("rl_split", ["thinkj", "data", "verl-parquet", str(pairs), str(train_part),
                                         *(["--twins"] if twins else []),
                                         "--val-out", str(folder / "rl_val.parquet"), "--val-fraction",
                                         s["RL_VAL_FRACTION"], *opt("--seed", s["SEED"])],
                            folder / "rl_val.parquet", inputs={"pairs": pairs}))
        pairs, val = train_part, ["--val-data", str(folder / "rl_val.parquet")]
    if s["RL_ENGINE"] == "trl":  # reads the pairs JSONL; both orders in one step is its --twins step
        twins = ["--twins", "step"] if s["RL_ALGO"] == "grpo_consistent" else []
        given = _split("TRL_OVERRIDES", s["TRL_OVERRIDES"])
        keys = {item.partition("=")[0] for item in given}  # TRL_OVERRIDES win over what SEED and CPU_BF16 set
        over = [item for item in [*([f"seed={s['SEED']}"] if s["SEED"] else []), *(["bf16=true"] if bf16(s) else [])]
                if item.partition("=")[0] not in keys] + given
        stages.append(Stage("online", ["thinkj", "train", "rl", "--engine", "trl", "--algo", "grpo", *twins,
                                       "--model", str(judge_sft), "--data", str(pairs), *val, "--out", str(online),
                                       "--preset", s["REWARD_PRESET"], *weights, *cpu,
                                       *opt("--steps", s["RL_STEPS"]), *over],
                            online / "model" / "config.json",
                            inputs={"data": pairs, "judge": judge_sft, **({"val": Path(val[1])} if val else {})}))
        models["online"] = online / "model"
        return stages
    rl_data = w.seed / "rl.parquet"
    twins = ["--twins"] if s["RL_ALGO"] == "grpo_consistent" else []  # each comparison and its swapped twin
    if val:
        rl_data = pairs  # rl_split wrote it, twins included
    elif twins or s["RL_DATA"] == "source":
        rl_data = w.run / "data" / "rl_data" / f"rl{'_twins' if twins else ''}.parquet"
        stages.append(Stage("rl_data", ["thinkj", "data", "verl-parquet", str(pairs), str(rl_data), *twins,
                                        *opt("--seed", s["SEED"])], rl_data, inputs={"pairs": pairs}))
    stages += [
        Stage("online", ["thinkj", "train", "rl", "--engine", "verl", "--algo", s["RL_ALGO"], "--model", str(judge_sft),
                         "--data", str(rl_data), *val, "--out", str(online), "--preset", s["REWARD_PRESET"],
                         *weights, "--nnodes", s["NNODES"], "--gpus-per-node", s["GPUS_PER_NODE"], *cpu,
                         *verl_stage_overrides(s)],
              online / "checkpoints",
              inputs={"data": rl_data, "judge": judge_sft, "config": verl_config(s["RL_ALGO"]),
                      **({"val": Path(val[1])} if val else {})}),
        Stage("merge", ["python", "-m", "thinkj.pipeline", "merge-verl", str(online / "checkpoints"),
                        str(online / "hf")], online / "hf" / "config.json"),
    ]
    models["online"] = online / "hf"
    return stages


def verl_stage_overrides(s: Mapping[str, str]) -> list[str]:
    """The online verl stage's Hydra overrides from the settings (its seeds, RL_STEPS, VERL_OVERRIDES last)."""
    verl_seed = verl_seed_overrides(int(s["SEED"])) if s["SEED"] else []
    return [*verl_seed, *([f"trainer.total_training_steps={s['RL_STEPS']}"] if s["RL_STEPS"] else []),
            *_split("VERL_OVERRIDES", s["VERL_OVERRIDES"])]


def check_verl_layout(s: Mapping[str, str]) -> None:
    """With verl online learning on GPUs, its batch and parallel sizes against NNODES x GPUS_PER_NODE, composed as the
    online stage's launch composes them (:func:`thinkj.online.verl_launch.check_layout`): a misfit fails before stage
    1, not hours later when the online stage starts."""
    if s["RL_ENGINE"] != "verl" or s["LEARNING"] not in ("online", "both") or s["DEVICE"] != "gpu":
        return  # on a CPU the online stage's own launch checks the same in seconds, with nothing costly before it
    # the seeds' overrides are left out: they name no size, and a sweep's cells then share one composition
    steps = [f"trainer.total_training_steps={s['RL_STEPS']}"] if s["RL_STEPS"] else []
    problem = _verl_layout_problem(s["RL_ALGO"], s["REWARD_PRESET"], int(s["NNODES"]), int(s["GPUS_PER_NODE"]),
                                   (*steps, *_split("VERL_OVERRIDES", s["VERL_OVERRIDES"])))
    if problem:
        raise ThinkJError(f"NNODES={s['NNODES']} GPUS_PER_NODE={s['GPUS_PER_NODE']} VERL_OVERRIDES="
                          f"{s['VERL_OVERRIDES']!r}: {problem}")


@functools.lru_cache(maxsize=64)
def _verl_layout_problem(algo: str, preset: str, nnodes: int, gpus_per_node: int,
                         overrides: tuple[str, ...]) -> str | None:
    """The launcher's refusal for these settings, or None; kept per process (a sweep validates many cells whose
    layout is the same, and each composition takes about a second)."""
    from thinkj.online.verl_launch import LaunchError, VerlLaunch, build_command, check_layout

    spec = VerlLaunch(algo=algo, model="judge_sft", train_files="rl.parquet", out_dir="online", preset=preset,
                      nnodes=nnodes, gpus_per_node=gpus_per_node, device="gpu", overrides=list(overrides))
    try:
        check_layout(spec, build_command(spec)[0])
    except LaunchError as exc:
        return str(exc)
    return None


def check_learning_settings(s: Mapping[str, str]) -> None:
    """The settings of the learning and evaluation phases and the rules between them (part of
    :func:`thinkj.pipeline.plan.validate`)."""
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
