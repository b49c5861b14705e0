"""The pipeline's stages after the seed set: judge SFT, offline and online learning, evaluation, comparison, tables.

Planned by :func:`learning_stages` for :func:`thinkj.pipeline.plan`, from the settings alone (what each one means:
:mod:`thinkj.run_settings`). ``LEARNING`` picks the branches -- ``online`` (RL from the SFT judge, verl or TRL),
``offline`` (critic SFT, critic-guided pairs, DPO with the SFT term) or ``both``, each from the one SFT judge --
and ``EVAL_ROWS`` which models are judged: the final one, or rows of Table 4's layout (base, init, offline,
online), which a ``compare`` stage then sets against each other on the same judgments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from thinkj.pipeline_checks import _split
from thinkj.pipeline_stage import Stage

WEIGHT_SETTINGS = ("W_ACC", "W_FMT", "W_STR", "W_CON")
ROWS = ("base", "init", "offline", "online")  # EVAL_ROWS' values: Table 4's rows
# The offline branch's stages: the online branch does not depend on their settings (LEARNING=both).
OFFLINE_BRANCH = ("critic_data", "critic_sft", "offline_pool", "offline")
METHODS = {"grpo": "online (GRPO)", "ppo": "online (PPO)", "reinforce_pp": "online (Reinforce++)",
           "grpo_consistent": "online (GRPO, both orders)"}
WRONG_SIDE_DATASET = "thinkj_critic_wrong_side"


def opt(flag: str, value: str) -> list[str]:
    """``[flag, value]``, or nothing for an unset (empty) setting."""
    return [flag, value] if value else []


def bf16(s: Mapping[str, str]) -> bool:
    """CPU_BF16 asked for, on the CPU, and native there (emulated bf16 is slower than fp32)."""
    if s["CPU_BF16"] != "1" or s["DEVICE"] != "cpu":
        return False
    from thinkj.train.config import cpu_has_bf16

    return cpu_has_bf16()


def hf_args(s: Mapping[str, str], batch: str) -> list[str]:
    """``--backend-arg`` items of an hf inference stage: its batch size, and bf16 weights with CPU_BF16."""
    if s["JUDGE_BACKEND"] != "hf":
        return []
    items = ([f"batch_size={batch}"] if batch else []) + (["dtype=bfloat16"] if bf16(s) else [])
    return [x for item in items for x in ("--backend-arg", item)]


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


@dataclass(frozen=True)
class Where:
    """What the data stages made and how the learning stages reach the model (from :func:`thinkj.pipeline.plan`)."""

    run: Path
    source: Path          # the loaded training pairs
    seed: Path            # the seed set's folder
    hub: str              # the base model (hub id or local folder)
    profile: Path         # the model profile file
    planned: frozenset    # files a planned stage writes (inputs before they exist)
    base_local: bool      # the base model is a local folder (built by the model stage, or fetched): an input


def learning_stages(s: Mapping[str, str], w: Where) -> tuple[list[Stage], dict[str, Path], dict[str, str]]:
    """The stages from judge SFT to the RL / DPO models; returns them, the model of each row (base, init, offline,
    online, and "final"), and each row's method tag."""
    from thinkj.models.profiles import CONFIGS

    train, lf_config = w.run / "train", CONFIGS / "llamafactory"
    cpu = ["--device", "cpu"] if s["DEVICE"] == "cpu" else []
    seed_opt, lf_seed = opt("--seed", s["SEED"]), [f"seed={s['SEED']}"] if s["SEED"] else []
    lf_bf16 = ["--cpu-bf16"] if bf16(s) else []
    sft_over = _split("SFT_OVERRIDES", s["SFT_OVERRIDES"])
    judge_sft = train / "judge_sft"
    stages = [Stage("judge_sft", ["thinkj", "train", "sft", "judge_sft", "--model", s["MODEL_PROFILE"], "--run-dir",
                                  str(train), *cpu, *lf_bf16, f"dataset_dir={w.seed}", *lf_seed, *sft_over],
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
                                 str(train), *cpu, *lf_bf16, f"dataset_dir={critic_data}", *critic_set, *lf_seed,
                                 *critic_overrides(s)],
                  critic / "thinkj_train.json",
                  inputs={"dataset": critic_data, "profile": w.profile, "config": lf_config / "critic_sft.yaml"}),
            Stage("offline", ["thinkj", "train", "offline", "--pairs", str(pairs), "--judge", str(judge_sft),
                              "--critic", str(critic), "--iterations", k, "--model", s["MODEL_PROFILE"],
                              "--run-dir", str(train), "--backend", s["JUDGE_BACKEND"], *cpu, *lf_bf16,
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
    verl_seed = verl_seed_overrides(int(s["SEED"])) if s["SEED"] else []
    stages += [
        Stage("online", ["thinkj", "train", "rl", "--engine", "verl", "--algo", s["RL_ALGO"], "--model", str(judge_sft),
                         "--data", str(rl_data), *val, "--out", str(online), "--preset", s["REWARD_PRESET"],
                         *weights, "--nnodes", s["NNODES"], "--gpus-per-node", s["GPUS_PER_NODE"], *cpu,
                         *verl_seed, *([f"trainer.total_training_steps={s['RL_STEPS']}"] if s["RL_STEPS"] else []),
                         *_split("VERL_OVERRIDES", s["VERL_OVERRIDES"])],
              online / "checkpoints",
              inputs={"data": rl_data, "judge": judge_sft, "config": verl_config(s["RL_ALGO"]),
                      **({"val": Path(val[1])} if val else {})}),
        Stage("merge", ["python", "-m", "thinkj.pipeline", "merge-verl", str(online / "checkpoints"),
                        str(online / "hf")], online / "hf" / "config.json"),
    ]
    models["online"] = online / "hf"
    return stages


def eval_folder(w: Where, row: str, model: Path) -> Path:
    """A row's evaluation folder, named by its model's place under train/ (a new online run: a new folder)."""
    if row == "base":
        return w.run / "eval" / "base"
    return w.run / "eval" / model.relative_to(w.run / "train").as_posix().replace("/", "_")


def eval_stages(s: Mapping[str, str], w: Where, models: dict[str, Path], methods: dict[str, str],
                bench_data: Mapping[str, str], dp: list[str]) -> list[Stage]:
    """One ``eval_<bench>`` stage per benchmark for the final model, or ``eval_<row>_<bench>`` per EVAL_ROWS row;
    then ``compare`` when rows are judged."""
    from thinkj.evaluation.registry import get_benchmark

    rows = s["EVAL_ROWS"].split() or ["final"]
    base_tags = {"model": s["MODEL_NAME"], "train_data": s["TRAIN_DATA_NAME"]}
    weights = {name.lower(): s[name] for name in ("W_FMT", "W_STR", "W_CON") if s[name]}  # the online run's only
    stages, folders = [], {}
    for row in rows:
        model, folder = models[row], eval_folder(w, row, models[row])
        folders[row] = folder
        online = row == "online" or (row == "final" and s["LEARNING"] != "offline")
        tags = {**base_tags, "method": methods[row], **(weights if online else {})}
        if row == "offline" or (row == "final" and s["LEARNING"] == "offline"):
            tags["iteration"] = s["OFFLINE_ITERATIONS"]
        tag_args = [x for k, v in tags.items() for x in ("--tag", f"{k}={v}")]
        for bench in s["BENCHMARKS"].split():
            data = bench_data.get(bench, "")
            local = {"data": Path(data)} if data and (Path(data).exists() or Path(data) in w.planned) else {}
            stages.append(Stage(
                f"eval_{bench}" if row == "final" else f"eval_{row}_{bench}",
                ["thinkj", "eval", "run", bench, "--model", str(model), "--backend", s["JUDGE_BACKEND"],
                 "--out", str(folder / bench), *tag_args, "--max-new-tokens", s["MAX_NEW_TOKENS"],
                 *opt("--limit", s["EVAL_LIMIT"]), *opt("--seed", s["SEED"]), *opt("--data", data),
                 *hf_args(s, s["EVAL_BATCH"]),
                 *(["--backend-arg", f"tensor_parallel_size={s['TP']}"] if s["JUDGE_BACKEND"] == "vllm" else []),
                 *(dp if get_benchmark(bench).run is None else [])],  # a benchmark with its own runner: 1 worker
                folder / bench / f"{bench}.results.json",
                inputs={**({"model": model} if row != "base" or w.base_local else {}), **local}))
    if rows != ["final"]:
        out = w.run / "compare"
        stages.append(Stage("compare", ["thinkj", "eval", "compare", *[f"{r}={folders[r]}" for r in rows],
                                        "--out", str(out)], out / "compare.json"))
    return stages


def eval_benchmark(stage: Stage) -> str:
    """The benchmark an evaluation stage judges (its command's fourth word: ``thinkj eval run <bench>``)."""
    return stage.argv[3]
