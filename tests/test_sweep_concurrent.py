"""Two `thinkj sweep` processes on one spec and sweep folder at once (a command started twice; Slurm array tasks each
running the whole sweep or overlapping `--only` sets): each run's steps run once, the other process waiting for the
run and then finding it done, and `state.json` keeps every run's entry (each process's save keeps what the other
wrote). Real processes through the real CLI; a template sweep whose one step is a slow Python command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)

STEP = """
import json, pathlib, sys, time
sweep, run, w = sys.argv[1:4]
with open(sweep + "/ran.txt", "a") as handle:
    handle.write(w + "\\n")
time.sleep(1.0)
out = pathlib.Path(run)
out.mkdir(parents=True, exist_ok=True)
(out / "r.results.json").write_text(json.dumps({"benchmark": "synthetic", "unit": "percent",
                                                 "metrics": {"accuracy": 50.0}, "tags": {"w": w}}))
"""


def _spec(tmp_path: Path) -> Path:
    (tmp_path / "step.py").write_text(STEP)
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"name": "twice", "grid": {"w": [1, 2, 3]},
                                "steps": [f"{sys.executable} {tmp_path / 'step.py'} {{sweep_dir}} {{run_dir}} {{w}}"],
                                "results": "{run_dir}/r.results.json"}))
    return spec


def _sweep(spec: Path, sweep_dir: Path, *only: str) -> subprocess.Popen:
    thinkj = Path(sys.executable).parent / "thinkj"
    args = [x for name in only for x in ("--only", name)]
    return subprocess.Popen([str(thinkj), "sweep", str(spec), "--sweep-dir", str(sweep_dir), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_sweep_started_twice_runs_each_run_once_and_keeps_every_state_entry(tmp_path):
    spec, sweep_dir = _spec(tmp_path), tmp_path / "sweep"
    sweep_dir.mkdir()
    first = _sweep(spec, sweep_dir)
    time.sleep(0.5)  # the first is inside its first run's step (the step sleeps 1 s)
    second = _sweep(spec, sweep_dir)
    outs = [proc.communicate(timeout=240)[0] for proc in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert sorted((sweep_dir / "ran.txt").read_text().split()) == ["1", "2", "3"], outs  # each run's step once
    state = json.loads((sweep_dir / "state.json").read_text())
    assert len(state["runs"]) == 3 and all(r["status"] == "done" for r in state["runs"].values()), state


FAILING = """
import pathlib, sys, time
sweep, run, w = sys.argv[1:4]
with open(sweep + "/ran.txt", "a") as handle:
    handle.write(w + "\\n")
time.sleep(2.0)
if pathlib.Path(sweep, "fail").exists():
    sys.exit("CUDA out of memory")
pathlib.Path(run).mkdir(parents=True, exist_ok=True)
(pathlib.Path(run) / "r.results.json").write_text('{"benchmark": "synthetic", "unit": "percent", '
                                                  '"metrics": {"accuracy": 50.0}, "tags": {}}')
"""


def test_a_run_that_failed_in_the_sweep_it_waited_for_is_not_run_again(tmp_path):
    """The second sweep waits for the run the first is running; that run fails, and the second reports it failed
    rather than running it again (each sweep waiting for it would repeat the failure). A later sweep retries it."""
    (tmp_path / "step.py").write_text(FAILING)
    spec, sweep_dir = tmp_path / "spec.yaml", tmp_path / "sweep"
    spec.write_text(json.dumps({"name": "fails", "grid": {"w": [1]},
                                "steps": [f"{sys.executable} {tmp_path / 'step.py'} {{sweep_dir}} {{run_dir}} {{w}}"],
                                "results": "{run_dir}/r.results.json"}))
    sweep_dir.mkdir()
    (sweep_dir / "fail").touch()
    first = _sweep(spec, sweep_dir)
    deadline = time.monotonic() + 60
    while not (sweep_dir / "ran.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    second = _sweep(spec, sweep_dir)
    outs = [proc.communicate(timeout=240)[0] for proc in (first, second)]
    assert first.returncode != 0 and second.returncode != 0, outs
    assert "waiting for it to finish" in outs[1] and "in the sweep process this one waited for" in outs[1], outs[1]
    assert "step 1 exited 1" in outs[1]  # the holder's error, named by the waiter
    assert (sweep_dir / "ran.txt").read_text().split() == ["1"]  # run once: the waiter did not repeat it
    (sweep_dir / "fail").unlink()
    again = _sweep(spec, sweep_dir)
    out = again.communicate(timeout=240)[0]
    assert again.returncode == 0 and (sweep_dir / "ran.txt").read_text().split() == ["1", "1"], out
    assert [r["status"] for r in json.loads((sweep_dir / "state.json").read_text())["runs"].values()] == ["done"]


def test_sweeps_of_disjoint_runs_side_by_side_keep_each_others_state(tmp_path):
    """Slurm array tasks, one run each (`--only`): both run at once, and state.json ends with both runs done."""
    spec, sweep_dir = _spec(tmp_path), tmp_path / "sweep"
    sweep_dir.mkdir()
    first, second = _sweep(spec, sweep_dir, "w=1"), _sweep(spec, sweep_dir, "w=2")
    outs = [proc.communicate(timeout=240)[0] for proc in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    assert sorted((sweep_dir / "ran.txt").read_text().split()) == ["1", "2"]
    state = json.loads((sweep_dir / "state.json").read_text())
    assert sorted(state["runs"]) == sorted(n for n in state["runs"]) and len(state["runs"]) == 2, state
    assert all(r["status"] == "done" for r in state["runs"].values()), state


def test_a_run_finished_between_the_check_and_the_lock_is_not_run_again(tmp_path, monkeypatch):
    """Another process finished the run just after this one found it not done and just before it took the run's
    lock (so it never waited): the run is read again under the lock and skipped."""
    from thinkj.sweep import runner
    from thinkj.sweep.sweep_file import expand, load_spec

    spec_path, sweep_dir = _spec(tmp_path), tmp_path / "sweep"
    sweep_dir.mkdir()
    spec = load_spec(spec_path)
    first = expand(spec, sweep_dir)[0]
    real = runner.exclusive

    def finished_meanwhile(path, what, log):
        if what == f"run {first.name}" and not (first.run_dir / runner.DONE_FILE).exists():
            first.run_dir.mkdir(parents=True, exist_ok=True)
            for result in first.results:
                result.write_text(json.dumps({"benchmark": "synthetic", "metrics": {}}))
            runner.mark_done(first.run_dir, first.results, {"identity": first.identity.get("hash")})
        return real(path, what, log)

    monkeypatch.setattr(runner, "exclusive", finished_meanwhile)
    summary = runner.run_sweep(spec, sweep_dir, "local", out=open(os.devnull, "w"))
    assert first.name in summary["skipped"] and first.name not in summary["launched"]
    assert sorted((sweep_dir / "ran.txt").read_text().split()) == ["2", "3"]


def test_a_ray_job_another_sweep_submitted_meanwhile_is_not_submitted_again(tmp_path, monkeypatch):
    """`--launcher ray` from two sweep processes: the other submitted the run's job after this one read state.json;
    under the run's lock the state is read again, and the job (RUNNING on the dashboard, a stand-in on 127.0.0.1
    answering Ray's job API) is not submitted twice."""
    import io
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from thinkj.sweep import runner
    from thinkj.sweep.sweep_file import expand, load_spec

    spec_path, sweep_dir = _spec(tmp_path), tmp_path / "sweep"
    sweep_dir.mkdir()
    spec = load_spec(spec_path)
    first = expand(spec, sweep_dir)[0]
    job = f"thinkj-{first.name}"
    asked: list[str] = []

    class Dashboard(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            asked.append(f"GET {self.path}")
            body = {"/api/version": {"ray_version": "stand-in"},
                    f"/api/jobs/{job}": {"status": "RUNNING"}}.get(self.path.replace("%3D", "="))
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(json.dumps(body or {}).encode())

        def do_POST(self):  # noqa: N802
            asked.append(f"POST {self.path}")
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # `ray` is found
    real = runner.exclusive

    def submitted_meanwhile(path, what, log):
        if what == f"run {first.name}":
            (sweep_dir / "state.json").write_text(json.dumps({"sweep": spec.name, "spec": str(spec.path), "runs": {
                first.name: {"settings": first.settings, "status": "submitted", "steps_done": 0, "launches": 1,
                             "job": job}}}))
        return real(path, what, log)

    monkeypatch.setattr(runner, "exclusive", submitted_meanwhile)
    out = io.StringIO()
    try:
        summary = runner.run_sweep(spec, sweep_dir, "ray", only=[first.name],
                                   ray_address=f"http://127.0.0.1:{server.server_port}", out=out)
    finally:
        server.shutdown()
    assert f"# {job}: already RUNNING, not submitted again" in out.getvalue(), out.getvalue()
    assert "ray job submit" not in out.getvalue() and not [a for a in asked if a.startswith("POST")]
    assert summary["submitted"] == [first.name] and not summary["failed"]
