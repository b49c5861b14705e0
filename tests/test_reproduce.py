"""The reproduction scripts' dry runs: complete, ordered, chained commands naming real configs, modules and commands."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = {"qwen2.5-7b": "qwen2.5-7b-instruct", "llama3-8b": "llama-3-8b-instruct", "qwen2.5-32b": "qwen2.5-32b-instruct"}
DATA = ["load", "difficulty", "dedup", "decontaminate", "traces", "clip", "seed_set", "judge_sft"]
ONLINE = [*DATA, "online", "merge", "eval_rewardbench", "eval_rmbench", "eval_autoj", "tables"]
OFFLINE = [*DATA, "critic_sft", "offline", "eval_rewardbench", "eval_rmbench", "eval_autoj", "tables"]


def dry_run(script: str, run_dir: Path, **env: str) -> list[tuple[str, str, list[str]]]:
    """Run the script with DRY_RUN=1; returns (kind 'stage'|'skip', stage name, argv) per stage."""
    full = {k: v for k, v in os.environ.items() if k not in ("W_STR", "W_FMT", "W_ACC", "LEARNING")}
    full.update(DRY_RUN="1", RUN_DIR=str(run_dir), **env)
    out = subprocess.run(["bash", str(ROOT / "scripts" / script)], env=full, capture_output=True, text=True, check=True).stdout
    return stages_in(out)


def stages_in(out: str) -> list[tuple[str, str, list[str]]]:
    """A dry run's printed stage list (other lines around it are ignored): (kind, stage name, argv) per stage."""
    stages, lines = [], out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# stage "):
            stages.append(("stage", line.split()[2], shlex.split(lines[i + 1])))
        elif line.startswith("# skip "):
            stages.append(("skip", line.split()[2].rstrip(":"), []))
    return stages


def _thinkj_command_exists(argv: list[str]) -> bool:
    import typer

    from thinkj.cli import _register_subcommands, app

    if not any(g.name == "train" for g in app.registered_groups):
        _register_subcommands()
    command = typer.main.get_command(app)
    for word in argv[1:]:
        if not hasattr(command, "commands") or word not in command.commands:
            break
        command = command.commands[word]
    return not hasattr(command, "commands") or not command.commands  # reached a leaf (or a callback group like tables)


def _paths_in(argv: list[str], run_dir: Path) -> list[Path]:
    values = [a.split("=", 1)[1] if "=" in a and not a.startswith("-") else a for a in argv]
    return [Path(v) for v in values if v.startswith(str(run_dir))]


def _made(output: Path) -> Path:
    """What a stage makes: its JSONL output itself, or the folder its marker file (config.json, ...) proves finished."""
    return output if output.suffix == ".jsonl" else output.parent


@pytest.mark.parametrize("short,profile", SCRIPTS.items())
def test_dry_run_is_complete_ordered_and_chained(short, profile, tmp_path):
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.settings import env_settings
    from thinkj.rewards import get_preset

    stages = dry_run(f"reproduce_{short}.sh", tmp_path)
    assert [name for _, name, _ in stages] == ONLINE
    preset = "thinkj_llama" if "llama" in short else "thinkj_qwen"  # what each wrapper script sets
    expected_outputs = {s.name: s.output for s in plan({**env_settings({"RUN_DIR": str(tmp_path), "MODEL_PROFILE": profile,
                                                                    "REWARD_PRESET": preset})})}
    produced: list[Path] = []
    for _, name, argv in stages:
        if argv[0] == "python":
            assert argv[1] == "-m" and importlib.util.find_spec(argv[2]) is not None, argv
        else:
            assert argv[0] == "thinkj" and _thinkj_command_exists(argv), argv
        if argv[:3] == ["thinkj", "train", "sft"]:
            assert (ROOT / "configs" / "llamafactory" / f"{argv[3]}.yaml").exists()
            assert (ROOT / "configs" / "models" / f"{argv[argv.index('--model') + 1]}.yaml").exists()
        if "--preset" in argv:
            get_preset(argv[argv.index("--preset") + 1])
        own = expected_outputs[name]
        for path in _paths_in(argv, tmp_path):
            # every path is made by an earlier stage, or is this stage's own output (folder)
            ok = path == own or path in own.parents or any(path == m or m in path.parents or path in m.parents for m in produced)
            assert ok, (name, path)
        produced.append(_made(own))
    assert f"--model {profile}" in shlex.join(next(a for _, n, a in stages if n == "judge_sft"))


def test_env_overrides_change_the_commands(tmp_path):
    base = {n: a for _, n, a in dry_run("reproduce_qwen2.5-7b.sh", tmp_path)}
    assert "--weight" not in base["online"] and base["online"][base["online"].index("--preset") + 1] == "thinkj_qwen"
    changed = {n: a for _, n, a in dry_run("reproduce_qwen2.5-7b.sh", tmp_path, W_STR="0.5", RL_ALGO="ppo", TP="2")}
    assert "w_str=0.5" in changed["online"] and changed["online"][changed["online"].index("--algo") + 1] == "ppo"
    assert "w_str=0.5" in changed["eval_rewardbench"] and "method=online (PPO)" in changed["eval_rewardbench"]
    assert "tensor_parallel_size=2" in changed["eval_autoj"]
    llama = {n: a for _, n, a in dry_run("reproduce_llama3-8b.sh", tmp_path)}
    assert llama["online"][llama["online"].index("--preset") + 1] == "thinkj_llama"
    offline = dry_run("reproduce_llama3-8b.sh", tmp_path, LEARNING="offline", OFFLINE_ITERATIONS="3", BENCHMARKS="rewardbench")
    assert [n for _, n, _ in offline] == [*OFFLINE[:10], "eval_rewardbench", "tables"]
    argv = dict((n, a) for _, n, a in offline)
    assert argv["offline"][argv["offline"].index("--iterations") + 1] == "3"
    assert str(tmp_path / "train" / "offline" / "iter_3" / "model") in argv["eval_rewardbench"]
    assert "iteration=3" in argv["eval_rewardbench"]


def test_an_online_runs_own_stages_log_into_its_folder(tmp_path):
    """Two cells of a weight sweep on one RUN_DIR: their online run, merge and its evaluations log apart (they run side
    by side); every stage they share keeps one log, <stage>.log."""
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.settings import env_settings

    logs = {w: {st.name: st.log for st in plan(env_settings({"RUN_DIR": str(tmp_path), "W_STR": w}))}
            for w in ("", "0.5")}
    own = ["online", "merge", "eval_rewardbench", "eval_rmbench", "eval_autoj"]
    assert logs[""]["online"] == "online_grpo_thinkj_qwen/online.log"
    assert all(logs["0.5"][name] == f"online_grpo_thinkj_qwen_w_str0.5/{name}.log" for name in own)
    assert all(logs[""][name] == logs["0.5"][name] == f"{name}.log" for name in logs[""] if name not in own)
    offline = plan(env_settings({"RUN_DIR": str(tmp_path), "LEARNING": "offline"}))
    assert all(st.log == f"{st.name}.log" for st in offline)  # one offline folder: nothing runs side by side
    both = {st.name: st.log for st in plan(env_settings({"RUN_DIR": str(tmp_path), "LEARNING": "both",
                                                           "EVAL_ROWS": "base init online"}))}
    assert both["eval_online_rewardbench"] == "online_grpo_thinkj_qwen/eval_online_rewardbench.log"
    assert both["eval_init_rewardbench"] == "eval_init_rewardbench.log"
    assert both["compare"] == "online_grpo_thinkj_qwen/compare.log"  # its table holds that online run's row


def test_each_online_run_compares_its_rows_in_a_folder_of_its_own(tmp_path):
    """With an online row, the rows' table is one online run's: two cells of a weight sweep on one RUN_DIR write two
    compare.json (side by side, neither rewrites the other's); without one, every run's table is the same, one file."""
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.settings import env_settings

    def compare(**settings: str):
        stages = {st.name: st for st in plan(env_settings({"RUN_DIR": str(tmp_path), "LEARNING": "both", **settings}))}
        return stages["compare"]

    cells = {w: compare(EVAL_ROWS="base init offline online", W_STR=w) for w in ("", "0.5")}
    assert cells[""].output == tmp_path / "compare" / "online_grpo_thinkj_qwen" / "compare.json"
    assert cells["0.5"].output == tmp_path / "compare" / "online_grpo_thinkj_qwen_w_str0.5" / "compare.json"
    assert "online=" + str(tmp_path / "eval" / "online_grpo_thinkj_qwen_w_str0.5_hf") in cells["0.5"].argv
    shared = {w: compare(EVAL_ROWS="base init offline", W_STR=w) for w in ("", "0.5")}
    assert shared[""].output == shared["0.5"].output == tmp_path / "compare" / "compare.json"
    assert shared[""].cell == "" and shared[""].log == "compare.log"


def test_finished_stages_are_skipped(tmp_path):
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.run import write_record
    from thinkj.pipeline.settings import env_settings

    stages = plan(env_settings({"RUN_DIR": str(tmp_path)}))
    for stage in stages[:5]:  # load .. traces finished
        stage.output.parent.mkdir(parents=True, exist_ok=True)
        stage.output.write_text("{}")
        write_record(stage)
    printed = dry_run("reproduce.sh", tmp_path)
    assert [(k, n) for k, n, _ in printed[:6]] == [("skip", "load"), ("skip", "difficulty"), ("skip", "dedup"),
                                                    ("skip", "decontaminate"), ("skip", "traces"), ("stage", "clip")]
    assert not any(p.exists() for p in (s.output for s in stages[5:]))  # a dry run writes nothing


def test_bad_settings_fail_clearly(tmp_path):
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.settings import env_settings

    with pytest.raises(ValueError, match="MODEL_PROFILE='nope'"):
        plan(env_settings({"MODEL_PROFILE": "nope"}))
    with pytest.raises(ValueError, match="LEARNING"):
        plan(env_settings({"LEARNING": "sometimes"}))
    result = subprocess.run(["bash", str(ROOT / "scripts" / "reproduce.sh")], capture_output=True, text=True,
                            env={**os.environ, "DRY_RUN": "1", "MODEL_PROFILE": "nope"})
    assert result.returncode != 0 and "nope" in result.stderr
