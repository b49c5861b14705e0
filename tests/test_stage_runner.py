"""The stage loop shared by the reproduction pipeline and the demo (:mod:`thinkj.pipeline.stage_runner`), as the pipeline runs
it: real commands, their output in per-stage logs, a progress line per stage, per-stage seconds in each completion
record and in ``<RUN_DIR>/logs/stage_times.json``; a rerun skips both stages, other settings are refused.

The stage list is two small Python commands in place of the paper's (which need models and a teacher); the loop,
the records and their checks are the pipeline's own.
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
from pathlib import Path

import pytest

import thinkj.pipeline.run as pipeline
from thinkj.errors import ThinkJError
from thinkj.pipeline import stage_runner
from thinkj.pipeline.run import StageFailed
from thinkj.pipeline.settings import env_settings
from thinkj.pipeline.stage import Stage

WRITE = "import pathlib, sys; p = pathlib.Path(sys.argv[1]); p.parent.mkdir(parents=True, exist_ok=True); " \
        "p.write_text(''.join(line + chr(10) for line in sys.argv[2:])); print('wrote', p)"


def _two_stages(run: Path):
    def plan(s: dict[str, str]) -> list[Stage]:
        a, b = run / "a" / "a.txt", run / "b" / "b.jsonl"
        return [Stage("a", ["python", "-c", WRITE, str(a), "x"], a, {"SOURCE_LIMIT": s["SOURCE_LIMIT"]}),
                Stage("b", ["python", "-c", WRITE, str(b), '{"r": 1}', '{"r": 2}'], b,
                               {"SOURCE_LIMIT": s["SOURCE_LIMIT"]}, {"pairs": a})]
    return plan


def test_the_pipeline_loop_logs_times_records_and_skips(tmp_path, monkeypatch):
    run = tmp_path / "run"
    monkeypatch.setattr(pipeline, "plan", _two_stages(run))
    s = env_settings({"RUN_DIR": str(run)})
    out = io.StringIO()
    assert pipeline.run_pipeline(s, out=out) == ["a", "b"]
    lines = out.getvalue().splitlines()
    assert lines[0] == f"# stage a -> {run / 'a' / 'a.txt'}" and lines[2].startswith("[ 1/2] a ")
    assert lines[3] == f"# stage b -> {run / 'b' / 'b.jsonl'}"
    assert lines[5].startswith("[ 2/2] b ") and " s (cpu " in lines[5] and lines[5].endswith("rows=2")
    assert "wrote" in (run / "logs" / "b.log").read_text()
    record = json.loads((run / "b" / "b.done.json").read_text())
    assert record["inputs"]["pairs"].startswith("sha256:") and record["counts"] == {"rows": 2}
    times = json.loads((run / "logs" / "stage_times.json").read_text())
    assert times["ran"] == ["a", "b"] and times["seconds"]["b"] == record["seconds"]
    assert set(times) >= {"cpu_seconds", "total_seconds", "total_cpu_seconds", "load_average"}

    again = io.StringIO()
    assert pipeline.run_pipeline(s, out=again) == []
    assert again.getvalue().splitlines()[:2] == [f"# skip a: done ({run / 'a' / 'a.done.json'})",
                                                 f"# skip b: done ({run / 'b' / 'b.done.json'})"]
    assert again.getvalue().splitlines()[-1].startswith("stage time 0 s wall")  # skipped: as recorded, 0 now
    times_again = json.loads((run / "logs" / "stage_times.json").read_text())
    assert times_again["skipped"] == ["a", "b"] and times_again["seconds"] == times["seconds"]

    with pytest.raises(ThinkJError) as refused:
        pipeline.run_pipeline(env_settings({"RUN_DIR": str(run), "SOURCE_LIMIT": "2"}), out=io.StringIO())
    assert str(refused.value) == (f"{run / 'a' / 'a.done.json'}: stage a was done with other settings "
                                  f"(SOURCE_LIMIT='' then, '2' now): {pipeline.REDO_HINT}")


def test_a_failed_command_is_named_with_its_log_and_leaves_no_record(tmp_path, monkeypatch):
    run = tmp_path / "run"
    out_file = run / "a" / "a.txt"
    monkeypatch.setattr(pipeline, "plan", lambda s: [Stage("a", ["python", "-c", "raise SystemExit(3)"],
                                                                    out_file)])
    out = io.StringIO()
    with pytest.raises(StageFailed, match=f"stage a failed \\(exit 3\\); its log: {run / 'logs' / 'a.log'}"):
        pipeline.run_pipeline(env_settings({"RUN_DIR": str(run)}), out=out)
    assert out.getvalue().splitlines()[-1].startswith("[ 1/1] a               FAILED after ")
    assert not list(run.rglob("*.done.json"))
    note = json.loads(next((run / "logs" / "locks").glob("a-*.failed.json")).read_text())  # for a waiting process
    assert note["pid"] == os.getpid() and note["log"] == str(run / "logs" / "a.log") and "(exit 3)" in note["error"]


@pytest.mark.parametrize("code", ["import os, signal; os.kill(os.getpid(), signal.SIGTERM)", "raise SystemExit(130)"])
def test_a_command_stopped_by_a_signal_leaves_no_failure_note(tmp_path, monkeypatch, code):
    """A Slurm time limit (SIGTERM) or a Ctrl-C that the command caught (exit 130) stops the stage; a process waiting
    for it runs it then, rather than stopping as after a failure."""
    run = tmp_path / "run"
    monkeypatch.setattr(pipeline, "plan", lambda s: [Stage("a", ["python", "-c", code], run / "a" / "a.txt")])
    with pytest.raises(pipeline.StageStopped, match="stage a failed \\(exit (-15|130)\\)"):
        pipeline.run_pipeline(env_settings({"RUN_DIR": str(run)}), out=io.StringIO())
    assert (run / "logs" / "locks").is_dir() and not list((run / "logs" / "locks").glob("*.failed.json"))


def test_in_process_runs_the_console_script_the_pipeline_names_by_path(tmp_path, capfd):
    """The pipeline names a stage's program once, as the script beside this interpreter; in process, that script
    runs as its entry function, not as a child."""
    beside = Path(sys.executable).parent / "thinkj"
    if not beside.is_file():
        pytest.skip(f"no thinkj console script beside {sys.executable} (install the package with pip install -e .)")
    assert pipeline._program("thinkj") == str(beside)
    log = tmp_path / "help.log"
    with capfd.disabled():  # pytest's capture holds sys.stdout; the run sends file descriptor 1 to the log
        assert stage_runner.run_in_process([str(beside), "--help"], log) == 0
    text = re.sub(r"\x1b\[[0-9;]*m", "", log.read_text())  # FORCE_COLOR (CI) colours the help
    assert "(in process)" in text and "Usage: thinkj [OPTIONS]" in text


def test_output_to_redirects_with_a_closed_sys_stderr(tmp_path, monkeypatch, capfd):
    """A library that closed sys.stderr must not stop a stage's output from reaching its log (the redirect moves
    descriptors; a closed stream has nothing to flush). Failed with ``ValueError: I/O operation on closed file``."""
    closed = open(os.devnull, "w")  # noqa: SIM115  (a file object raises on flush once closed; StringIO does not)
    closed.close()
    monkeypatch.setattr(sys, "stderr", closed)
    log = tmp_path / "stage.log"
    with stage_runner.output_to(log):
        os.write(2, b"to the log\n")
    assert log.read_text() == "to the log\n"
