"""What "done" means for the reproduction pipeline: a completion record with matching settings, nothing else.

On the old code a stage was done when its output file existed: verl's ``latest_checkpointed_iteration.txt``
(written at every save) made a crashed online run "done", ``dataset_info.json`` (written first) made a
half-written seed set "done", and ``W_STR=0.0`` after a default run skipped every stage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from test_reproduce import ROOT, dry_run

from thinkj.pipeline.plan import plan
from thinkj.pipeline.run import write_record
from thinkj.pipeline.settings import env_settings


def _finish(stages, upto: str | None = None) -> None:
    """Make the stages' outputs and completion records, in order, up to and including ``upto``."""
    for stage in stages:
        if stage.output.suffix:
            stage.output.parent.mkdir(parents=True, exist_ok=True)
            stage.output.write_text("{}\n")
        else:
            stage.output.mkdir(parents=True, exist_ok=True)
        write_record(stage)
        if stage.name == upto:
            return


def _kinds(printed) -> dict[str, str]:
    return {name: kind for kind, name, _ in printed}


def test_outputs_without_records_are_not_done(tmp_path):
    stages = plan(env_settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))
    for stage in stages:  # every output file there, as a killed run leaves them -- but no record
        target = stage.output if stage.output.suffix else stage.output / "x"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("{}")
    (tmp_path / "data" / "seed_set" / "dataset_info.json").write_text("{}")
    assert set(_kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path)).values()) == {"stage"}


def test_killed_online_stage_is_not_done(tmp_path):
    stages = plan(env_settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))
    _finish(stages, upto="judge_sft")
    online = next(s for s in stages if s.name == "online")
    marker = online.output / "latest_checkpointed_iteration.txt"  # what verl writes at its step-50 save
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("50")
    (online.output / "global_step_50" / "actor").mkdir(parents=True)
    kinds = _kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path))
    assert kinds["judge_sft"] == "skip" and kinds["online"] == "stage" and kinds["merge"] == "stage"


def test_changed_weight_makes_a_new_online_run(tmp_path):
    default = plan(env_settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))
    _finish(default)
    kinds = _kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path))
    # the tables stage always runs: it reads every run's results under <RUN_DIR>/eval (seconds)
    assert kinds.pop("tables") == "stage" and set(kinds.values()) == {"skip"}
    printed = dry_run("reproduce_qwen2.5-7b.sh", tmp_path, W_STR="0.0")
    kinds = _kinds(printed)
    assert [n for n, k in kinds.items() if k == "skip"] == ["load", "difficulty", "dedup", "decontaminate", "traces",
                                                            "clip", "seed_set", "judge_sft"]
    argv = {n: a for _, n, a in printed}
    out = Path(argv["online"][argv["online"].index("--out") + 1])
    assert out.name == "online_grpo_thinkj_qwen_w_str0.0" and not out.exists()
    default_online = next(s for s in default if s.name == "online").output.parent
    assert default_online.name == "online_grpo_thinkj_qwen" and out != default_online
    evaluated = {Path(a[a.index("--model") + 1]) for n, a in argv.items() if n.startswith("eval_")}
    assert evaluated == {out / "hf"}  # the new model is evaluated into its own folder, beside the default's


def _pipeline(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("W_")}
    full.update(RUN_DIR=str(tmp_path / "run"), JUDGE_BACKEND="hf", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT),
                DEEPSEEK_API_KEY="unused-here", NNODES="1",  # NNODES=2 without a Ray cluster is refused before stage 1
                PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", **env)
    return subprocess.run([sys.executable, "-m", "thinkj.pipeline"], cwd=ROOT, env=full, capture_output=True, text=True,
                          timeout=300)


def test_failed_stage_is_named_with_its_log_and_other_settings_are_refused(tmp_path):
    rows = [{"chosen": f"\n\nHuman: Name fruit {i}.\n\nAssistant: Apple.",
             "rejected": f"\n\nHuman: Name fruit {i}.\n\nAssistant: Chair."} for i in range(3)]
    source = tmp_path / "hh.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(TRAIN_SOURCE="hh_rlhf", SOURCE_LOCATION=str(source))
    proc = _pipeline(tmp_path, **env)
    # load runs for real and is recorded; difficulty cannot reach the hub model offline and fails in one line.
    log = tmp_path / "run" / "logs" / "difficulty.log"
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == f"error: stage difficulty failed (exit 2); its log: {log}"
    assert "Traceback" not in proc.stderr and "hub is unreachable" in log.read_text()
    record = json.loads((tmp_path / "run" / "data" / "load.done.json").read_text())
    assert record["counts"]["rows"] == 3 and record["settings"]["SOURCE_LOCATION"] == str(source)
    assert not list((tmp_path / "run" / "data").rglob("difficulty.done.json"))
    again = _pipeline(tmp_path, **env, SOURCE_LIMIT="2")
    assert again.returncode == 2 and "Traceback" not in again.stderr
    last = again.stderr.strip().splitlines()[-1]
    assert "load.done.json: stage load was done with other settings (SOURCE_LIMIT='' then, '2' now)" in last


def test_switching_to_offline_reuses_the_shared_stages(tmp_path):
    _finish(plan(env_settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"})))
    kinds = _kinds(dry_run("reproduce_qwen2.5-7b.sh", tmp_path, LEARNING="offline"))
    assert [n for n, k in kinds.items() if k == "skip"] == ["load", "difficulty", "dedup", "decontaminate", "traces",
                                                            "clip", "seed_set", "judge_sft"]
    assert kinds["critic_sft"] == kinds["offline"] == "stage"
