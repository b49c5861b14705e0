"""SEED in the reproduction pipeline: it reaches every seeded stage's command, under the key names each engine
reads, it is part of the stages' completion records, and unset it changes nothing (each stage keeps its own
default seed, so runs made before SEED existed stay done and reproducible)."""

from __future__ import annotations

import json

import pytest
from test_pipeline_done import _finish, _kinds
from test_reproduce import dry_run

from thinkj.errors import ThinkJError
from thinkj.online.verl_launch import SEED_KEYS, VerlLaunch, build_command
from thinkj.pipeline.plan import plan, validate
from thinkj.pipeline.run import is_done
from thinkj.pipeline.settings import env_settings

SEEDED = ("difficulty", "judge_sft", "critic_sft", "offline", "online", "eval_rewardbench", "eval_rmbench", "eval_autoj")


def _argv(printed) -> dict[str, list[str]]:
    return {name: argv for _, name, argv in printed}


def _seed_args(name: str, argv: list[str]) -> list[str]:
    """What carries the seed in one stage's command (empty when it carries none)."""
    found = [f"--seed {argv[i + 1]}" for i, a in enumerate(argv) if a == "--seed"]
    return found + [a for a in argv if a.startswith("seed=") or a.split("=", 1)[0] in SEED_KEYS]


@pytest.mark.parametrize("learning", ["online", "offline"])
def test_seed_reaches_every_seeded_stage(tmp_path, learning):
    argv = _argv(dry_run("reproduce_qwen2.5-7b.sh", tmp_path, SEED="3", LEARNING=learning))
    for name, args in argv.items():
        carried = _seed_args(name, args)
        if name not in SEEDED:
            assert carried == [], (name, carried)  # deterministic stages (and the teacher's API) take no seed
            continue
        if name == "online":
            assert carried == [f"{key}=3" for key in SEED_KEYS]
        elif name in ("judge_sft", "critic_sft"):
            assert carried == ["seed=3"]  # LlamaFactory's own key (HF TrainingArguments.seed)
        elif name == "offline":
            assert carried == ["--seed 3", "seed=3"]  # the pairs' generation, then DPO's LlamaFactory seed
        else:
            assert carried == ["--seed 3"], (name, args)
    assert set(SEEDED) - set(argv) == ({"online"} if learning == "offline" else {"critic_sft", "offline"})


def test_unset_seed_passes_nothing_and_keeps_old_records_done(tmp_path):
    """Without SEED the commands are those of runs made before it existed, and their records still count."""
    printed = dry_run("reproduce_qwen2.5-7b.sh", tmp_path)
    assert all(_seed_args(name, argv) == [] for _, name, argv in printed)
    stages = plan(env_settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))
    _finish(stages)
    for stage in stages:  # a record written before SEED existed has no SEED key at all
        record = json.loads(stage.record.read_text())
        record["settings"].pop("SEED", None)
        stage.record.write_text(json.dumps(record))
    kinds = _kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path))
    assert kinds.pop("tables") == "stage" and set(kinds.values()) == {"skip"}  # tables always runs (seconds)


def test_changing_seed_never_reuses_a_finished_stage(tmp_path):
    base = {"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}
    unseeded, seeded = plan(env_settings(base)), plan(env_settings({**base, "SEED": "3"}))
    for before, after in zip(unseeded, seeded):
        # from the first seeded stage on, every stage depends on the seed (later stages through earlier ones); the
        # tables stage reads every run's results under RUN_DIR/eval, whatever their seed, and always runs
        assert (before.settings != after.settings) == (before.name not in ("load", "tables")), before.name
        assert after.settings.get("SEED", "3") == "3"
    _finish(unseeded)
    difficulty = next(s for s in seeded if s.name == "difficulty")
    with pytest.raises(ThinkJError, match="SEED='' then, '3' now"):
        is_done(difficulty)
    _finish(plan(env_settings({**base, "RUN_DIR": str(tmp_path / "s1"), "SEED": "1"})))
    with pytest.raises(ThinkJError, match="SEED='1' then, '2' now"):
        is_done(next(s for s in plan(env_settings({**base, "RUN_DIR": str(tmp_path / "s1"), "SEED": "2"}))
                     if s.name == "judge_sft"))


def test_default_run_folder_names_the_seed():
    assert env_settings({})["RUN_DIR"] == "runs/qwen2.5-7b-instruct"
    assert env_settings({"SEED": "3"})["RUN_DIR"] == "runs/qwen2.5-7b-instruct_seed3"
    assert env_settings({"SEED": "3", "RUN_DIR": "/scratch/x"})["RUN_DIR"] == "/scratch/x"  # an explicit one is kept


@pytest.mark.parametrize("bad", ["-1", "x", "1.5", str(2**32)])
def test_bad_seed_fails_in_one_line(bad):
    with pytest.raises(ThinkJError, match=f"SEED={bad!r}: must be a whole number"):
        validate(env_settings({"SEED": bad}))


def test_verl_seed_keys_exist_in_verls_config_and_take_the_seed(tmp_path):
    """The overrides name keys of verl's own composed config (a misspelt one would fail to compose or land nowhere)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from thinkj.online.verl_launch import CONFIG_DIR

    def composed(seed):
        argv, _ = build_command(VerlLaunch(algo="ppo", model=str(tmp_path), train_files="t.parquet",
                                           out_dir=str(tmp_path / "out"), seed=seed))
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            return compose(config_name="ppo", overrides=argv[argv.index("--config-name") + 2:])

    default, seeded = composed(None), composed(7)
    # verl's defaults, which an unset SEED keeps
    assert [OmegaConf.select(default, k, default="absent") for k in SEED_KEYS] == [None, 42, 42, 42]
    assert [OmegaConf.select(seeded, k, default="absent") for k in SEED_KEYS] == [7, 7, 7, 7]


def test_seeded_commands_parse_with_their_tools(tmp_path):
    """Every seeded `thinkj` command line is accepted by its CLI, the seed landing in its option or overrides."""
    import typer

    from thinkj.cli import _register_subcommands, app

    if not any(g.name == "train" for g in app.registered_groups):
        _register_subcommands()
    root = typer.main.get_command(app)
    for learning in ("online", "offline"):
        for name, argv in _argv(dry_run("reproduce_qwen2.5-7b.sh", tmp_path, SEED="5", LEARNING=learning)).items():
            if name not in SEEDED or argv[0] != "thinkj":
                continue
            command, args = root, argv[1:]
            while hasattr(command, "commands") and args and args[0] in command.commands:
                command, args = command.commands[args[0]], args[1:]
            context = command.make_context(name, list(args))
            values = context.params
            if "seed" in values:
                assert values["seed"] == 5, (name, values)
            if "overrides" in values:
                assert any(o.endswith("=5") for o in values["overrides"]), (name, values["overrides"])
