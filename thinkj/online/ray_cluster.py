"""A verl run on a Ray cluster that the user started: check its nodes before launching, and ship the code.

    python -m thinkj.online.ray_cluster --address 10.0.0.1:6379 --nnodes 2 --gpus-per-node 8   # exit 2 if short

verl's trainer places one worker per GPU over ``trainer.nnodes`` x ``trainer.n_gpus_per_node``. Asked for more than
the cluster holds, it does not fail: it waits for Ray to find resources that never come. :func:`check_cluster`
reads the cluster at the given address (``ray.nodes()`` and each node's free resources) and refuses in one
line when it holds fewer live nodes with that many GPUs than asked.

Runs that share a cluster take turns (:func:`turn`): a sweep's cells submitted together reach their verl stage at
once on a cluster that fits fewer of them. A launch holds one of as many turns as the nodes fit runs side by side
(:func:`runs_side_by_side`; a lock file per turn on this machine, where ``ray job submit`` runs every job's driver:
the head node) while verl runs, and waits for one when all are taken; holding one, it waits up to
``THINKJ_GPU_WAIT`` seconds for the GPUs to be free (a finished run's workers release them a few seconds after it
exits; another user's job may hold them), then refuses naming what holds them. Free means ``gpus_per_node`` free on
each of ``nnodes`` nodes: verl's own check counts free GPUs in total, and a run that needs 8 on one node, on a cluster
with 4 + 4 free, passes it and waits for ever. Two launches never start into GPUs that only one of them can have.

The job's code must import on every node (the reward ``pkg://thinkj.rewards.adapters.verl`` and the hooks
``thinkj.online.verl_hooks`` run inside Ray workers there): :func:`runtime_env_overrides` hands verl's
``ray.init`` this checkout as the job's ``working_dir``, so Ray copies it to every node, as
``scripts/submit_verl_2node.sh`` does for a job sent with ``ray job submit``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from thinkj.errors import ThinkJError, exit_on_user_error
from thinkj.paths import PROJECT_ROOT

# What the job's copy of the checkout leaves out (anchored with "/": the package folder thinkj/data/ travels).
# Ray refuses a working_dir over 500 MiB; these are the big folders of a checkout. Same list as
# scripts/submit_verl_2node.sh.
WORKING_DIR_EXCLUDES = ("/.venv/", "/.cache/", "/runs/", "/data/", "/.git/", "*.parquet", "*.safetensors")
# Set by Ray's job manager in a job's driver (`ray job submit`): the job's runtime env, working_dir included.
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"
# How long a launch that holds its turn waits for the cluster's GPUs to be free before refusing (seconds).
GPU_WAIT_VAR, GPU_WAIT_DEFAULT = "THINKJ_GPU_WAIT", 600.0


class ClusterTooSmall(ThinkJError):
    """The Ray cluster holds fewer nodes or GPUs than the run asks for."""


def cluster_address() -> str | None:
    """The running cluster a launch joins: ``RAY_ADDRESS`` (``host:port`` of the head's GCS), or None."""
    return os.environ.get("RAY_ADDRESS") or None


@dataclass(frozen=True)
class Node:
    """A live node of the cluster: its address, the GPUs it declares and those no job holds now."""

    address: str
    gpus: int
    free: float


def read_cluster(address: str) -> list[Node]:
    """The live nodes of the cluster at ``address``, each with its GPUs and its free GPUs (read per node, as verl's
    own resource check reads them: a run needs ``gpus_per_node`` free on each of its nodes, not in total)."""
    import ray
    from ray._private.state import available_resources_per_node  # verl reads it too (ResourcePoolManager's check)

    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ThinkJError(f"RAY_ADDRESS={address}: no Ray cluster answers there ({' '.join(str(err).split())[:200]}); "
                          "start one with scripts/ray_cluster.sh head (and worker on the other nodes)") from None
    try:
        live = [node for node in ray.nodes() if node.get("Alive")]
        free = available_resources_per_node()  # node id (hex) -> resources with any left; a GPU-less entry: none
    finally:
        ray.shutdown()
    return [Node(node.get("NodeManagerAddress", "?"), int(node.get("Resources", {}).get("GPU", 0)),
                 float(free.get(node.get("NodeID"), {}).get("GPU", 0))) for node in live]


def _slots(gpus: list[float], gpus_per_node: int) -> int:
    """How many run-nodes of ``gpus_per_node`` GPUs these nodes hold at once (a node may hold several; with 0 GPUs per
    node, a CPU cluster's check in ``scripts/slurm/ray_on_slurm.sh``, each node holds one)."""
    if gpus_per_node <= 0:
        return len(gpus)
    return sum(int(count) // gpus_per_node for count in gpus)


def _listed(nodes: list[Node], free: bool = False) -> str:
    return ", ".join(f"{node.address}: {f'{node.free:g} free of ' if free else ''}{node.gpus} GPU"
                     for node in nodes) or "none"


def _held(address: str, nodes: list[Node], nnodes: int, gpus_per_node: int) -> str:
    """Why a run of ``nnodes`` x ``gpus_per_node`` cannot start now: the free GPUs, in total and per node."""
    return (f"the Ray cluster at {address} has {sum(node.free for node in nodes):g} free GPU(s) of "
            f"{sum(node.gpus for node in nodes)} ({_listed(nodes, free=True)}) and the run takes {gpus_per_node} on "
            f"each of {nnodes} node(s)")


def check_cluster(address: str, nnodes: int, gpus_per_node: int, *, free_now: bool = True) -> str:
    """Refuse (:class:`ClusterTooSmall`, one line) a cluster with fewer than ``nnodes`` live nodes of at least
    ``gpus_per_node`` GPUs each, or (``free_now``) whose nodes have fewer than ``gpus_per_node`` free GPUs on
    ``nnodes`` of them; else a one-line summary."""
    nodes = read_cluster(address)
    fitting = sum(node.gpus >= gpus_per_node for node in nodes)
    asked = f"{nnodes} node(s) x {gpus_per_node} GPU(s)"
    if fitting < nnodes:
        raise ClusterTooSmall(f"the Ray cluster at {address} has {fitting} live node(s) with {gpus_per_node} or more "
                              f"GPUs (nodes: {_listed(nodes)}) and the run asks for {asked}: start the missing "
                              "node(s) (scripts/ray_cluster.sh worker) or lower NNODES / GPUS_PER_NODE")
    if free_now and _slots([node.free for node in nodes], gpus_per_node) < nnodes:
        raise ClusterTooSmall(f"{_held(address, nodes, nnodes, gpus_per_node)}: other jobs hold the rest (`ray "
                              f"status --address {address}`)")
    return (f"Ray cluster at {address}: {len(nodes)} live node(s) ({_listed(nodes)}); the run takes {asked}"
            + ("" if free_now else f", {sum(node.free for node in nodes):g} GPU(s) free now"))


def gpu_wait() -> float:
    """``THINKJ_GPU_WAIT``: seconds a launch holding its turn waits for free GPUs (checked here, once)."""
    raw = os.environ.get(GPU_WAIT_VAR, "")
    try:
        seconds = float(raw) if raw else GPU_WAIT_DEFAULT
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise ThinkJError(f"{GPU_WAIT_VAR}={raw!r}: seconds to wait for free GPUs, a number >= 0")
    return seconds


def runs_side_by_side(node_gpus: list[int], nnodes: int, gpus_per_node: int) -> int:
    """How many runs of ``nnodes`` x ``gpus_per_node`` the nodes hold at once (at least 1: a cluster too small for one
    was refused before): a run takes ``gpus_per_node`` GPUs on each of ``nnodes`` nodes."""
    return max(1, _slots(node_gpus, gpus_per_node) // nnodes)


def turn_locks(address: str, turns: int) -> list[Path]:
    """The lock files of the cluster's ``turns`` turns, in this user's temporary folder on this machine."""
    folder = Path(tempfile.gettempdir()) / f"thinkj-{os.getuid()}" / "ray-turns" / re.sub(r"[^\w.-]", "_", address)
    return [folder / f"turn{i}.lock" for i in range(turns)]


@contextmanager
def turn(nnodes: int, gpus_per_node: int, log: Callable[[str], object] = print, poll: float = 10.0) -> Iterator[None]:
    """The block (a verl run) holds one of the Ray cluster's turns and starts when the GPUs it takes are free; see
    the module's docstring. Without ``RAY_ADDRESS`` (verl starts its own Ray here) it runs at once."""
    from thinkj.locks import one_of

    address = cluster_address()
    if not address:
        yield
        return
    wait = gpu_wait()
    nodes = read_cluster(address)
    turns = runs_side_by_side([node.gpus for node in nodes], nnodes, gpus_per_node)
    with one_of(turn_locks(address, turns), f"verl run on the Ray cluster at {address}", log, poll):
        deadline, said = time.monotonic() + wait, False
        while True:
            nodes = read_cluster(address)
            if _slots([node.free for node in nodes], gpus_per_node) >= nnodes:
                break
            if time.monotonic() >= deadline:
                raise ClusterTooSmall(f"{_held(address, nodes, nnodes, gpus_per_node)}, still after {wait:g} s: "
                                      f"other jobs hold the rest (`ray status --address {address}`; {GPU_WAIT_VAR} "
                                      "sets the wait)")
            if not said:
                log(f"{_held(address, nodes, nnodes, gpus_per_node)}: waiting up to {wait:g} s for other jobs to "
                    "free them ...")
                said = True
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        yield


def preflight(nnodes: int, gpus_per_node: int, device: str) -> str:
    """What a verl launch of ``nnodes`` x ``gpus_per_node`` checks first: with ``RAY_ADDRESS``, that cluster's nodes
    (:func:`check_cluster`; GPUs other jobs hold now are waited for by :func:`turn`); without, one node is this
    machine, and several GPU nodes are refused (verl would start a one-node Ray of its own and wait for the others
    for ever). Returns a one-line summary."""
    address = cluster_address()
    if address:
        gpu_wait()  # a bad THINKJ_GPU_WAIT now, not when the online stage starts
        return check_cluster(address, nnodes, gpus_per_node, free_now=False)
    if nnodes > 1 and device == "gpu":
        raise ThinkJError(f"{nnodes} nodes (NNODES / --nnodes): verl on several nodes joins a Ray cluster started "
                          "beforehand: start it (scripts/ray_cluster.sh head, then worker on every other node) and "
                          "set RAY_ADDRESS=<head address>:<port>, or use one node (NNODES=1)")
    return f"no Ray cluster (RAY_ADDRESS unset): verl starts its own on this machine for {nnodes} x {gpus_per_node}"


def runtime_env_overrides() -> list[str]:
    """verl Hydra overrides that make this checkout the job's ``working_dir`` (Ray copies it to every node, where the
    workers import ``thinkj`` from it). Nothing inside a job sent by ``ray job submit``: that job's runtime env
    already carries a working_dir, and Ray refuses a driver's runtime env that names the same field."""
    if os.environ.get(JOB_CONFIG_VAR):
        return []
    excludes = ",".join(f"'{pattern}'" for pattern in WORKING_DIR_EXCLUDES)
    return [f"+ray_kwargs.ray_init.runtime_env.working_dir='{PROJECT_ROOT}'",
            f"+ray_kwargs.ray_init.runtime_env.excludes=[{excludes}]"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default=cluster_address(), help="the head's GCS host:port [RAY_ADDRESS]")
    parser.add_argument("--nnodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, required=True)
    args = parser.parse_args(argv)
    if not args.address:
        raise ThinkJError("no cluster address: pass --address HOST:PORT or set RAY_ADDRESS")
    print(check_cluster(args.address, args.nnodes, args.gpus_per_node))
    return 0


if __name__ == "__main__":
    sys.exit(exit_on_user_error(main))
