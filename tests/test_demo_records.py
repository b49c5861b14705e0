"""The demo's completion records (``thinkj smoke``): the same loop and record writer as the reproduction pipeline.

A rerun with the same plan skips every finished stage and hands its artifacts on; a changed plan field redoes the
first stage that reads it and every later one; a damaged record, or a deleted output, is not a completion. On the
old code the demo kept no records: a rerun ran every stage again.

The runs here use the demo's first three stages (the tiny model, the fruit task's pairs, the base judge on 16
held-out pairs): ~20 s each on 2 cores.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from thinkj import stage_runner
from thinkj.demo import runner
from thinkj.demo.plans import DemoPlan

FIRST = ("model", "synthetic_data", "judge_base")


@pytest.fixture
def first_stages(monkeypatch):
    monkeypatch.setattr(runner, "STAGES", [s for s in runner.STAGES if s[1] in FIRST])


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A run folder in which the three stages finished."""
    run_dir = tmp_path_factory.mktemp("demo") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "STAGES", [s for s in runner.STAGES if s[1] in FIRST])
        runner.run_demo(run_dir, model="tiny")
    return run_dir


def _copy(finished: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    return run_dir


def _lines(out: str) -> dict[str, str]:
    """Stage name -> its progress line."""
    return {line.split()[2]: line for line in out.splitlines() if line.startswith("[")}


def _ran(out: str) -> list[str]:
    return [name for name, line in _lines(out).items() if "skipped (done)" not in line]


def test_a_rerun_skips_every_finished_stage_and_restores_its_artifacts(finished, tmp_path, first_stages, capsys):
    run_dir = _copy(finished, tmp_path)
    records = {name: (run_dir / name / f"{name}.done.json") for name in FIRST}
    before = {name: path.read_bytes() for name, path in records.items()}
    capsys.readouterr()
    ctx = runner.run_demo(run_dir, model="tiny")
    lines = _lines(capsys.readouterr().out)
    assert list(lines) == list(FIRST) and all("skipped (done)" in line for line in lines.values())
    assert "tiny (" in lines["model"] and "512 train / 100 held-out pairs" in lines["synthetic_data"]
    assert {name: path.read_bytes() for name, path in records.items()} == before  # records untouched
    # what later stages read is back, as Paths, under the folder the run is in now
    assert ctx.artifacts["base_model"] == run_dir / "tiny_model" / "model" == ctx.artifacts["models"]["base"]
    assert ctx.artifacts["test_pairs"] == run_dir / "synthetic_data" / "test.jsonl"
    assert ctx.summaries["judge_base"]["n"] == 32
    stages = json.loads((run_dir / "demo_stages.json").read_text())
    assert stages["ran"] == [] and stages["skipped"] == list(FIRST)
    assert stages["seconds"] == {n: json.loads(p.read_text())["seconds"] for n, p in records.items()}


def test_a_changed_plan_field_redoes_the_stage_that_reads_it_and_those_after(finished, tmp_path, first_stages,
                                                                              capsys):
    run_dir = _copy(finished, tmp_path)
    capsys.readouterr()
    runner.run_demo(run_dir, model="tiny", overrides=["base_preview=8"])
    out = capsys.readouterr().out
    assert _ran(out) == ["judge_base"]
    assert "redone: done before with other settings (base_preview=16 then, 8 now)" in _lines(out)["judge_base"]
    record = json.loads((run_dir / "judge_base" / "judge_base.done.json").read_text())
    assert record["settings"]["base_preview"] == 8 and record["summary"]["n"] == 16
    runner.run_demo(run_dir, model="tiny", overrides=["base_preview=8", "test_pairs=40"])
    assert _ran(capsys.readouterr().out) == ["synthetic_data", "judge_base"]
    assert len((run_dir / "synthetic_data" / "test.jsonl").read_text().splitlines()) == 40
    runner.run_demo(run_dir, model="tiny")  # back to the plan's values: never a record made with other settings
    assert _ran(capsys.readouterr().out) == ["synthetic_data", "judge_base"]


DAMAGED = [b"", b"{", b"[]", b'{"stage": "load"}', b'{"settings": 3}', b"\xff\xfe", b'{"settings": {}, "inputs": 3}']


@pytest.mark.parametrize("damage", DAMAGED)
def test_a_damaged_record_is_no_completion_for_either_caller(tmp_path, damage):
    from thinkj.pipeline import is_done, plan, settings

    load = plan(settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))[0]
    load.record.parent.mkdir(parents=True)
    load.record.write_bytes(damage)
    assert not is_done(load)  # not refused either: there is nothing to compare
    for policy in (stage_runner.REFUSE, stage_runner.REDO):
        record, why = stage_runner.check_record(load.record, "load", {}, dict, {}, policy=policy)
        assert record is None and why == "its completion record is damaged"


def test_a_damaged_demo_record_redoes_its_stage_and_those_after(finished, tmp_path, first_stages, capsys):
    run_dir = _copy(finished, tmp_path)
    (run_dir / "synthetic_data" / "synthetic_data.done.json").write_text('{"stage": "synthetic_data", ')
    capsys.readouterr()
    runner.run_demo(run_dir, model="tiny")
    assert _ran(capsys.readouterr().out) == ["synthetic_data", "judge_base"]
    assert stage_runner.read_record(run_dir / "synthetic_data" / "synthetic_data.done.json") is not None


def test_a_deleted_or_edited_output_redoes_its_stage(finished, tmp_path, first_stages, capsys):
    run_dir = _copy(finished, tmp_path)
    (run_dir / "synthetic_data" / "test.jsonl").unlink()
    capsys.readouterr()
    runner.run_demo(run_dir, model="tiny")
    out = capsys.readouterr().out
    assert _ran(out) == ["synthetic_data", "judge_base"] and "test.jsonl sha256:" in _lines(out)["synthetic_data"]
    (run_dir / "judge_base" / "judgments.jsonl").write_text("")  # what the stage wrote beside its artifacts
    runner.run_demo(run_dir, model="tiny")
    assert _ran(capsys.readouterr().out) == ["judge_base"]


def test_only_reruns_the_named_stage_with_the_others_restored(finished, tmp_path, first_stages, capsys):
    run_dir = _copy(finished, tmp_path)
    capsys.readouterr()
    ctx = runner.run_demo(run_dir, model="tiny", only=["judge_base"])
    lines = _lines(capsys.readouterr().out)
    assert list(lines) == ["judge_base"] and lines["judge_base"].startswith("[ 1/1] judge_base ")
    assert "skipped" not in lines["judge_base"] and ctx.artifacts["test_pairs"].is_file()


def test_the_pipeline_and_the_demo_write_one_record_format(finished, tmp_path):
    from thinkj.errors import ThinkJError
    from thinkj.pipeline import REDO_HINT, plan, settings, write_record

    load = plan(settings({"RUN_DIR": str(tmp_path), "REWARD_PRESET": "thinkj_qwen"}))[0]
    load.output.parent.mkdir(parents=True)
    load.output.write_text("{}\n")
    pipeline = json.loads(write_record(load).read_text())
    demo = json.loads((finished / "synthetic_data" / "synthetic_data.done.json").read_text())
    shared = ["stage", "settings", "inputs", "paths"]
    assert list(pipeline)[:4] == list(demo)[:4] == shared and list(pipeline)[-1] == list(demo)[-1] == "finished"
    assert {"seconds", "cpu_seconds"} <= set(demo)  # the loop adds them to every record it writes
    assert list(pipeline)[4:-1] == ["argv", "output", "counts"]
    assert list(demo)[4:-1] == ["seconds", "cpu_seconds", "summary", "artifacts", "outputs", "output_paths"]
    # one check reads both; the policy decides what a mismatch means
    path, now = load.record, dict(load.settings, SOURCE_LIMIT="2")
    ask = lambda s, policy: stage_runner.check_record(path, "load", s, lambda: {}, {}, policy=policy,  # noqa: E731
                                                      hint=REDO_HINT)
    assert ask(load.settings, stage_runner.REDO)[0] == pipeline
    assert ask(now, stage_runner.REDO) == (None, "done before with other settings (SOURCE_LIMIT='' then, '2' now)")
    with pytest.raises(ThinkJError) as refused:
        ask(now, stage_runner.REFUSE)
    assert str(refused.value) == (f"{path}: stage load was done with other settings (SOURCE_LIMIT='' then, '2' now): "
                                  f"{REDO_HINT}")


def test_every_plan_field_belongs_to_a_stage():
    assert list(runner.STAGE_FIELDS) == [name for _, name, _ in sorted(runner.STAGES)]
    claimed = {f for names in runner.STAGE_FIELDS.values() for f in names}
    assert claimed == {f.name for f in fields(DemoPlan)}
    settings = runner.stage_settings(runner.PLANS["tiny"], 0, list(runner.STAGE_FIELDS))
    assert set(settings["summary"]) >= claimed | {"seed", "shared_data"}  # the summary records the whole plan
    assert "dpo_steps" not in settings["critic_pairs"] and "dpo_steps" in settings["online"]
