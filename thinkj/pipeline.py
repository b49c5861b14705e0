"""The end-to-end reproduction pipeline behind ``scripts/reproduce*.sh``: one ordered list of shell commands.

    DRY_RUN=1 bash scripts/reproduce_qwen2.5-7b.sh                 # print every command, run nothing
    bash scripts/reproduce_qwen2.5-7b.sh                           # run; finished stages are skipped
    LEARNING=offline OFFLINE_ITERATIONS=2 bash scripts/reproduce_llama3-8b.sh
    W_STR=0.5 bash scripts/reproduce_qwen2.5-32b.sh                # one reward weight changed
    python -m thinkj.pipeline --print-env                          # the settings and their defaults

Stages (paper §3): load -> difficulty -> dedup -> traces -> clip -> seed-set (data selection, LIMJ707) ->
judge SFT (+ critic SFT for offline) -> offline critic-guided DPO or online RL (verl) -> evaluation on
each benchmark -> tables. Each stage names the file that proves it finished; when that file exists the
stage is skipped, so a rerun after a crash picks up at the first unfinished stage (the engines themselves
resume inside a stage: cached generations, LlamaFactory / verl checkpoints).
Every setting is an environment variable; ``DEFAULTS`` below lists each with its default and why.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from thinkj.errors import ThinkJError, exit_on_user_error

# name -> (default, what it is). Model-specific defaults come from the thin per-model scripts.
DEFAULTS: dict[str, tuple[str, str]] = {
    "MODEL_PROFILE": ("qwen2.5-7b-instruct", "configs/models/<profile>.yaml: hub id + LlamaFactory template"),
    "MODEL_NAME": ("Qwen2.5-7B-Instruct", "tags.model in results JSON (what `thinkj tables` matches)"),
    "RUN_DIR": ("", "every output goes under here [runs/<MODEL_PROFILE>]"),
    "TRAIN_SOURCE": ("skywork", "data_prep.load_source kind: skywork | helpsteer2 | hh_rlhf | generic"),
    "TRAIN_DATA_NAME": ("Skywork", "tags.train_data"),
    "SOURCE_LOCATION": ("", "hub name or local file for the source [the loader's hub default]"),
    "SOURCE_LIMIT": ("", "keep the first N pairs [all]"),
    "JUDGE_BACKEND": ("vllm", "inference backend for difficulty filtering and evaluation: vllm | hf"),
    "TP": ("1", "vLLM tensor_parallel_size (32B: 4)"),
    "DEDUP_MODEL": ("hkunlp/instructor-large", "embedding model of the diversity filter (paper: instructor-large)"),
    "DEDUP_THRESHOLD": ("0.9", "cosine similarity at or above which a pair is a duplicate"),
    "TEACHER_MODEL": ("deepseek-reasoner", "R1 teacher for the thinking traces"),
    "TEACHER_URL": ("https://api.deepseek.com/v1", "OpenAI-compatible base URL of the teacher"),
    "TEACHER_KEY_ENV": ("DEEPSEEK_API_KEY", "name of the env var holding the teacher's API key (never printed)"),
    "LEARNING": ("online", "online (verl RL) | offline (critic-guided DPO)"),
    "RL_ALGO": ("grpo", "grpo | ppo | reinforce_pp (Table 4)"),
    "REWARD_PRESET": ("thinkj_qwen", "thinkj_qwen (1, 1, 0.2) | thinkj_llama (1, 1, 0): Table 8's best per model"),
    "W_ACC": ("", "override the preset's accuracy weight"),
    "W_FMT": ("", "override the preset's format weight (Table 8: 1.0 / 0.5 / 0.0)"),
    "W_STR": ("", "override the preset's strength weight (Table 8: 0.5 / 0.2 / 0.0)"),
    "NNODES": ("2", "verl nodes (Table 11: 2 x 8 GPUs)"),
    "GPUS_PER_NODE": ("8", "GPUs per node"),
    "OFFLINE_ITERATIONS": ("1", "critic-guided DPO rounds (Table 7: 1-3)"),
    "BENCHMARKS": ("rewardbench rmbench autoj", "benchmarks to evaluate (space separated)"),
    "EVAL_LIMIT": ("", "items per benchmark [all]"),
    "MAX_NEW_TOKENS": ("4096", "evaluation generation budget per judgment"),
    "TABLES": ("4", "tables to render from this run's results (space separated)"),
    "DRY_RUN": ("0", "1 = print every command in order, run nothing"),
}


@dataclass(frozen=True)
class Stage:
    name: str
    argv: list[str]
    output: Path          # exists -> the stage is finished and skipped

    @property
    def line(self) -> str:
        return shlex.join(self.argv)


def settings(env: dict[str, str] | None = None) -> dict[str, str]:
    """Resolve every setting from the environment (empty or unset -> the default)."""
    env = os.environ if env is None else env
    values = {k: (env.get(k) or d) for k, (d, _) in DEFAULTS.items()}
    values["RUN_DIR"] = values["RUN_DIR"] or f"runs/{values['MODEL_PROFILE']}"
    return values


def _opt(flag: str, value: str) -> list[str]:
    return [flag, value] if value else []


def plan(s: dict[str, str]) -> list[Stage]:
    """The ordered stages for one model and one learning mode."""
    if s["LEARNING"] not in ("online", "offline"):
        raise ThinkJError(f"LEARNING must be online or offline, got {s['LEARNING']!r}")
    run, py = Path(s["RUN_DIR"]), "python"
    data, train = run / "data", run / "train"
    source, hard, kept = data / "source.jsonl", data / "difficulty" / "kept.jsonl", data / "dedup" / "kept.jsonl"
    traces, clipped, seed = data / "traces" / "traces.jsonl", data / "clip" / "clipped.jsonl", data / "seed_set"
    hub = _profile_hub_id(s["MODEL_PROFILE"])
    tp = ["--tp", s["TP"]] if s["JUDGE_BACKEND"] == "vllm" else []
    stages = [
        Stage("load", [py, "-m", "data_prep.load_source", s["TRAIN_SOURCE"], "--out", str(source),
                       *_opt("--location", s["SOURCE_LOCATION"]), *_opt("--limit", s["SOURCE_LIMIT"])], source),
        Stage("difficulty", [py, "-m", "data_prep.difficulty", "--in", str(source), "--out", str(hard), "--model", hub,
                             "--backend", s["JUDGE_BACKEND"], *tp, "--k", "3", "--temperature", "1.0"], hard),
        Stage("dedup", [py, "-m", "data_prep.dedup", "--in", str(hard), "--out", str(kept), "--model", s["DEDUP_MODEL"],
                        "--threshold", s["DEDUP_THRESHOLD"]], kept),
        Stage("traces", ["thinkj", "data", "traces", str(kept), str(traces), "--model", s["TEACHER_MODEL"],
                         "--base-url", s["TEACHER_URL"], "--api-key-env", s["TEACHER_KEY_ENV"]], traces),
        Stage("clip", ["thinkj", "data", "clip", str(traces), str(clipped), "--tokenizer", hub], clipped),
        Stage("seed_set", ["thinkj", "data", "seed-set", str(clipped), str(seed)], seed / "dataset_info.json"),
        Stage("judge_sft", ["thinkj", "train", "sft", "judge_sft", "--model", s["MODEL_PROFILE"], "--run-dir", str(train),
                            f"dataset_dir={seed}"], train / "judge_sft" / "thinkj_train.json"),
    ]
    judge_sft = train / "judge_sft"
    if s["LEARNING"] == "offline":
        k = s["OFFLINE_ITERATIONS"]
        stages += [
            Stage("critic_sft", ["thinkj", "train", "sft", "critic_sft", "--model", s["MODEL_PROFILE"], "--run-dir",
                                 str(train), f"dataset_dir={seed}"], train / "critic_sft" / "thinkj_train.json"),
            Stage("offline", ["thinkj", "train", "offline", "--pairs", str(seed / "rl_pairs.jsonl"), "--judge", str(judge_sft),
                              "--critic", str(train / "critic_sft"), "--iterations", k, "--model", s["MODEL_PROFILE"],
                              "--run-dir", str(train), "--backend", s["JUDGE_BACKEND"]],
                  train / "offline" / "iterations.json"),
        ]
        final, method = train / "offline" / f"iter_{k}" / "model", "offline (Critic-guided)"
    else:
        online = train / f"online_{s['RL_ALGO']}"
        weights = [x for name in ("W_ACC", "W_FMT", "W_STR") if s[name] for x in ("--weight", f"{name.lower()}={s[name]}")]
        stages += [
            Stage("online", ["thinkj", "train", "rl", "--engine", "verl", "--algo", s["RL_ALGO"], "--model", str(judge_sft),
                             "--data", str(seed / "rl.parquet"), "--out", str(online), "--preset", s["REWARD_PRESET"],
                             *weights, "--nnodes", s["NNODES"], "--gpus-per-node", s["GPUS_PER_NODE"]],
                  online / "checkpoints" / "latest_checkpointed_iteration.txt"),
            Stage("merge", [py, "-m", "thinkj.pipeline", "merge-verl", str(online / "checkpoints"), str(online / "hf")],
                  online / "hf" / "config.json"),
        ]
        final, method = online / "hf", {"grpo": "online (GRPO)", "ppo": "online (PPO)",
                                        "reinforce_pp": "online (Reinforce++)"}.get(s["RL_ALGO"], s["RL_ALGO"])
    evals = run / "eval" / Path(final).relative_to(train).as_posix().replace("/", "_")
    tags = {"model": s["MODEL_NAME"], "method": method, "train_data": s["TRAIN_DATA_NAME"]}
    tags.update({name.lower(): s[name] for name in ("W_FMT", "W_STR") if s[name]})
    if s["LEARNING"] == "offline":
        tags["iteration"] = s["OFFLINE_ITERATIONS"]
    tag_args = [x for k, v in tags.items() for x in ("--tag", f"{k}={v}")]
    for bench in s["BENCHMARKS"].split():
        stages.append(Stage(f"eval_{bench}", ["thinkj", "eval", "run", bench, "--model", str(final), "--backend",
                                              s["JUDGE_BACKEND"], "--out", str(evals / bench), *tag_args,
                                              "--max-new-tokens", s["MAX_NEW_TOKENS"], *_opt("--limit", s["EVAL_LIMIT"]),
                                              *(["--backend-arg", f"tensor_parallel_size={s['TP']}"]
                                                if s["JUDGE_BACKEND"] == "vllm" else [])],
                            evals / bench / f"{bench}.results.json"))
    tables = run / "tables"
    stages.append(Stage("tables", ["thinkj", "tables", *s["TABLES"].split(), "--results", str(run / "eval"),
                                   "--out", str(tables)], tables / f"table{s['TABLES'].split()[-1]}.md"))
    return stages


def _profile_hub_id(profile: str) -> str:
    """The hub id in configs/models/<profile>.yaml (the judge being filtered for, the clip tokenizer)."""
    import yaml

    path = Path(__file__).resolve().parent.parent / "configs" / "models" / f"{profile}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"MODEL_PROFILE={profile!r}: no {path}")
    return str(yaml.safe_load(path.read_text())["model_name_or_path"])


def merge_verl(checkpoints: Path, out: Path) -> None:
    """Merge verl's newest actor checkpoint (``latest_checkpointed_iteration.txt``) into an HF model folder."""
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    if not marker.exists():
        raise FileNotFoundError(f"{marker} missing: the verl run did not save a checkpoint")
    actor = checkpoints / f"global_step_{marker.read_text().strip()}" / "actor"
    script = Path(__file__).resolve().parent.parent / "scripts" / "merge_verl_checkpoint.sh"
    subprocess.run(["bash", str(script), str(actor), str(out)], check=True)


def run_pipeline(s: dict[str, str], out=sys.stdout) -> list[str]:
    """Run (or with DRY_RUN=1 print) the stages in order; returns the names of the stages that ran."""
    dry, ran = s["DRY_RUN"] == "1", []
    for stage in plan(s):
        if stage.output.exists():
            print(f"# skip {stage.name}: {stage.output} exists", file=out, flush=True)
            continue
        print(f"# stage {stage.name} -> {stage.output}", file=out, flush=True)
        print(stage.line, file=out, flush=True)
        if not dry:
            argv = [sys.executable if stage.argv[0] == "python" else stage.argv[0], *stage.argv[1:]]
            subprocess.run(argv, check=True)
            if not stage.output.exists():
                raise RuntimeError(f"stage {stage.name} exited 0 but did not write {stage.output}")
        ran.append(stage.name)
    return ran


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["merge-verl"] and len(argv) == 3:
        merge_verl(Path(argv[1]), Path(argv[2]))
    elif argv == ["--print-env"]:
        for name, value in settings().items():
            print(f"{name}={value}    # {DEFAULTS[name][1]}")
    elif not argv:
        run_pipeline(settings())
    else:
        sys.exit("usage: python -m thinkj.pipeline [--print-env | merge-verl CHECKPOINTS OUT]")


if __name__ == "__main__":
    exit_on_user_error(main)
