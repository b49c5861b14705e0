"""Running an ordered list of stages with completion records: the loop behind the reproduction pipeline
(:mod:`thinkj.pipeline`, a command per stage; ``make demo`` is that pipeline with a CPU recipe).

A stage is done only when its completion record ``<name>.done.json`` exists, parses, and was made with the same
settings and on the same input content (the sha256 of each local file or folder it read). The record is the
stage's last act (temp file + rename), made by one writer: ``stage``, ``settings``, ``inputs`` (role ->
``sha256:…`` or null), ``paths`` (role -> path), ``seconds`` and ``cpu_seconds``, what the caller adds (the
pipeline: command, output, counts), ``finished``.

A record that does not match stops the run in one line naming the setting or the input that differs: reusing it
would hand later stages another experiment's output, and running the stage again would overwrite that experiment.
A record that cannot be read, or is not a JSON object with its settings, is not a completion record.
After a stage that runs, a later stage runs too when it reads what a stage that ran made (or declares no inputs);
the others are still checked against their records. Each stage's output goes to ``<logs>/<stage>.log`` (or the log
its step names); the terminal gets one progress line per stage (``[ i/n] name  wall s (cpu s)  brief``).

One writer per stage: runs that share a RUN_DIR (a recipe sweep's cells, a Slurm array, a run started twice) each
take a stage's lock (:func:`lock_path`, keyed on its completion record, under ``<logs>/locks/``) before running it.
The one that finds it held waits, then reads the record the holder made and skips the stage when it matches, with
the usual checks; stages with records of their own (each cell's online folder) run side by side. A holder whose stage
fails notes it beside the lock (:func:`failure_note`); a process that waited for it stops naming that failure instead
of running the stage again (every waiting cell would fail the same way, one after the other). The next run of the
command tries the stage again; a holder that was killed leaves no note, and the waiter runs the stage.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from thinkj.errors import ThinkJError
from thinkj.fingerprint import tree_sha256
from thinkj.locks import exclusive
from thinkj.records import RecordError, read_json, write_json

RECORD_SUFFIX = ".done.json"


def lock_path(logs: Path, record: Path) -> Path:
    """The lock of the stage whose completion record is ``record``: ``<logs>/locks/<stage>-<hash>.lock``, the hash of
    the record's path relative to the run folder (``logs``'s parent), so nodes that mount the run elsewhere agree;
    outside the stage's folder, whose content is an input of later stages and which a stage may swap whole."""
    base, target = Path(os.path.abspath(logs)).parent, Path(os.path.abspath(record))
    key = (target.relative_to(base) if target.is_relative_to(base) else target).as_posix()
    stage = record.name.removesuffix(RECORD_SUFFIX)
    return logs / "locks" / f"{stage}-{hashlib.sha256(key.encode()).hexdigest()[:12]}.lock"


def failure_note(lock: Path) -> Path:
    """Where a stage's lock holder notes that the stage failed (pid, host, when, the error, its log), beside the lock:
    removed when a process starts the stage, read by a process that waited for the lock."""
    return lock.with_name(lock.name.removesuffix(".lock") + ".failed.json")


class FailedWhileWaiting(ThinkJError):
    """The stage failed in the process this one waited for: not run again here."""


class StageStopped(ThinkJError):
    """A stage's command was stopped by an interrupt or a termination signal (Ctrl-C, a Slurm time limit): not a
    failure that a process waiting for the stage would repeat, so no failure note is left for it."""


# exit statuses of a command stopped by SIGINT or SIGTERM: killed by it (negative), or a shell's / Python's 128 + n
STOP_STATUSES = frozenset({-2, -15, 130, 143})


def _note_failure(note: Path, error: BaseException, log: Path) -> None:
    """Note the stage's failure for the processes waiting for its lock; best effort (a full disk loses the note, and
    a waiter then runs the stage, as before)."""
    detail = str(error).strip().splitlines()
    with contextlib.suppress(OSError, ThinkJError):
        write_json(note, {"pid": os.getpid(), "host": socket.gethostname(), "failed": time.strftime("%Y-%m-%d %H:%M:%S"),
                          "error": detail[0] if detail else type(error).__name__, "log": str(log)})


def _failed_meanwhile(step: Step, note: Path) -> FailedWhileWaiting | None:
    """The error to stop with when the holder this process waited for left a failure note for the stage."""
    try:
        seen = json.loads(note.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no note: the holder was killed or stopped, so this process runs the stage
    if not isinstance(seen, dict):
        return None
    error, log = str(seen.get("error")), str(seen.get("log"))
    return FailedWhileWaiting(
        f"stage {step.name} failed in the process this run waited for (pid {seen.get('pid')} on {seen.get('host')} at "
        f"{seen.get('failed')}): {error}{'' if log in error else f'; its log: {log}'}. Not run again here (it would "
        "likely fail the same way); mend the cause and run the command again to retry it")


def is_record(name: str) -> bool:
    """A completion record: never part of the content of the folder it sits in."""
    return name.endswith(RECORD_SUFFIX)


def fingerprints(paths: Mapping[str, Path], recursive: Collection[str] = ()) -> dict[str, str | None]:
    """What each local input holds: ``sha256:…`` of a file's bytes, or of the top-level files of a folder (every
    file under it for the roles in ``recursive``), ``None`` when nothing is there. Completion records in a folder
    are not its content."""
    return {role: f"sha256:{tree_sha256(path, recursive=role in recursive, ignore=is_record)}"
            if Path(path).exists() else None for role, path in paths.items()}


def write_record(path: Path, stage: str, settings: Mapping[str, Any], inputs: Mapping[str, str | None],
                 paths: Mapping[str, Path], **details: Any) -> Path:
    """A stage's completion record, written atomically; ``details`` are what the caller adds (JSON values)."""
    record = {"stage": stage, "settings": dict(settings), "inputs": dict(inputs),
              "paths": {role: str(p) for role, p in paths.items()}, **details,
              "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return write_json(path, record)


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path``; ``None`` when there is none or it is damaged (unreadable, not an object, no
    settings object, inputs that are not an object): a damaged record is not a completion record."""
    if not path.is_file():
        return None
    try:
        record = read_json(path)
    except (RecordError, OSError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        return None
    if "inputs" in record and not isinstance(record["inputs"], dict):
        return None  # a record made before inputs were fingerprinted has no "inputs" at all
    return record


def _as_json(value: Any) -> Any:
    """``value`` as it reads back from a record (tuples are lists, paths strings), for comparing settings."""
    return json.loads(json.dumps(value, default=str))


def _short(fingerprint: str | None) -> str:
    return "missing" if fingerprint is None else fingerprint[:19] + "…"


def mismatch(record: dict[str, Any], settings: Mapping[str, Any], inputs: Callable[[], dict[str, str | None]],
             paths: Mapping[str, Path]) -> tuple[str, str] | None:
    """How ``record`` differs from the stage as it would run now: ``("settings", "K='a' then, 'b' now; …")``,
    ``("inputs", "<path> sha256:… then, sha256:… now; …")``, or ``None`` when it matches. ``inputs`` is called only
    when the settings match (hashing a model folder costs seconds)."""
    before, now = record["settings"], _as_json(dict(settings))
    changed = [f"{k}={before.get(k, '')!r} then, {now.get(k, '')!r} now"
               for k in sorted(set(before) | set(now)) if before.get(k, "") != now.get(k, "")]
    if changed:
        return "settings", "; ".join(changed)
    then = record.get("inputs")
    if then is None:  # recorded before inputs were fingerprinted: its settings are all it can be checked on
        return None
    current = inputs()
    changed = [f"{paths.get(role, role)} {_short(then.get(role))} then, {_short(current.get(role))} now"
               for role in sorted(set(then) | set(current)) if then.get(role) != current.get(role)]
    return ("inputs", "; ".join(changed)) if changed else None


def check_record(path: Path, stage: str, settings: Mapping[str, Any], inputs: Callable[[], dict[str, str | None]],
                 paths: Mapping[str, Path], *, hint: str = "") -> tuple[dict[str, Any] | None, str]:
    """(the record, "") when the stage is done; (None, why) when it has no completion record. A record made with
    other settings or on other input content is an error naming them, ending with ``hint``."""
    record = read_record(path)
    if record is None:
        return None, "no completion record" if not path.exists() else "its completion record is damaged"
    found = mismatch(record, settings, inputs, paths)
    if found is None:
        return record, ""
    kind, text = found
    what = {"settings": "with other settings", "inputs": "on other input content"}[kind]
    raise ThinkJError(f"{path}: stage {stage} was done {what} ({text}): {hint}")


def _flush_open_streams() -> None:
    """Flush sys.stdout and sys.stderr before the descriptors move; a stream a library closed has nothing to flush
    (the redirect works on the descriptors, not on these objects)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not stream.closed:
            stream.flush()


@contextlib.contextmanager
def output_to(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (file descriptors 1 and 2, so C++ and child output too) to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _flush_open_streams()
    saved = os.dup(1), os.dup(2)
    with path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            _flush_open_streams()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def run_logged(argv: list[str], log: Path) -> int:
    """Run a command, its output shown and copied to ``log``; returns the exit status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as sink:
        sink.write(f"\n$ {shlex.join(argv)}\n".encode())
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert proc.stdout is not None
        for chunk in iter(lambda: proc.stdout.read1(1 << 14), b""):
            sink.write(chunk)
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        return proc.wait()


def run_in_process(argv: list[str], log: Path) -> int:
    """Run a console script's command (``thinkj ...``) or ``python -m <module> ...`` inside this process (no interpreter start, no
    second import of torch and the engines: ~5 s per stage on 2 CPU cores), its output to ``log`` only; returns
    the exit status. Any other command runs as a child (:func:`run_logged`). An exception is the stage's failure,
    its traceback in the log."""
    import runpy
    import traceback
    from importlib.metadata import entry_points

    program = Path(argv[0])
    # a console script by its bare name or as the script beside this interpreter (how the pipeline names it)
    mine = "/" not in argv[0] or program.parent == Path(sys.executable).parent
    scripts = entry_points(group="console_scripts", name=program.name) if mine else ()
    if scripts:  # an installed console script (thinkj): its entry function, as the script would call it
        entry = next(iter(scripts)).load()

        def call() -> None:
            sys.argv = [argv[0], *argv[1:]]
            entry()
    elif len(argv) > 2 and argv[1] == "-m" and Path(argv[0]).name.startswith("python"):
        def call() -> None:
            sys.argv = [argv[2], *argv[3:]]
            loaded = sys.modules.get(argv[2])
            if loaded is not None and callable(getattr(loaded, "main", None)):
                loaded.main()  # imported already: runpy would run a second copy of it
            else:
                runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
    else:
        return run_logged(argv, log)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as sink:
        sink.write(f"\n$ {shlex.join(argv)}  (in process)\n".encode())
    saved = sys.argv
    status = 0
    with output_to(log):
        try:
            call()
        except SystemExit as exc:  # typer / argparse end this way, 0 included
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 -- the stage failed: its traceback goes to its log, the run stops
            traceback.print_exc()
            status = 1
        finally:
            sys.argv = saved
    return status


def cpu_time() -> float:
    """CPU seconds used so far by this process and its waited-for children: comparable between idle and busy machines."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def progress_line(i: int, n: int, name: str, seconds: float | None, cpu: float | None = None, brief: str = "") -> str:
    """``[ 3/14] dedup              2.1 s (cpu    3.9 s)  kept 90 of 96``; a stage not run says ``skipped (done)``."""
    timing = "skipped (done)        " if seconds is None else f"{seconds:6.1f} s (cpu {cpu or 0.0:6.1f} s)"
    return f"[{i:2d}/{n}] {name:15s} {timing}  {brief}".rstrip()


def timings_record(seconds: Mapping[str, float], cpu_seconds: Mapping[str, float], **extra: Any) -> dict[str, Any]:
    """Per-stage wall and CPU seconds with their totals and the load average: what a run's timings file holds."""
    return {**extra, "seconds": dict(seconds), "cpu_seconds": dict(cpu_seconds),
            "total_seconds": round(sum(seconds.values()), 1), "total_cpu_seconds": round(sum(cpu_seconds.values()), 1),
            "load_average": os.getloadavg()}


@dataclass
class Step:
    """One stage as the loop sees it."""

    name: str
    record: Path                       # its completion record
    settings: Mapping[str, Any]        # what its output depends on (its own and every earlier stage's)
    work: Callable[[Path], dict[str, Any]]  # runs it, its output going to the given log; returns what its record adds
    inputs: Callable[[], Mapping[str, Path]] = dict  # role -> local file or folder it reads, asked when it starts
    recursive: tuple[str, ...] = ()    # input roles hashed with every file under them (a source folder)
    always: bool = False               # runs every time: its record is written (it finished) but never consulted
    done: Callable[[dict[str, Any], bool], None] | None = None  # gets its record, made or found (skipped: True)
    brief: Callable[[dict[str, Any]], str] = lambda record: ""  # a few words for its progress line, from its record
    log: str = ""                      # its log's path under the logs folder ("": <name>.log)

    def input_fingerprints(self) -> dict[str, str | None]:
        return fingerprints(self.inputs(), self.recursive)

    def check(self, hint: str = "") -> tuple[dict[str, Any] | None, str]:
        """(record, "") when done, else (None, why); see :func:`check_record`."""
        return check_record(self.record, self.name, self.settings, self.input_fingerprints, self.inputs(), hint=hint)


@dataclass
class Outcome:
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # per stage: its record (made or found)
    seconds: dict[str, float] = field(default_factory=dict)  # wall seconds (a skipped stage: as recorded)
    cpu_seconds: dict[str, float] = field(default_factory=dict)


def _reads_new(step: Step, redone: list[Path], any_ran: bool) -> bool:
    """Whether ``step`` must run because a stage before it ran: it reads a file inside a redone stage's folder, or
    it declares no inputs (so nothing shows it does not)."""
    if not any_ran:
        return False
    paths = [Path(p) for p in step.inputs().values()]
    if not paths:
        return True
    return any(path == folder or path.is_relative_to(folder) for path in paths for folder in redone)


def run_steps(steps: Sequence[Step], *, logs: Path, hint: str = "", out: TextIO | None = None, dry: bool = False,
              announce: Callable[[Step, str], None] | None = None) -> Outcome:
    """Run the stages in order, skipping each one that is done. Once a stage runs, a later one runs too when it
    reads what a stage that ran made (an input inside that stage's folder) or declares no inputs (nothing shows
    what it reads); any other later stage is still checked against its record, so a branch that does not read the
    redone stage's output (the online run beside a redone DPO) is kept. A record made with other settings or on
    other input content stops the run (:func:`check_record`, ``hint`` ending its message). ``dry`` runs nothing
    (the stages count as run). ``announce(step, "skip" | "start")`` prints the caller's own line for those events; without it a
    skipped stage gets a progress line saying so."""
    out = sys.stdout if out is None else out
    outcome = Outcome()
    redone: list[Path] = []  # the folders of the stages that ran: what they made is new
    for i, step in enumerate(steps, 1):
        with contextlib.ExitStack() as held:  # the stage's lock, when taken, until this turn ends (a continue too)
            record = None
            fresh = _reads_new(step, redone, bool(outcome.ran))
            if not step.always and not fresh:
                record, _ = step.check(hint)
            lock = lock_path(logs, step.record)
            note = failure_note(lock)
            if record is None and not dry:  # to be run: by this process alone (another may be running it now)
                waited = held.enter_context(
                    exclusive(lock, f"stage {step.name}", lambda line: print(line, file=out, flush=True)))
                # another process may have finished it between the check above and the lock (then no wait was needed)
                if not step.always and (waited or (not fresh and step.record.exists())):
                    record = _found_after_wait(step, fresh, hint)
                failed = _failed_meanwhile(step, note) if record is None and waited else None
                if failed is not None:
                    print(f"[{i:2d}/{len(steps)}] {step.name:15s} FAILED in the process this run waited for",
                          file=out, flush=True)
                    raise failed
            if record is not None:
                outcome.skipped.append(step.name)
                outcome.records[step.name] = record
                outcome.seconds[step.name] = float(record.get("seconds") or 0.0)
                outcome.cpu_seconds[step.name] = float(record.get("cpu_seconds") or 0.0)
                if step.done is not None:
                    step.done(record, True)
                if announce is not None:
                    announce(step, "skip")
                else:
                    print(progress_line(i, len(steps), step.name, None, brief=step.brief(record)), file=out, flush=True)
                continue
            if announce is not None:
                announce(step, "start")
            outcome.ran.append(step.name)
            redone.append(step.record.parent)
            if dry:
                continue
            log = logs / (step.log or f"{step.name}.log")
            paths = dict(step.inputs())
            inputs = fingerprints(paths, step.recursive)  # what the stage starts from, not what they became meanwhile
            with contextlib.suppress(OSError):
                note.unlink(missing_ok=True)  # an earlier run's failure: this one tries again
            start, cpu_start = time.monotonic(), cpu_time()
            try:
                details = step.work(log)
            except BaseException as error:
                print(f"[{i:2d}/{len(steps)}] {step.name:15s} FAILED after {time.monotonic() - start:.0f} s; "
                      f"log: {log}", file=out, flush=True)
                if isinstance(error, Exception) and not isinstance(error, StageStopped):  # a waiter runs a stopped one
                    _note_failure(note, error, log)
                raise
            seconds, cpu = round(time.monotonic() - start, 1), round(cpu_time() - cpu_start, 1)
            outcome.seconds[step.name], outcome.cpu_seconds[step.name] = seconds, cpu
            record = {"stage": step.name, "settings": dict(step.settings), **details}
            write_record(step.record, step.name, step.settings, inputs, paths, seconds=seconds, cpu_seconds=cpu,
                         **details)
            record = read_record(step.record) or record
            outcome.records[step.name] = record
            if step.done is not None:
                step.done(record, False)
            print(progress_line(i, len(steps), step.name, seconds, cpu, step.brief(record)), file=out, flush=True)
    return outcome


def _found_after_wait(step: Step, fresh: bool, hint: str) -> dict[str, Any] | None:
    """The record another process made while this one waited for the stage's lock, when it does for this run. A stage
    that reads what this run remade (``fresh``) runs again unless the record matches its inputs now; any other is
    checked as usual (a record made otherwise stops the run)."""
    if not fresh:
        return step.check(hint)[0]
    record = read_record(step.record)
    if record is None or mismatch(record, step.settings, step.input_fingerprints, step.inputs()) is not None:
        return None
    return record
