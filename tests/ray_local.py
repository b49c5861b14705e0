"""A real Ray cluster on this machine for tests, started and stopped by ``scripts/ray_cluster.sh``.

    from ray_local import local_ray   # tests/ is on sys.path in a test module (a `tests` package in site-packages
                                      # shadows `tests.ray_local`)

    with local_ray(workers=1) as cluster:          # a head and one worker node: two raylets on 127.0.0.1
        subprocess.run(["ray", "job", "submit", "--address", cluster.dashboard, "--", "python", "x.py"],
                       env=cluster.env, check=True)
        cluster.script("status")                   # bash scripts/ray_cluster.sh status, in cluster.env

What it yields (:class:`LocalRay`):

- ``dashboard``: ``http://127.0.0.1:PORT``, the address of ``ray job submit`` (and of a Ray launcher);
- ``gcs``: ``127.0.0.1:PORT``, the address of ``ray status --address`` / ``ray.init(address=...)``;
- ``env``: ``os.environ`` plus what the project's Ray scripts read (``NODE_IP``, ``HEAD_ADDR``, ``RAY_PORT``,
  ``DASHBOARD_PORT``, ``RAY_AUTH_MODE``, ``PYTHON``; this interpreter's folder first on ``PATH``), for any
  subprocess that talks to the cluster, ``scripts/submit_verl_2node.sh`` included. It does not set
  ``RAY_ADDRESS``: a process that should join the cluster by itself gets ``cluster.gcs`` explicitly;
- ``sessions``: the session id of each node (every process of a node, its workers included, is in it), for
  :class:`SessionMemory`.

Every port is a free one picked at start, each node has its own short temp dir (Ray's socket paths must stay
under 108 characters, which pytest's ``tmp_path`` can exceed), and the nodes are stopped, and their temp dirs
removed, on leaving the block however it is left. Each node declares ``gpus`` GPUs (verl's CPU platform maps a
declared GPU onto the CPU) and ``cpus`` CPUs (declared, not cores: verl's workers each ask for 3).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ray_cluster.sh"


class RayStartError(RuntimeError):
    """``scripts/ray_cluster.sh head|worker`` failed; the message holds the end of its output."""


@dataclass
class LocalRay:
    dashboard: str
    gcs: str
    env: dict[str, str]
    sessions: list[int] = field(default_factory=list)
    temp_dirs: list[Path] = field(default_factory=list)

    def script(self, command: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
        """``bash scripts/ray_cluster.sh <command>`` with this cluster's settings (plus ``env``), output captured."""
        return subprocess.run(["bash", str(SCRIPT), command], env={**self.env, **env}, capture_output=True,
                              text=True, timeout=timeout, cwd=ROOT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def local_ray(workers: int = 0, gpus: int = 1, cpus: int = 4, env: dict[str, str] | None = None) -> Iterator[LocalRay]:
    """A head (and ``workers`` worker nodes) on 127.0.0.1, started with ``env`` added to the environment; always
    stopped on exit. See the module docstring."""
    ray_port, dashboard_port = free_port(), free_port()
    env = {**os.environ, **(env or {}), "NODE_IP": "127.0.0.1", "HEAD_ADDR": "127.0.0.1", "RAY_PORT": str(ray_port),
           "DASHBOARD_PORT": str(dashboard_port), "RAY_AUTH_MODE": "disabled", "PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("RAY_ADDRESS", None)
    cluster = LocalRay(dashboard=f"http://127.0.0.1:{dashboard_port}", gcs=f"127.0.0.1:{ray_port}", env=env)
    node_env = {"GPUS": str(gpus), "CPUS": str(cpus)}
    with ExitStack() as stack:
        for role in ["head"] + ["worker"] * workers:
            temp = Path(tempfile.mkdtemp(prefix=f"tj_ray_{role}_"))
            cluster.temp_dirs.append(temp)
            # registered before starting: a node that half-started is stopped too (last started, first stopped)
            stack.callback(_stop_node, cluster, temp)
            settings = {**node_env, "RAY_TEMP_DIR": str(temp), "AGENT_PORT": str(free_port())}
            if role == "head":
                settings["CLIENT_PORT"] = str(free_port())
            done = cluster.script(role, **settings)
            if done.returncode != 0:
                raise RayStartError(f"ray_cluster.sh {role} exited {done.returncode}: {(done.stdout + done.stderr)[-3000:]}")
            cluster.sessions += [int(p.read_text()) for p in temp.glob("ray_cluster.*.sid")]
        yield cluster


def _stop_node(cluster: LocalRay, temp: Path) -> None:
    try:
        cluster.script("stop", timeout=60, RAY_TEMP_DIR=str(temp))
    finally:
        shutil.rmtree(temp, ignore_errors=True)


class SessionMemory(threading.Thread):
    """Peak of the summed RSS of every process in the given sessions (a Ray node's daemons, workers, job drivers
    and vLLM engines) plus the process trees of ``pids`` (e.g. the submitting client), sampled twice a second."""

    def __init__(self, sessions: list[int], pids: list[int] = ()) -> None:
        super().__init__(daemon=True)
        self.sessions, self.pids, self.peak, self.done = set(sessions), list(pids), 0, threading.Event()

    def _members(self) -> list:
        import psutil

        procs = {}
        for proc in psutil.process_iter() if self.sessions else ():  # no sessions: only the trees of ``pids``
            try:
                if os.getsid(proc.pid) in self.sessions:
                    procs[proc.pid] = proc
            except (OSError, psutil.Error):
                pass
        for pid in self.pids:
            try:
                root = psutil.Process(pid)
                for proc in (root, *root.children(recursive=True)):
                    procs[proc.pid] = proc
            except psutil.Error:
                pass
        return list(procs.values())

    def run(self) -> None:
        import psutil

        while not self.done.is_set():
            total = 0
            for proc in self._members():
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)
            self.done.wait(0.5)

    def stop(self) -> float:
        """Stop sampling; the peak in GiB."""
        self.done.set()
        self.join()
        return self.peak / 2**30
