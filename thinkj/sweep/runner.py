"""Launch a sweep's runs, remember how far each got, and fill its table from the results.

State lives in ``<sweep_dir>/state.json`` (rewritten atomically after every step): per run, its settings,
status and how many of its steps finished. A run is finished only when ``<run_dir>/SWEEP_DONE.json`` exists,
and that marker is written only after every results JSON of the run exists. A rerun therefore skips finished
runs and continues an interrupted one at its first unfinished step (the engines resume inside a step).

Launchers: ``local`` (subprocesses, one step after another), ``inprocess`` (``thinkj ...`` steps inside this
Python process -- the same commands without paying the imports each time; for CPU demos and tests),
``print`` (the commands, nothing run or recorded), ``ray`` (each run becomes one ``ray job submit`` whose last
command writes the done marker on the cluster).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from thinkj.errors import ThinkJError, exit_on_user_error
from thinkj.sweep.spec import Run, SweepSpec, expand

DONE_FILE = "SWEEP_DONE.json"
STATE_FILE = "state.json"
LAUNCHERS = ("local", "inprocess", "print", "ray")


def is_done(run: Run) -> bool:
    return (run.run_dir / DONE_FILE).exists() and all(p.exists() for p in run.results)


def mark_done(run_dir: Path, results: list[Path], extra: dict[str, Any] | None = None) -> Path:
    """Write the done marker, refusing while any results JSON is missing."""
    missing = [str(p) for p in results if not Path(p).exists()]
    if missing:
        raise RuntimeError(f"run {run_dir.name}: steps finished but results are missing: {missing}")
    marker = Path(run_dir) / DONE_FILE
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"results": [str(p) for p in results], "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                  **(extra or {})}, indent=1))
    return marker


class SweepState:
    def __init__(self, sweep_dir: Path, spec: SweepSpec):
        self.path = Path(sweep_dir) / STATE_FILE
        self.data: dict[str, Any] = {"sweep": spec.name, "spec": str(spec.path), "runs": {}}
        if self.path.exists():
            self.data = json.loads(self.path.read_text())

    def run(self, run: Run) -> dict[str, Any]:
        return self.data["runs"].setdefault(run.name, {"settings": run.settings, "status": "pending", "steps_done": 0,
                                                       "launches": 0})

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)


def _env() -> dict[str, str]:
    # `thinkj` / `python` in step commands are the ones of the interpreter running the sweep.
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _run_subprocess(command: str, log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as handle:
        handle.write(f"$ {command}\n")
        handle.flush()
        return subprocess.run(["bash", "-c", command], stdout=handle, stderr=subprocess.STDOUT, env=_env()).returncode


def _run_inprocess(command: str, log: Path) -> int:
    argv = shlex.split(command)
    if argv[0] != "thinkj" or any(op in argv for op in ("&&", "||", ";", "|", ">", "<")):
        return _run_subprocess(command, log)  # not one thinkj command: let bash run it
    import typer

    from thinkj.cli import _register_subcommands, app

    if not getattr(app, "_thinkj_registered", False):
        _register_subcommands()
        app._thinkj_registered = True  # type: ignore[attr-defined]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as handle:
        handle.write(f"$ {command}  (in-process)\n")
    try:
        typer.main.get_command(app).main(argv[1:], prog_name="thinkj", standalone_mode=False)
    except SystemExit as stop:
        return int(stop.code or 0)
    except Exception as err:  # a failed run is recorded and the sweep goes on to the next run
        with log.open("a") as handle:
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


def ray_submit_command(run: Run, address: str | None = None) -> list[str]:
    """``ray job submit`` for one run: its steps, then the done marker, as one entrypoint on the cluster."""
    marker = shlex.join([sys.executable, "-m", "thinkj.sweep.runner", "mark-done", str(run.run_dir),
                         *map(str, run.results)]).replace(sys.executable, "python", 1)
    # No --working-dir upload: the job runs in this checkout on a filesystem the nodes share (same path), so its
    # outputs land where the next `thinkj sweep` looks for them.
    entry = " && ".join([f"cd {shlex.quote(str(Path.cwd()))}", *run.commands, marker])
    head = ["ray", "job", "submit", "--submission-id", f"thinkj-{run.name}", "--no-wait"]
    if address:
        head += ["--address", address]
    return [*head, "--", "bash", "-c", entry]


def _one_run(run: Run, launcher: str, state: SweepState | None, step_fn: Callable[[str, Path], int],
             summary: dict[str, Any], out: TextIO, ray_address: str | None) -> None:
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
    entry = state.run(run)
    if launcher == "ray":
        command = ray_submit_command(run, ray_address)
        print(shlex.join(command), file=out, flush=True)
        code = subprocess.run(command, env=_env()).returncode
        entry.update(status="submitted" if code == 0 else "failed", launches=entry["launches"] + 1)
        summary["submitted" if code == 0 else "failed"].append(run.name)
        state.save()
        return
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
            mark_done(run.run_dir, run.results, {"settings": run.settings})
            entry["status"] = "done"
        except RuntimeError as err:
            entry.update(status="failed", error=str(err))
    if entry["status"] == "failed":
        summary["failed"].append(run.name)
        print(f"# FAILED {run.name}: {entry['error']}", file=out, flush=True)
    state.save()


def run_sweep(spec: SweepSpec, sweep_dir: Path, launcher: str = "local", only: list[str] | None = None,
              out: TextIO = sys.stdout, ray_address: str | None = None) -> dict[str, Any]:
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
            _one_run(run, launcher, state, step_fn, summary, out, ray_address)
            advance(1)
    if state is not None:
        state.save()
    return summary


def main(argv: list[str] | None = None) -> None:
    """``python -m thinkj.sweep.runner mark-done RUN_DIR RESULTS...`` (the last command of a Ray job)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] != "mark-done":
        sys.exit("usage: python -m thinkj.sweep.runner mark-done RUN_DIR RESULTS_JSON...")
    print(mark_done(Path(argv[1]), [Path(p) for p in argv[2:]]))


if __name__ == "__main__":
    exit_on_user_error(main)
