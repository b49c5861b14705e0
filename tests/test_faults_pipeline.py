"""The reproduction pipeline refuses settings it would otherwise ignore or misread, passes the difficulty filter's
budget, and never reuses a stage whose input content changed since its completion record.

On the old code ``W_STRR=0.0`` (a typo of W_STR) ran the default weights as if they were the ablation, a negative
weight was accepted, the difficulty stage always ran with the default budget, and a source file edited in place
was not noticed (the record kept its path only): load, difficulty and dedup were skipped on stale output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_pipeline_done import _finish, _kinds, _pipeline
from test_reproduce import ROOT, dry_run

from thinkj.errors import ThinkJError
from thinkj.pipeline.plan import plan
from thinkj.pipeline.run import is_done
from thinkj.pipeline.settings import check_names, env_settings


def _refused(tmp_path: Path, **env: str) -> str:
    """Run the 7B script's dry run with ``env``; it must fail in one line. Returns that line."""
    full = {k: v for k, v in os.environ.items() if not k.upper().startswith("W_")}
    full.update(DRY_RUN="1", RUN_DIR=str(tmp_path), **env)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "reproduce_qwen2.5-7b.sh")], env=full, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert not proc.stdout.strip()  # not a single command was printed
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("name,hint", [("W_STRR", "did you mean W_STR?"), ("w_str", "did you mean W_STR?"),
                                       ("W_FORMAT", "the reward weights are W_ACC, W_FMT, W_STR, W_CON"),
                                       ("W_LEN", "the reward weights are W_ACC, W_FMT, W_STR, W_CON"),
                                       ("BENCHMARK", "did you mean BENCHMARKS?"), ("DRYRUN", "did you mean DRY_RUN?"),
                                       ("GPU_PER_NODE", "did you mean GPUS_PER_NODE?"),
                                       ("Seed", "did you mean SEED?"), ("MAX_TOKENS", "did you mean MAX_NEW_TOKENS?")])
def test_a_misspelt_setting_is_refused_with_a_hint(tmp_path, name, hint):
    line = _refused(tmp_path, **{name: "0.0"})
    assert line == (f"error: {name}: not a setting of the pipeline ({hint}); `python -m thinkj.pipeline --print-env` "
                    "lists them")


def test_unrelated_environment_variables_pass():
    check_names({"PATH": "/bin", "TMP": "/tmp", "TERM": "xterm", "HF_HOME": "x", "NODE_RANK": "0", "MASTER_ADDR": "h",
                 "NPROC_PER_NODE": "8", "CUDA_VISIBLE_DEVICES": "0", "PYTHON": "python3", "DEEPSEEK_API_KEY": "k",
                 "TEACHER_KEY_ENV": "DEEPSEEK_API_KEY", "W_STR": "0.5"})


def test_the_hint_never_shows_the_value(tmp_path):
    line = _refused(tmp_path, TEACHER_KEY="sk-secret-value")  # a key pasted where its variable's name belongs
    assert "TEACHER_KEY_ENV" in line and "sk-secret" not in line


@pytest.mark.parametrize("value,problem", [("nan", "must be a finite number"), ("inf", "must be a finite number"),
                                           ("-inf", "must be a finite number"), ("-0.5", "a reward weight must be >= 0"),
                                           ("abc", "must be a number"), ("0,5", "must be a number")])
@pytest.mark.parametrize("name", ["W_ACC", "W_FMT", "W_STR"])
def test_a_bad_reward_weight_fails_in_one_line_naming_it(tmp_path, name, value, problem):
    # the message is the rewards' one weight rule (thinkj.rewards.weights.check_value) behind the setting's name
    problem = problem.removeprefix("a reward weight ")
    assert _refused(tmp_path, **{name: value}) == f"error: {name}={value!r}: a reward weight {problem}"


def _difficulty_argv(printed) -> list[str]:
    return next(argv for _, name, argv in printed if name == "difficulty")


def _budget(argv: list[str]) -> str:
    return argv[argv.index("--max-new-tokens") + 1]


def test_difficulty_budget_reaches_the_command_and_its_record(tmp_path):
    assert _budget(_difficulty_argv(dry_run("reproduce_qwen2.5-7b.sh", tmp_path))) == "4096"  # the profile's
    assert _budget(_difficulty_argv(dry_run("reproduce.sh", tmp_path, MODEL_PROFILE="tiny"))) == "96"
    assert _budget(_difficulty_argv(dry_run("reproduce_qwen2.5-7b.sh", tmp_path,
                                            DIFFICULTY_MAX_NEW_TOKENS="512"))) == "512"
    base = {"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}
    _finish(plan(env_settings(base)), upto="difficulty")
    record = json.loads((tmp_path / "data" / "difficulty" / "difficulty.done.json").read_text())
    assert record["settings"]["DIFFICULTY_MAX_NEW_TOKENS"] == "" and _budget(record["argv"]) == "4096"
    difficulty = next(s for s in plan(env_settings({**base, "DIFFICULTY_MAX_NEW_TOKENS": "512"})) if s.name == "difficulty")
    with pytest.raises(ThinkJError, match="DIFFICULTY_MAX_NEW_TOKENS='' then, '512' now"):
        is_done(difficulty)


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5"])
def test_a_bad_difficulty_budget_is_refused(tmp_path, value):
    assert _refused(tmp_path, DIFFICULTY_MAX_NEW_TOKENS=value) == \
        f"error: DIFFICULTY_MAX_NEW_TOKENS={value!r}: must be a whole number >= 1"


def _hh_source(path: Path, answer: str = "Apple.") -> Path:
    rows = [{"chosen": f"\n\nHuman: Name fruit {i}.\n\nAssistant: {answer}",
             "rejected": f"\n\nHuman: Name fruit {i}.\n\nAssistant: Chair."} for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_source_changed_in_place_is_not_reused(tmp_path):
    """Load runs for real and is recorded; the file is then edited in place (same size, old mtime put back)."""
    source = _hh_source(tmp_path / "hh.jsonl")
    env = dict(TRAIN_SOURCE="hh_rlhf", SOURCE_LOCATION=str(source))
    first = _pipeline(tmp_path, **env)
    record = tmp_path / "run" / "data" / "load.done.json"
    assert first.returncode == 2 and record.is_file(), first.stderr[-2000:]  # difficulty cannot reach its hub model
    assert json.loads(record.read_text())["inputs"]["source"].startswith("sha256:")
    stat = source.stat()
    _hh_source(source, answer="Melon.")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert source.stat().st_size == stat.st_size
    again = _pipeline(tmp_path, **env)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    last = again.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {record}: stage load was done on other input content ({source} sha256:"), last
    assert "then, sha256:" in last and "delete that record to redo the stage" in last


def test_changed_intermediate_output_stops_the_stage_that_read_it(tmp_path):
    base = {"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}
    stages = plan(env_settings(base))
    _finish(stages, upto="dedup")
    assert set(_kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path)[:3]).values()) == {"skip"}
    source = tmp_path / "data" / "source.jsonl"
    source.write_bytes(source.read_bytes())  # rewritten with the same bytes: still done
    assert set(_kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path)[:3]).values()) == {"skip"}
    source.write_text('{"edited": true}\n')
    with pytest.raises(ThinkJError, match=r"stage difficulty was done on other input content \(.*source.jsonl"):
        is_done(next(s for s in stages if s.name == "difficulty"))


def test_an_edited_model_profile_is_another_input(tmp_path, monkeypatch):
    import shutil

    import thinkj.models.profiles as pipeline_profiles

    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    monkeypatch.setattr(pipeline_profiles, "CONFIGS", configs)  # where profiles and engine configs are read
    base = {"RUN_DIR": str(tmp_path / "run"), "REWARD_PRESET": "thinkj_qwen"}
    _finish(plan(env_settings(base)), upto="difficulty")
    assert is_done(next(s for s in plan(env_settings(base)) if s.name == "difficulty"))
    profile = configs / "models" / "qwen2.5-7b-instruct.yaml"
    profile.write_text(profile.read_text().replace("max_new_tokens: 4096", "max_new_tokens: 2048"))
    with pytest.raises(ThinkJError, match="qwen2.5-7b-instruct.yaml sha256:"):
        is_done(next(s for s in plan(env_settings(base)) if s.name == "difficulty"))


def test_a_record_from_before_input_fingerprints_is_judged_on_its_settings(tmp_path):
    stages = plan(env_settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))
    _finish(stages)
    for stage in stages:
        record = json.loads(stage.record.read_text())
        del record["inputs"]
        stage.record.write_text(json.dumps(record))
    kinds = _kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path))
    assert kinds.pop("tables") == "stage" and set(kinds.values()) == {"skip"}  # tables always runs (seconds)


def test_print_env_lists_the_budget_setting():
    proc = subprocess.run([sys.executable, "-m", "thinkj.pipeline", "--print-env"], cwd=ROOT, capture_output=True,
                          text=True, env={k: v for k, v in os.environ.items() if not k.upper().startswith("W_")})
    assert proc.returncode == 0 and "DIFFICULTY_MAX_NEW_TOKENS=" in proc.stdout
