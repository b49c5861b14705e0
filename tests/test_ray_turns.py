"""verl runs that share a Ray cluster take turns (:func:`thinkj.online.ray_cluster.turn`): a sweep's cells submitted
together reach their online stage at once on a cluster with GPUs for one of them. Before, the second stopped in one
line ("other jobs hold the rest"), or, when both read the cluster before either took the GPUs, both started and one
verl waited for ever. Now the second waits for its turn, then for the GPUs to be free, then starts.

A real Ray head on 127.0.0.1 declaring one GPU (``tests/ray_local.py``; two raylets for the per-node count); each
"run" is a process that takes its turn as the verl launcher does, then holds its GPUs with a placement group for a
few seconds, as verl's workers would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thinkj.locks import one_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ray_local import local_ray  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# argv: NAME NOTES SECONDS GPUS STRATEGY [turns]: hold GPUS GPUs for SECONDS, as one placement group of 1-GPU bundles
# placed by STRATEGY (STRICT_PACK: one node, as verl places a node's workers; STRICT_SPREAD: one GPU on each of GPUS
# nodes). "turns": take a turn for 1 node x GPUS first (the launcher's way), else hold them at once (a job of another
# user). Notes "<name> start <t>" and "<name> end <t>" around the holding.
RUN = """
import sys, time, ray
from ray.util.placement_group import placement_group
from thinkj.online import ray_cluster

name, notes, seconds, gpus, strategy = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

def hold():
    ray.init(log_to_driver=False, logging_level="ERROR", configure_logging=False)
    group = placement_group([{"GPU": 1}] * gpus, strategy=strategy)
    ray.get(group.ready(), timeout=60)  # placed: the GPUs are held
    with open(notes, "a") as handle:
        handle.write(f"{name} start {time.time()}\\n")
    time.sleep(seconds)
    with open(notes, "a") as handle:
        handle.write(f"{name} end {time.time()}\\n")
    ray.shutdown()

if sys.argv[6:] == ["turns"]:
    with ray_cluster.turn(1, gpus, poll=0.5):
        hold()
else:
    hold()
"""


def _run(cluster, tmp_path: Path, name: str, seconds: float, turns: bool = True, gpus: int = 1,
         strategy: str = "STRICT_PACK", **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", RUN, name, str(tmp_path / "notes.txt"), str(seconds), str(gpus),
                             strategy, *(["turns"] if turns else [])],
                            env={**cluster.env, "RAY_ADDRESS": cluster.gcs, "TMPDIR": str(tmp_path), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _notes(tmp_path: Path) -> dict[str, float]:
    path = tmp_path / "notes.txt"
    lines = path.read_text().split("\n") if path.exists() else []
    return {f"{n} {e}": float(t) for n, e, t in (line.split() for line in lines if line)}


def _wait_note(tmp_path: Path, note: str, proc: subprocess.Popen, seconds: float = 90.0) -> None:
    end = time.monotonic() + seconds
    while note not in _notes(tmp_path):
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {note!r}: {proc.stdout.read()}")
        assert time.monotonic() < end, f"no {note!r} after {seconds} s"
        time.sleep(0.1)


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


def test_runs_on_a_cluster_that_fits_one_take_turns_and_another_job_is_waited_for_then_refused(tmp_path):
    with local_ray(workers=0, gpus=1) as cluster:
        # two launches at once: the second waits for its turn and starts after the first has ended
        first = _run(cluster, tmp_path, "first", 2.0)
        _wait_note(tmp_path, "first start", first)
        second = _run(cluster, tmp_path, "second", 0.5)
        (code1, out1), (code2, out2) = _finish(first), _finish(second)
        assert code1 == 0 and code2 == 0, out1 + out2
        notes = _notes(tmp_path)
        assert notes["second start"] >= notes["first end"], notes
        assert f"all 1 turn(s) are taken (another process (pid {first.pid} on " in out2, out2

        # a job that takes no turn (another user's) holds the GPU: a launch waits for it, then starts
        (tmp_path / "notes.txt").unlink()
        other = _run(cluster, tmp_path, "other", 3.0, turns=False)
        _wait_note(tmp_path, "other start", other)
        waiter = _run(cluster, tmp_path, "waiter", 0.1, THINKJ_GPU_WAIT="60")
        (code_o, out_o), (code_w, out_w) = _finish(other), _finish(waiter)
        assert code_o == 0 and code_w == 0, out_o + out_w
        assert re.search(r"has 0 free GPU\(s\) of 1 \([\d.]+: 0 free of 1 GPU\) and the run takes 1 on each of 1 "
                         r"node\(s\): waiting up to 60 s", out_w), out_w
        assert _notes(tmp_path)["waiter start"] >= _notes(tmp_path)["other end"]

        # ... and refuses in one line when the GPUs stay held past THINKJ_GPU_WAIT
        (tmp_path / "notes.txt").unlink()
        other = _run(cluster, tmp_path, "other", 20.0, turns=False)
        _wait_note(tmp_path, "other start", other)
        started = time.monotonic()
        refused = _run(cluster, tmp_path, "refused", 0.1, THINKJ_GPU_WAIT="2")
        code_r, out_r = _finish(refused)
        other.kill()
        other.wait(timeout=60)
        assert code_r != 0 and "refused start" not in _notes(tmp_path)
        assert re.search(r"has 0 free GPU\(s\) of 1 \([\d.]+: 0 free of 1 GPU\) and the run takes 1 on each of 1 "
                         r"node\(s\), still after 2 s: other jobs hold the rest", out_r), out_r
        assert time.monotonic() - started < 60


def test_free_gpus_are_counted_per_node_so_a_run_waits_while_they_are_split_across_nodes(tmp_path):
    """Two nodes of 2 GPUs; another job holds one on each. 2 GPUs are free in total, but a run of 1 node x 2 GPUs fits
    on neither node: it waits (counting the total, it started at once, and verl would have waited for ever)."""
    with local_ray(workers=1, gpus=2) as cluster:
        other = _run(cluster, tmp_path, "other", 10.0, turns=False, gpus=2, strategy="STRICT_SPREAD")
        _wait_note(tmp_path, "other start", other)
        checked = subprocess.run([sys.executable, "-m", "thinkj.online.ray_cluster", "--address", cluster.gcs,
                                  "--nnodes", "1", "--gpus-per-node", "2"], env=cluster.env, capture_output=True,
                                 text=True, timeout=120)  # the check a user runs by hand refuses the same way
        assert checked.returncode == 2 and "other jobs hold the rest" in checked.stderr, checked.stdout + checked.stderr
        cpu = subprocess.run([sys.executable, "-m", "thinkj.online.ray_cluster", "--address", cluster.gcs, "--nnodes",
                              "2", "--gpus-per-node", "0"], env=cluster.env, capture_output=True, text=True, timeout=120)
        assert cpu.returncode == 0, cpu.stdout + cpu.stderr  # no GPU asked for: two live nodes are enough (the check
        # scripts/slurm/ray_on_slurm.sh makes on a CPU cluster; it divided by zero once, caught by tests/test_slurm.py)
        run = _run(cluster, tmp_path, "run", 0.1, gpus=2, THINKJ_GPU_WAIT="120")
        (code_o, out_o), (code_r, out_r) = _finish(other), _finish(run)
        assert code_o == 0 and code_r == 0, out_o + out_r
        assert _notes(tmp_path)["run start"] >= _notes(tmp_path)["other end"], out_r
        assert re.search(r"has 2 free GPU\(s\) of 4 \([\d.]+: 1 free of 2 GPU, [\d.]+: 1 free of 2 GPU\) and the "
                         r"run takes 2 on each of 1 node\(s\): waiting up to 120 s", out_r), out_r


def test_the_turns_count_the_runs_the_nodes_hold_side_by_side():
    from thinkj.online.ray_cluster import runs_side_by_side

    assert runs_side_by_side([8, 8], 2, 8) == 1  # the paper's 2 x 8: one run at a time
    assert runs_side_by_side([8, 8, 8, 8], 2, 8) == 2
    assert runs_side_by_side([8, 4, 4], 1, 8) == 1  # 16 GPUs, but only one node holds a run's 8
    assert runs_side_by_side([8, 8], 1, 4) == 4
    assert runs_side_by_side([0, 0], 2, 0) == 1  # a CPU cluster (GPUS_PER_NODE=0): each node holds one run-node


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan"])
def test_a_bad_gpu_wait_is_refused_before_any_cluster_is_read(monkeypatch, value):
    from thinkj.errors import ThinkJError
    from thinkj.online.ray_cluster import preflight

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # nothing listens there: the setting is refused first
    monkeypatch.setenv("THINKJ_GPU_WAIT", value)
    with pytest.raises(ThinkJError, match=f"^THINKJ_GPU_WAIT='{value}': seconds to wait for free GPUs"):
        preflight(2, 8, "gpu")


HOLD_ONE_OF = """
import sys, time
from thinkj.locks import one_of
with one_of(sys.argv[2:], "run", poll=0.2) as held:
    print("held", held, flush=True)
    time.sleep(float(sys.argv[1]))
"""


def test_one_of_n_turns_lets_n_run_at_once_and_the_next_waits(tmp_path):
    paths = [str(tmp_path / f"turn{i}.lock") for i in range(2)]
    holders = [subprocess.Popen([sys.executable, "-c", HOLD_ONE_OF, "2.0", *paths], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    held = sorted(proc.stdout.readline().split()[1] for proc in holders)
    assert held == paths  # both ran at once, each in its own turn
    said: list[str] = []
    start = time.monotonic()
    with one_of(paths, "third", said.append, poll=0.1) as mine:
        waited = time.monotonic() - start
    assert mine in [Path(p) for p in paths] and waited > 0.5
    assert len(said) == 1 and said[0].startswith("third: all 2 turn(s) are taken (another process (pid ")
    for proc in holders:
        proc.wait(timeout=60)
    assert os.path.getsize(paths[0]) > 0  # each holder wrote who it is
