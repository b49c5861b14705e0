"""Launch a sweep's runs, remember how far each got, and fill its table from the results.

State lives in ``<sweep_dir>/state.json`` (rewritten atomically after every step): per run, its settings,
status and how many of its steps finished. A run is finished only when ``<run_dir>/SWEEP_DONE.json`` exists,
and that marker is written only after every results JSON of the run exists; it records the run's identity (the
hash in its name: settings, commands, results paths, tags), and a marker of another identity does not count. A
rerun therefore skips finished runs and continues an interrupted one at its first unfinished step (the engines
resume inside a step).

Several sweep processes may share a sweep folder (the command started twice, Slurm array tasks with ``--only``): a
run's steps are run by one of them at a time (a lock per run under ``<sweep_dir>/locks/``; the other waits, then
finds the run done or continues it where it stopped), and each save of ``state.json`` keeps the entries the other
processes wrote; with ``ray``, a job another process submitted is found in the state and not submitted again.

``state.json`` only records progress: when it is unreadable (a truncated or hand-edited file) the sweep stops
with a one-line error saying so, rather than starting over; deleting it is safe -- finished runs are known by
their done markers, and an unfinished run starts again at its first step. A done marker that cannot be read
stops the sweep the same way, naming the marker.

Launchers: ``local`` (subprocesses, one step after another), ``inprocess`` (``thinkj ...`` steps inside this
Python process -- the same commands without paying the imports each time; for CPU demos and tests),
``print`` (the commands, nothing run or recorded), ``ray`` (each run becomes one ``ray job submit`` whose last
command writes the done marker on the cluster; with ``wait`` the sweep waits for each job before the next, and a
rerun of an interrupted sweep waits for a job still running instead of submitting it twice).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from thinkj.atomic import disk_errors
from thinkj.errors import StageIncomplete, ThinkJError, exit_on_user_error
from thinkj.locks import exclusive
from thinkj.records import RecordError, read_json, write_json
from thinkj.sweep.sweep_file import Run, SweepSpec, expand

DONE_FILE = "SWEEP_DONE.json"
STATE_FILE = "state.json"
LAUNCHERS = ("local", "inprocess", "print", "ray")


def read_marker(run_dir: Path) -> dict[str, Any] | None:
    """The run's done marker, None when there is none; an unreadable one is a one-line error naming it."""
    marker = Path(run_dir) / DONE_FILE
    if not marker.exists():
        return None
    try:
        record = read_json(marker)
    except RecordError as err:
        raise ThinkJError(f"{err}: a damaged done marker; delete it and rerun the sweep to run that run's steps "
                          "again (each step resumes what it had finished)") from None
    if not isinstance(record, dict):
        raise ThinkJError(f"{marker}: a done marker is a JSON object, got {type(record).__name__}; delete it and "
                          "rerun the sweep to run that run's steps again")
    return record


def is_done(run: Run) -> bool:
    """Finished: a done marker of this run's identity, and every results JSON exists."""
    record = read_marker(run.run_dir)
    if record is None or not all(p.exists() for p in run.results):
        return False
    recorded = record.get("identity")
    return recorded is None or recorded == run.identity.get("hash")


def mark_done(run_dir: Path, results: list[Path], extra: dict[str, Any] | None = None) -> Path:
    """Write the done marker, refusing while any results JSON is missing."""
    missing = [str(p) for p in results if not Path(p).exists()]
    if missing:
        raise StageIncomplete(f"run {run_dir.name}: steps finished but results are missing: {missing} (rerun the "
                              "sweep: a run without its results runs its steps again)")
    return write_json(Path(run_dir) / DONE_FILE, {"results": [str(p) for p in results],
                                                  "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **(extra or {})})


RECOVERY = (f"this file only records the sweep's progress: delete it (or move it aside) and rerun -- finished runs "
            f"are known by their done markers ({DONE_FILE}) and are not run again; an unfinished run starts again at "
            "its first step")


class SweepState:
    """``state.json`` as this process sees it. Several sweep processes may share a sweep folder (a command started
    twice, Slurm array tasks with ``--only``): :meth:`save` writes this process's runs into what the file holds
    now, under a lock, so no process's save drops another's entries; :meth:`fresh` re-reads one run's entry."""

    def __init__(self, sweep_dir: Path, spec: SweepSpec):
        self.path = Path(sweep_dir) / STATE_FILE
        self.spec = spec
        self.mine: set[str] = set()  # the runs this process has handled: its entries win when it saves
        self.data: dict[str, Any] = {"sweep": spec.name, "spec": str(spec.path), "runs": {}}
        if self.path.exists():
            self.data = self._read(spec)

    def _read(self, spec: SweepSpec) -> dict[str, Any]:
        try:
            data = read_json(self.path)
        except RecordError as err:
            raise ThinkJError(f"{err}; {RECOVERY}") from None
        if not isinstance(data, dict) or not isinstance(data.get("runs"), dict):
            raise ThinkJError(f"{self.path}: not a sweep state (an object with 'runs'); {RECOVERY}")
        if data.get("sweep") not in (None, spec.name):
            raise ThinkJError(f"{self.path}: holds the state of sweep {data['sweep']!r}, not {spec.name!r}: "
                              "give this sweep its own --sweep-dir")
        for name, entry in data["runs"].items():
            if not (isinstance(entry, dict) and isinstance(entry.get("status"), str)
                    and all(isinstance(entry.get(k), int) and not isinstance(entry.get(k), bool) and entry[k] >= 0
                            for k in ("steps_done", "launches"))):
                raise ThinkJError(f"{self.path}: run {name!r} is not a run's state (status, steps_done, "
                                  f"launches); {RECOVERY}")
        return data

    def run(self, run: Run) -> dict[str, Any]:
        self.mine.add(run.name)
        entry = self.data["runs"].setdefault(run.name, {"settings": run.settings, "status": "pending",
                                                        "steps_done": 0, "launches": 0})
        entry["steps_done"] = min(entry["steps_done"], len(run.commands))
        return entry

    def fresh(self, run: Run) -> dict[str, Any]:
        """The run's entry as the file holds it now (another process may have run it meanwhile)."""
        if self.path.exists():
            on_disk = self._read(self.spec)["runs"].get(run.name)
            if on_disk is not None:
                self.data["runs"][run.name] = on_disk
        return self.run(run)

    def save(self) -> None:
        with exclusive(self.path.parent / "locks" / "state.lock", "sweep state", lambda line: None):
            runs = self._read(self.spec)["runs"] if self.path.exists() else {}
            runs.update({name: self.data["runs"][name] for name in self.mine if name in self.data["runs"]})
            self.data["runs"] = runs
            write_json(self.path, self.data)


def _env() -> dict[str, str]:
    # `thinkj` / `python` in step commands are the ones of the interpreter running the sweep.
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run_subprocess(command: str, log: Path) -> int:
    with disk_errors(log):
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as handle:
            handle.write(f"$ {command}\n")
            handle.flush()
            return subprocess.run(["bash", "-c", command], stdout=handle, stderr=subprocess.STDOUT,
                                  env=_env()).returncode


def _run_inprocess(command: str, log: Path) -> int:
    argv = shlex.split(command)
    if argv[0] != "thinkj" or any(op in argv for op in ("&&", "||", ";", "|", ">", "<")):
        return _run_subprocess(command, log)  # not one thinkj command: let bash run it
    import typer

    from thinkj.cli import _register_subcommands, app

    if not getattr(app, "_thinkj_registered", False):
        _register_subcommands()
        app._thinkj_registered = True  # type: ignore[attr-defined]
    with disk_errors(log):
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a") as handle:
            handle.write(f"$ {command}  (in-process)\n")
    try:
        typer.main.get_command(app).main(argv[1:], prog_name="thinkj", standalone_mode=False)
    except SystemExit as stop:
        return int(stop.code or 0)
    except Exception as err:  # a failed run is recorded and the sweep goes on to the next run
        with disk_errors(log), log.open("a") as handle:
            handle.write(f"error: {type(err).__name__}: {err}\n")
        return 1
    return 0


def check_ray_cluster(address: str | None, timeout: float = 5.0) -> None:
    """Fail before any submission when no Ray cluster answers (``ray job submit`` would fail once per run)."""
    import shutil
    import urllib.error
    import urllib.request

    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise ThinkJError("--launcher ray needs --ray-address or $RAY_ADDRESS (the dashboard of a running cluster, "
                          "see scripts/ray_cluster.sh)")
    if shutil.which("ray") is None:
        raise ThinkJError("--launcher ray: the `ray` command is not on PATH (install ray[default])")
    url = address if "://" in address else f"http://{address}"
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/version", timeout=timeout):
            pass
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise ThinkJError(f"--ray-address {address}: no Ray cluster answers there ({reason})") from None


def ray_submit_command(run: Run, address: str | None = None, submission_id: str | None = None,
                       first_step: int = 0) -> list[str]:
    """``ray job submit`` for one run: its steps from ``first_step`` on (the ones an interrupted local launch had
    not finished), then the done marker, as one entrypoint on the cluster."""
    marker = shlex.join([sys.executable, "-m", "thinkj.sweep.runner", "mark-done", str(run.run_dir),
                         *map(str, run.results), f"--identity={run.identity.get('hash', '')}"]
                        ).replace(sys.executable, "python", 1)
    # No --working-dir upload: the job runs in this checkout on a filesystem the nodes share (same path), so its
    # outputs land where the next `thinkj sweep` looks for them.
    entry = " && ".join([f"cd {shlex.quote(str(Path.cwd()))}", *run.commands[first_step:], marker])
    head = ["ray", "job", "submit", "--submission-id", submission_id or f"thinkj-{run.name}", "--no-wait"]
    if address:
        head += ["--address", address]
    return [*head, "--", "bash", "-c", entry]


RAY_ACTIVE = ("PENDING", "RUNNING")
RAY_POLL_SECONDS = 5.0


def _dashboard(address: str | None) -> str:
    address = address or os.environ.get("RAY_ADDRESS") or ""
    return (address if "://" in address else f"http://{address}").rstrip("/")


def ray_job_status(address: str | None, submission_id: str) -> str | None:
    """The job's status from the Ray dashboard's job API (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED), or None
    when the cluster does not know the job (another cluster, or a restarted head)."""
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{_dashboard(address)}/api/jobs/{submission_id}", timeout=30) as response:
            return str(json.loads(response.read()).get("status"))
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise ThinkJError(f"Ray job {submission_id}: the dashboard answered {err.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise ThinkJError(f"Ray job {submission_id}: no answer from {_dashboard(address)} "
                          f"({getattr(err, 'reason', err)})") from None


def _save_job_log(address: str | None, submission_id: str, log: Path) -> None:
    """The job's driver log, copied beside the run's step logs (best effort: the run's outcome does not depend on it)."""
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(f"{_dashboard(address)}/api/jobs/{submission_id}/logs", timeout=60) as response:
            text = json.loads(response.read()).get("logs", "")
        with disk_errors(log):
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(text)
    except (OSError, ValueError):
        pass


def _wait_ray_job(address: str | None, submission_id: str, out: TextIO) -> str | None:
    status, shown = ray_job_status(address, submission_id), None
    while status in RAY_ACTIVE:
        if status != shown:
            print(f"# {submission_id}: {status}", file=out, flush=True)
            shown = status
        time.sleep(RAY_POLL_SECONDS)
        status = ray_job_status(address, submission_id)
    return status


def _ray_run(run: Run, entry: dict[str, Any], state: SweepState, summary: dict[str, Any], out: TextIO,
             address: str | None, wait: bool) -> None:
    """Submit the run as one Ray job, unless its last job is still pending or running (an interrupted sweep's):
    then that job is the run -- waited for with ``wait``, never submitted twice. A failed or stopped job is
    submitted again under a new submission id; the run's steps resume what they had finished."""
    job = entry.get("job")
    status = ray_job_status(address, job) if job else None
    if status not in RAY_ACTIVE:
        job = f"thinkj-{run.name}" if not entry["launches"] else f"thinkj-{run.name}-r{entry['launches']}"
        command = ray_submit_command(run, address, job, first_step=entry["steps_done"])
        print(shlex.join(command), file=out, flush=True)
        code = subprocess.run(command, env=_env()).returncode
        entry.update(launches=entry["launches"] + 1, job=job, status="submitted" if code == 0 else "failed")
        if code != 0:
            entry["error"] = f"`ray job submit` exited {code}"
        state.save()
        if code != 0:
            summary["failed"].append(run.name)
            return
    else:
        print(f"# {job}: already {status}, not submitted again", file=out, flush=True)
        entry["status"] = "submitted"
    if not wait:
        summary["submitted"].append(run.name)
        return
    status = _wait_ray_job(address, job, out)
    _save_job_log(address, job, run.run_dir / "logs" / "ray_job.log")
    if status == "SUCCEEDED" and is_done(run):
        entry["status"] = "done"
        summary["launched"].append(run.name)
    else:
        entry.update(status="failed", error=f"Ray job {job} ended {status}; its log: {run.run_dir}/logs/ray_job.log")
        summary["failed"].append(run.name)
        print(f"# FAILED {run.name}: {entry['error']}", file=out, flush=True)
    state.save()


def _one_run(run: Run, launcher: str, state: SweepState | None, step_fn: Callable[[str, Path], int],
             summary: dict[str, Any], out: TextIO, ray_address: str | None, wait: bool = False) -> None:
    if is_done(run):
        summary["skipped"].append(run.name)
        print(f"# done   {run.name}", file=out, flush=True)
        if state is not None:
            state.run(run)["status"] = "done"
        return
    if launcher == "print":
        print(f"# run {run.name}", file=out)
        for command in run.commands:
            print(command, file=out)
        return
    # one process launches a run at a time: another sweep on this folder waits, then finds the run done (or, with
    # Ray, its job already submitted: the job id is in the state it reads again)
    before = dict(state.fresh(run))  # what another process does to the run while this one waits shows against it
    with exclusive(state.path.parent / "locks" / f"{run.name}.lock", f"run {run.name}",
                   lambda line: print(f"# {line}", file=out, flush=True)) as waited:
        # read again under the lock: another process may have run it while this one waited, or just before
        if is_done(run):
            summary["skipped"].append(run.name)
            print(f"# done   {run.name} (by another process)", file=out, flush=True)
            state.fresh(run)["status"] = "done"
            state.save()
            return
        entry = state.fresh(run)
        if waited and entry["status"] == "failed" and entry != before:
            # it failed in the process this one waited for: each waiting sweep would repeat that failure
            summary["failed"].append(run.name)
            print(f"# FAILED {run.name} in the sweep process this one waited for: {entry.get('error')}; not run "
                  "again here (run the sweep again to retry it)", file=out, flush=True)
            return
        if launcher == "ray":
            _ray_run(run, entry, state, summary, out, ray_address, wait)
        else:
            _run_steps(run, entry, state, step_fn, summary, out)


def _run_steps(run: Run, entry: dict[str, Any], state: SweepState, step_fn: Callable[[str, Path], int],
               summary: dict[str, Any], out: TextIO) -> None:
    """The run's steps from its first unfinished one, then its done marker; ``entry``, its state, saved as it goes."""
    if entry["steps_done"] >= len(run.commands):  # every step ran, yet the run is not done: its results went missing
        missing = [str(p) for p in run.results if not p.exists()]
        print(f"# rerun  {run.name}: its steps finished, but {', '.join(missing) or 'its done marker'} is missing: "
              "running its steps again", file=out, flush=True)
        entry["steps_done"] = 0
    entry.update(status="running", launches=entry["launches"] + 1)
    state.save()
    summary["launched"].append(run.name)
    print(f"# launch {run.name} (from step {entry['steps_done'] + 1} of {len(run.commands)})", file=out, flush=True)
    for index in range(entry["steps_done"], len(run.commands)):
        code = step_fn(run.commands[index], run.run_dir / "logs" / f"step{index + 1}.log")
        if code != 0:
            entry.update(status="failed", error=f"step {index + 1} exited {code}; log {run.run_dir}/logs/step{index + 1}.log")
            break
        entry["steps_done"] = index + 1
        state.save()
    else:
        try:
            mark_done(run.run_dir, run.results, {"identity": run.identity.get("hash"), "run": run.identity})
            entry["status"] = "done"
        except StageIncomplete as err:
            entry.update(status="failed", error=str(err))
    if entry["status"] == "failed":
        summary["failed"].append(run.name)
        print(f"# FAILED {run.name}: {entry['error']}", file=out, flush=True)
    state.save()


def run_sweep(spec: SweepSpec, sweep_dir: Path, launcher: str = "local", only: list[str] | None = None,
              out: TextIO = sys.stdout, ray_address: str | None = None, wait: bool = False) -> dict[str, Any]:
    """Launch every unfinished run; returns {"launched", "skipped", "failed", "submitted", "runs"}."""
    if launcher not in LAUNCHERS:
        raise ThinkJError(f"launcher must be one of {LAUNCHERS}, got {launcher!r}")
    every = expand(spec, sweep_dir)
    for item in only or []:
        if not any(item in (r.name, r.name.rsplit("-", 1)[0]) for r in every):
            raise ThinkJError(f"--only {item!r} matches no run of sweep {spec.name!r}; runs: "
                              f"{', '.join(r.name for r in every[:6])}{' …' if len(every) > 6 else ''}")
    if launcher == "ray":
        check_ray_cluster(ray_address)
    runs = [r for r in every if not only or r.name in only or r.name.rsplit("-", 1)[0] in only]
    summary: dict[str, Any] = {"launched": [], "skipped": [], "failed": [], "submitted": [], "runs": [r.name for r in runs]}
    state = None if launcher == "print" else SweepState(sweep_dir, spec)
    step_fn: Callable[[str, Path], int] = _run_inprocess if launcher == "inprocess" else _run_subprocess
    from thinkj.progress import progress_bar

    with progress_bar(f"sweep {spec.name}", len(runs), enabled=launcher != "print") as advance:
        for run in runs:
            _one_run(run, launcher, state, step_fn, summary, out, ray_address, wait)
            advance(1)
    if state is not None:
        state.save()
    return summary


def main(argv: list[str] | None = None) -> None:
    """``python -m thinkj.sweep.runner mark-done RUN_DIR RESULTS...`` (the last command of a Ray job)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "mark-done":
        sys.exit("usage: python -m thinkj.sweep.runner mark-done RUN_DIR RESULTS_JSON... [--identity=HASH]")
    identity = [a.split("=", 1)[1] for a in argv[2:] if a.startswith("--identity=")]
    results = [Path(p) for p in argv[2:] if not p.startswith("--identity=")]
    print(mark_done(Path(argv[1]), results, {"identity": identity[-1]} if identity and identity[-1] else None))


if __name__ == "__main__":
    exit_on_user_error(main)
