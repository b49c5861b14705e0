"""A verl run on a Ray cluster that the user started: check its nodes before launching, and ship the code.

    python -m thinkj.online.ray_cluster --address 10.0.0.1:6379 --nnodes 2 --gpus-per-node 8   # exit 2 if short

verl's trainer places one worker per GPU over ``trainer.nnodes`` x ``trainer.n_gpus_per_node``. Asked for more than
the cluster holds, it does not fail: it waits for Ray to find resources that never come. :func:`check_cluster`
reads the cluster at the given address (``ray.nodes()``, ``ray.available_resources()``) and refuses in one line
when it holds fewer live nodes with that many GPUs than asked, or when other jobs hold the GPUs.

The job's code must import on every node (the reward ``pkg://thinkj.rewards.adapters.verl`` and the hooks
``thinkj.online.verl_hooks`` run inside Ray workers there): :func:`runtime_env_overrides` hands verl's
``ray.init`` this checkout as the job's ``working_dir``, so Ray copies it to every node, as
``scripts/submit_verl_2node.sh`` does for a job sent with ``ray job submit``.
"""

from __future__ import annotations

import argparse
import os
import sys

from thinkj.errors import ThinkJError, exit_on_user_error
from thinkj.paths import PROJECT_ROOT

# What the job's copy of the checkout leaves out (anchored with "/": the package folder thinkj/data/ travels).
# Ray refuses a working_dir over 500 MiB; these are the big folders of a checkout. Same list as
# scripts/submit_verl_2node.sh.
WORKING_DIR_EXCLUDES = ("/.venv/", "/.cache/", "/runs/", "/data/", "/.git/", "*.parquet", "*.safetensors")
# Set by Ray's job manager in a job's driver (`ray job submit`): the job's runtime env, working_dir included.
JOB_CONFIG_VAR = "RAY_JOB_CONFIG_JSON_ENV_VAR"


class ClusterTooSmall(ThinkJError):
    """The Ray cluster holds fewer nodes or GPUs than the run asks for."""


def cluster_address() -> str | None:
    """The running cluster a launch joins: ``RAY_ADDRESS`` (``host:port`` of the head's GCS), or None."""
    return os.environ.get("RAY_ADDRESS") or None


def read_cluster(address: str) -> tuple[list[dict], dict[str, float]]:
    """The live nodes (``NodeManagerAddress``, ``Resources``) and the free resources of the cluster at ``address``."""
    import ray

    try:
        ray.init(address=address, log_to_driver=False, logging_level="ERROR", configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ThinkJError(f"RAY_ADDRESS={address}: no Ray cluster answers there ({' '.join(str(err).split())[:200]}); "
                          "start one with scripts/ray_cluster.sh head (and worker on the other nodes)") from None
    try:
        nodes = [node for node in ray.nodes() if node.get("Alive")]
        free = dict(ray.available_resources())
    finally:
        ray.shutdown()
    return nodes, free


def check_cluster(address: str, nnodes: int, gpus_per_node: int) -> str:
    """Refuse (:class:`ClusterTooSmall`, one line) a cluster with fewer than ``nnodes`` live nodes of at least
    ``gpus_per_node`` GPUs each, or with fewer free GPUs than the run takes; else a one-line summary."""
    nodes, free = read_cluster(address)
    gpus = sorted((int(node.get("Resources", {}).get("GPU", 0)) for node in nodes), reverse=True)
    listed = ", ".join(f"{node.get('NodeManagerAddress', '?')}: {int(node.get('Resources', {}).get('GPU', 0))} GPU"
                       for node in nodes) or "none"
    fitting = sum(count >= gpus_per_node for count in gpus)
    asked = f"{nnodes} node(s) x {gpus_per_node} GPU(s)"
    if fitting < nnodes:
        raise ClusterTooSmall(f"the Ray cluster at {address} has {fitting} live node(s) with {gpus_per_node} or more "
                              f"GPUs (nodes: {listed}) and the run asks for {asked}: start the missing node(s) "
                              "(scripts/ray_cluster.sh worker) or lower NNODES / GPUS_PER_NODE")
    if free.get("GPU", 0) < nnodes * gpus_per_node:
        raise ClusterTooSmall(f"the Ray cluster at {address} has {free.get('GPU', 0):g} free GPU(s) of {sum(gpus)} "
                              f"and the run asks for {asked}: other jobs hold the rest (`ray status --address "
                              f"{address}`)")
    return f"Ray cluster at {address}: {len(nodes)} live node(s) ({listed}); the run takes {asked}"


def preflight(nnodes: int, gpus_per_node: int, device: str) -> str:
    """What a verl launch of ``nnodes`` x ``gpus_per_node`` checks first: with ``RAY_ADDRESS``, that cluster's nodes
    (:func:`check_cluster`); without, one node is this machine, and several GPU nodes are refused (verl would start a
    one-node Ray of its own and wait for the others for ever). Returns a one-line summary."""
    address = cluster_address()
    if address:
        return check_cluster(address, nnodes, gpus_per_node)
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
