"""One writer per stage when processes share a RUN_DIR (a recipe sweep's cells submitted together, a Slurm array over
a grid, a `thinkj run` started twice): real processes run the pipeline's stage loop
(:func:`thinkj.pipeline.stage_runner.run_steps`) on one folder. The stage the first one is running is run once: the
second waits for it, says who holds it, then finds its completion record and skips it. Stages with their own records
(each cell's online folder) run side by side.
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thinkj import locks
from thinkj.pipeline import stage_runner

# One or two stages: "a" writes a/a.txt through its own temporary name (as the real stages do) after sleeping, and
# notes in ran.txt that it ran (with FAIL_A set, it fails instead after sleeping); "b" (when asked) reads a/a.txt and
# writes <folder>/b.txt. argv: RUN WHO SECONDS [B_FOLDER].
LOOP = """
import os, pathlib, sys, time
from thinkj.pipeline import stage_runner

run, who, seconds = pathlib.Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
run.mkdir(parents=True, exist_ok=True)

def note(what):
    with open(run / "ran.txt", "a") as handle:
        handle.write(f"{who} {what}\\n")

def make_a(log):
    note("a")
    out = run / "a" / "a.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name("a.txt.tmp")
    tmp.write_text("made once\\n")
    time.sleep(seconds)
    if os.environ.get("FAIL_A"):
        raise RuntimeError(os.environ["FAIL_A"])
    tmp.rename(out)
    return {}

steps = [stage_runner.Step("a", run / "a" / "a.done.json", {"K": "1"}, make_a,
                           inputs=lambda: {})]
if len(sys.argv) > 4:
    folder = run / sys.argv[4]

    def make_b(log):
        note(f"b {folder.name}")
        time.sleep(seconds)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "b.txt").write_text((run / "a" / "a.txt").read_text())
        return {}

    steps.append(stage_runner.Step("b", folder / "b.done.json", {"K": "1"}, make_b,
                                   inputs=lambda: {"a": run / "a" / "a.txt"}))
outcome = stage_runner.run_steps(steps, logs=run / "logs")
print("RAN", " ".join(outcome.ran) or "-", "SKIPPED", " ".join(outcome.skipped) or "-", flush=True)
"""


def _start(run: Path, who: str, seconds: float, *extra: str, fail: str = "") -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "FAIL_A"} | ({"FAIL_A": fail} if fail else {})
    return subprocess.Popen([sys.executable, "-c", LOOP, str(run), who, str(seconds), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for(path: Path, text: str, proc: subprocess.Popen, seconds: float = 60.0) -> None:
    """Until ``path`` holds ``text`` (``proc`` is inside that stage)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.is_file() and text in path.read_text():
            return
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {path} held {text!r}: {proc.stdout.read()}")
        time.sleep(0.05)
    raise AssertionError(f"{path} never held {text!r}")


def _finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    return out


def test_a_stage_another_process_is_running_is_waited_for_and_skipped(tmp_path):
    run = tmp_path / "run"
    first = _start(run, "first", 2.0)
    _wait_for(run / "ran.txt", "first a", first)  # the first is inside stage a, holding its temporary file
    second = _start(run, "second", 0.0)
    first_out, second_out = _finish(first), _finish(second)
    assert (run / "ran.txt").read_text() == "first a\n"  # run once, by the first
    assert (run / "a" / "a.txt").read_text() == "made once\n" and not (run / "a" / "a.txt.tmp").exists()
    assert "RAN a SKIPPED -" in first_out and "RAN - SKIPPED a" in second_out
    waiting = [line for line in second_out.splitlines() if "waiting" in line]
    assert len(waiting) == 1, second_out
    assert waiting[0].startswith("stage a: another process (pid ") and f"pid {first.pid} on " in waiting[0]
    assert str(run / "logs" / "locks") in waiting[0]


def _wait_until_waiting(run: Path, proc: subprocess.Popen) -> None:
    """Until ``proc`` has said it waits for stage a's lock (its first line)."""
    line = proc.stdout.readline()
    assert "waiting for it to finish" in line, line + proc.stdout.read()


def test_a_stage_that_failed_in_the_holder_is_not_run_again_by_the_process_that_waited(tmp_path):
    """Every cell waiting for a shared stage would otherwise run it again after the holder failed, one after the
    other, each failing the same way. The waiter stops naming the holder's error and log; the next run retries."""
    run = tmp_path / "run"
    first = _start(run, "first", 2.0, fail="CUDA out of memory")
    _wait_for(run / "ran.txt", "first a", first)
    second = _start(run, "second", 0.0)
    _wait_until_waiting(run, second)
    first_out, _ = first.communicate(timeout=120)
    second_out, _ = second.communicate(timeout=120)
    assert first.returncode != 0 and "CUDA out of memory" in first_out
    assert second.returncode != 0 and (run / "ran.txt").read_text() == "first a\n"  # not run again by the waiter
    said = second_out.strip().splitlines()
    assert "a               FAILED in the process this run waited for" in second_out
    assert f"stage a failed in the process this run waited for (pid {first.pid} on " in said[-1]
    assert "CUDA out of memory" in said[-1] and f"its log: {run / 'logs' / 'a.log'}" in said[-1]
    again = _start(run, "again", 0.0)  # the command run again: it tries the stage, and the note goes
    assert "RAN a SKIPPED -" in _finish(again) and (run / "ran.txt").read_text() == "first a\nagain a\n"
    assert not list((run / "logs" / "locks").glob("*.failed.json"))


def test_a_stage_whose_holder_was_killed_is_run_by_the_process_that_waited(tmp_path):
    """A kill leaves no failure note (only an exception does): the waiter runs the stage itself."""
    run = tmp_path / "run"
    first = _start(run, "first", 30.0)
    _wait_for(run / "ran.txt", "first a", first)
    second = _start(run, "second", 0.0)
    _wait_until_waiting(run, second)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    assert "RAN a SKIPPED -" in _finish(second)
    assert (run / "ran.txt").read_text() == "first a\nsecond a\n" and (run / "a" / "a.txt").is_file()


def test_stages_with_their_own_records_run_side_by_side(tmp_path):
    """Two cells of a sweep: the shared stage a runs once; each cell's stage b (its own folder) runs in each."""
    run = tmp_path / "run"
    first = _start(run, "first", 1.5, "cell1")
    _wait_for(run / "ran.txt", "first a", first)
    second = _start(run, "second", 1.5, "cell2")
    _wait_for(run / "ran.txt", "second b cell2", second)  # the second's b started while the first's b ran or had run
    first_out, second_out = _finish(first), _finish(second)
    assert sorted((run / "ran.txt").read_text().splitlines()) == ["first a", "first b cell1", "second b cell2"]
    assert "RAN a b SKIPPED -" in first_out and "RAN b SKIPPED a" in second_out
    assert (run / "cell1" / "b.txt").read_text() == (run / "cell2" / "b.txt").read_text() == "made once\n"


def test_after_waiting_a_record_made_with_other_settings_is_refused(tmp_path):
    """The waiter re-reads the record it waited for with the usual checks: done on other settings is refused."""
    run = tmp_path / "run"
    first = _start(run, "first", 1.5)
    _wait_for(run / "ran.txt", "first a", first)
    step = stage_runner.Step("a", run / "a" / "a.done.json", {"K": "2"}, lambda log: {}, inputs=lambda: {})
    with pytest.raises(stage_runner.ThinkJError, match="stage a was done with other settings"):
        stage_runner.run_steps([step], logs=run / "logs", out=io.StringIO())
    _finish(first)


def test_the_lock_is_keyed_on_the_record_not_on_the_stage_name(tmp_path):
    logs = tmp_path / "run" / "logs"
    one = stage_runner.lock_path(logs, tmp_path / "run" / "cell1" / "online.done.json")
    two = stage_runner.lock_path(logs, tmp_path / "run" / "cell2" / "online.done.json")
    assert one != two and one.parent == two.parent == logs / "locks" and one.name.startswith("online-")
    # the same record reached through another spelling of the path is the same lock
    same = stage_runner.lock_path(logs, tmp_path / "run" / "x" / ".." / "cell1" / "online.done.json")
    assert same == one


def test_a_filesystem_without_locks_is_said_once_and_the_run_goes_on(tmp_path, monkeypatch):
    """Lustre mounted without ``-o flock`` answers flock with ENOSYS (NFS without lockd: ENOLCK). No such mount here:
    the call is made to answer as one would; what is tested is the loop's answer to it."""
    def no_flock(handle, operation):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    monkeypatch.setattr(locks, "_UNLOCKED_WARNED", set())
    out = io.StringIO()
    made = []
    steps = [stage_runner.Step(name, tmp_path / name / f"{name}.done.json", {}, lambda log, n=name: made.append(n) or {})
             for name in ("a", "b")]
    outcome = stage_runner.run_steps(steps, logs=tmp_path / "logs", out=out)
    assert outcome.ran == made == ["a", "b"]
    said = [line for line in out.getvalue().splitlines() if "cannot lock" in line]
    assert len(said) == 1 and "Function not implemented" in said[0] and "-o flock" in said[0]


HOLD = """
import sys, time
from pathlib import Path
from thinkj.locks import exclusive
from thinkj.pipeline.stage_runner import lock_path
with exclusive(lock_path(Path(sys.argv[1]), Path(sys.argv[2])), "holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


@pytest.mark.parametrize("content, b_runs", [("same\n", False), ("other\n", True)])
def test_a_stage_that_reads_what_this_run_remade_is_skipped_after_waiting_only_when_its_record_fits(
        tmp_path, content, b_runs):
    """Stage a runs every time (as the tables stage does), so b reads new output and would run; it waited for b's
    lock meanwhile, and the record b's holder left is kept when it was made on what a holds now, else b runs."""
    run = tmp_path / "run"
    made: list[str] = []

    def steps(text: str) -> list[stage_runner.Step]:
        a_out = run / "a" / "a.txt"

        def make_a(log):
            a_out.parent.mkdir(parents=True, exist_ok=True)
            a_out.write_text(text)
            return {}

        def make_b(log):
            made.append("b")
            (run / "b").mkdir(parents=True, exist_ok=True)
            (run / "b" / "b.txt").write_text(a_out.read_text())
            return {}

        return [stage_runner.Step("a", run / "a" / "a.done.json", {}, make_a, always=True),
                stage_runner.Step("b", run / "b" / "b.done.json", {}, make_b, inputs=lambda: {"a": a_out})]

    stage_runner.run_steps(steps("same\n"), logs=run / "logs", out=io.StringIO())
    assert made == ["b"]
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run / "logs"), str(run / "b" / "b.done.json"), "1.5"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    out = io.StringIO()
    outcome = stage_runner.run_steps(steps(content), logs=run / "logs", out=out)
    holder.wait(timeout=60)
    assert "stage b: another process (pid" in out.getvalue()
    assert made == (["b", "b"] if b_runs else ["b"])
    assert outcome.ran == (["a", "b"] if b_runs else ["a"]) and (run / "b" / "b.txt").read_text() == content


def test_a_record_written_between_the_check_and_the_lock_is_found(tmp_path, monkeypatch):
    """The other process finished the stage (record written, lock released) just after this one found no record
    and just before it took the lock, so it never waited: the record is read again under the lock, not overwritten."""
    made: list[str] = []
    step = stage_runner.Step("a", tmp_path / "a" / "a.done.json", {"K": "1"}, lambda log: made.append("a") or {})
    real = stage_runner.exclusive

    def finished_meanwhile(path, what, log):
        stage_runner.write_record(step.record, "a", {"K": "1"}, {}, {}, seconds=1.0, cpu_seconds=1.0)
        return real(path, what, log)

    monkeypatch.setattr(stage_runner, "exclusive", finished_meanwhile)
    outcome = stage_runner.run_steps([step], logs=tmp_path / "logs", out=io.StringIO())
    assert made == [] and outcome.skipped == ["a"]


def test_a_lock_the_disk_has_no_room_for_is_one_line_naming_it(tmp_path):
    """A run folder on a file system out of inodes: the stage lock cannot be made, and the stage loop stops with one
    WriteError naming the lock file, before the stage runs. A real tmpfs of 4 inodes, where this machine lets the
    test mount one."""
    import shutil

    from thinkj.atomic import WriteError

    root = tmp_path / "disk"
    root.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot make a small file system to fill")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k,nr_inodes=4", "tmpfs", str(root)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        for i in range(8):  # take every inode left
            try:
                (root / f"f{i}").touch()
            except OSError as err:
                assert err.errno == errno.ENOSPC
                break
        made: list[str] = []
        step = stage_runner.Step("a", tmp_path / "a" / "a.done.json", {}, lambda log: made.append("a") or {})
        with pytest.raises(WriteError) as failed:
            stage_runner.run_steps([step], logs=root / "logs", out=io.StringIO())
        assert str(failed.value).startswith(f"{root / 'logs' / 'locks'}")
        assert "No space left on device" in str(failed.value) and made == []
    finally:
        subprocess.run(["umount", str(root)], check=False)
