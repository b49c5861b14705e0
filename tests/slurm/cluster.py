"""A real Slurm on this machine for tests: slurmctld and two slurmd (two nodes of one host) on 127.0.0.1.

    from slurm.cluster import local_slurm     # tests/ is on sys.path in a test module

    with local_slurm(nodes=2, cpus=2) as slurm:
        subprocess.run(["sbatch", "--wait", "scripts/slurm/verl.sbatch"], env=slurm.env, check=True)

Debian's ``slurm-wlm`` (``bash tests/slurm/setup.sh`` installs it) with ``AuthType=auth/none`` (its
``auth_none`` plugin: no MUNGE daemon, a test cluster only), free ports, a ``slurm.conf`` and every state, spool,
log and pid file in a temp dir of its own; each node is a ``slurmd -N <node>`` with its own port. The daemons run
in the foreground as children of the test and are stopped (jobs cancelled first) on leaving the block, however
it is left. ``available()`` says why a test must skip (no Slurm installed, not root).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "sbatch", "sinfo", "scancel")


@dataclass
class LocalSlurm:
    env: dict[str, str]  # os.environ + SLURM_CONF: what sbatch, squeue, scontrol ... read
    folder: Path
    nodes: list[str]

    def log(self, name: str) -> str:
        path = self.folder / name
        return path.read_text(errors="replace") if path.exists() else ""


def available() -> str | None:
    """Why a local Slurm cannot run here (None when it can)."""
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): run `bash tests/slurm/setup.sh` (root)"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs as the submitting user"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(folder: Path, nodes: list[str], cpus: int) -> str:
    host = socket.gethostname()
    lines = ["ClusterName=thinkjtest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={_free_port()}",
             "AuthType=auth/none", "CredType=cred/none", "SlurmUser=root", "SlurmdUser=root",
             f"StateSaveLocation={folder}/state", f"SlurmdSpoolDir={folder}/spool_%n",
             f"SlurmctldPidFile={folder}/slurmctld.pid", f"SlurmdPidFile={folder}/slurmd_%n.pid",
             f"SlurmctldLogFile={folder}/slurmctld.log", f"SlurmdLogFile={folder}/slurmd_%n.log",
             # linuxproc follows a job's processes by parentage (Ray's daemons start in sessions of their own)
             "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
             "SelectTypeParameters=CR_CPU", "SchedulerType=sched/builtin", "MpiDefault=none", "ReturnToService=2",
             "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
             "JobAcctGatherType=jobacct_gather/none", "KillWait=10"]
    lines += [f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={_free_port()} CPUs={cpus}"
              for node in nodes]
    lines.append(f"PartitionName=tj Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES")
    return "\n".join(lines) + "\n"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def local_slurm(nodes: int = 2, cpus: int = 2, ready_s: float = 60) -> Iterator[LocalSlurm]:
    """slurmctld and ``nodes`` slurmd of ``cpus`` CPUs each, idle and ready; all stopped on exit."""
    folder = Path(tempfile.mkdtemp(prefix="tj_slurm_"))
    names = [f"tj{i + 1}" for i in range(nodes)]
    conf = folder / "slurm.conf"
    conf.write_text(_config(folder, names, cpus))
    (folder / "state").mkdir()
    env = {**os.environ, "SLURM_CONF": str(conf)}
    slurm = LocalSlurm(env, folder, names)
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, folder, True)
        daemons = [["slurmctld", "-D", "-f", str(conf)], *(["slurmd", "-D", "-N", n, "-f", str(conf)] for n in names)]
        for argv in daemons:
            out = open(folder / f"{argv[0]}{'_' + argv[3] if argv[0] == 'slurmd' else ''}.out", "w")
            stack.callback(out.close)
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
            stack.callback(_stop, proc)  # last started, first stopped: the slurmds before slurmctld
            if argv[0] == "slurmctld":
                time.sleep(1)
        # jobs first, so that their steps (and the Ray nodes in them) end before the daemons
        stack.callback(subprocess.run, ["scancel", "--full", "--partition", "tj"], env=env, capture_output=True)
        deadline = time.monotonic() + ready_s
        while True:
            info = subprocess.run(["sinfo", "-h", "-o", "%T %D"], env=env, capture_output=True, text=True)
            idle = sum(int(count) for state, count in (line.split() for line in info.stdout.splitlines())
                       if state == "idle")
            if idle == nodes:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"local Slurm not ready in {ready_s} s: sinfo says {info.stdout.strip()!r} "
                                   f"{info.stderr.strip()!r}; slurmctld log: {slurm.log('slurmctld.log')[-2000:]}")
            time.sleep(1)
        yield slurm
