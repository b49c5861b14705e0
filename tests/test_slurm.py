"""The Slurm scripts against a real Slurm on this machine (tests/slurm/cluster.py: slurmctld and two slurmd on
127.0.0.1, CPU nodes), each submitted with ``sbatch --wait``: a Ray head on the first node, a worker on the second
(scripts/slurm/ray_on_slurm.sh), then the stage.

- ``scripts/slurm/verl.sbatch``: verl's GRPO trainer on the tiny judge, world size 2 over the two Ray nodes, 2 steps;
- ``scripts/slurm/pipeline.sbatch``: the whole CPU rehearsal (``scripts/reproduce_cpu.sh``, ``CPU_MODEL=tiny``) with
  NNODES=2: every stage's completion record, the online stage's checkpoint sharded over two ranks.

Status (2026-12-02, experiments/LOG.md session 26): all three pass (wiring 44 s, verl 300 s, pipeline 428 s). The
wiring test dry-runs the tiny recipe, whose online stage is verl's; it had rotted when SmolLM2's recipe moved to TRL.

Opt-in (minutes of engine time on 2 cores): ``python -m pytest -q tests/test_slurm.py -m opt_in``. Needs Slurm
(``bash tests/slurm/setup.sh``) and root; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from ray_local import free_port
from slurm.cluster import available, local_slurm
from test_reproduce import stages_in
from test_verl_cpu_train import data  # noqa: F401  (fixture: the verl parquet; the tiny judge is conftest's)

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.opt_in, pytest.mark.slow, pytest.mark.timeout(3000),
              pytest.mark.skipif(available() is not None, reason=str(available()))]


def ray_settings(tmp_path: Path) -> dict[str, str]:
    """Two Ray nodes on one host: loopback, free ports, short temp dirs (Ray's socket paths), declared resources."""
    return {"NODE_IP": "127.0.0.1", "RAY_PORT": str(free_port()), "DASHBOARD_PORT": str(free_port()),
            "CLIENT_PORT": str(free_port()), "AGENT_PORT": str(free_port()), "RAY_TEMP_ROOT": tempfile.gettempdir(),
            "RAY_LOGS": str(tmp_path / "ray_logs"), "CPUS": "4", "DEVICE": "cpu", "RAY_AUTH_MODE": "disabled",
            "PYTHON": os.environ.get("PYTHON", str(ROOT / ".venv" / "bin" / "python"))}


def sbatch(slurm, script: str, env: dict[str, str], log: Path, *args: str) -> tuple[int, float]:
    start = time.monotonic()
    proc = subprocess.run(["sbatch", "--wait", "--nodes=2", f"--output={log}", str(ROOT / "scripts" / "slurm" / script),
                           *args], env={**slurm.env, **env}, cwd=ROOT, capture_output=True, text=True, timeout=2700)
    return proc.returncode, round(time.monotonic() - start, 1)


def two_rank_checkpoint(checkpoints: Path, step: int) -> list[str]:
    return sorted(p.name for p in (checkpoints / f"global_step_{step}" / "actor").glob("model_world_size_*"))


def test_pipeline_sbatch_starts_ray_on_both_nodes_and_hands_the_pipeline_the_cluster(tmp_path):
    """The wiring alone, in about a minute: a Ray head and worker in two Slurm steps, the cluster check passing with
    2 nodes, the pipeline's stage list printed for NNODES=2 (DRY_RUN=1: no stage runs), the nodes stopped after."""
    log = tmp_path / "job.log"
    # the tiny recipe's stage list: its online stage is verl's, so Slurm's node count must reach verl's command
    # (SmolLM2's CPU recipe trains online with TRL, whose command names no nodes)
    env = {**ray_settings(tmp_path), "REPRODUCE": "scripts/reproduce_cpu.sh", "CPU_MODEL": "tiny",
           "RUN_DIR": str(tmp_path / "run"), "DRY_RUN": "1"}
    with local_slurm(nodes=2, cpus=2) as slurm:
        code, seconds = sbatch(slurm, "pipeline.sbatch", env, log)
        text = log.read_text(errors="replace") if log.exists() else ""
        assert code == 0, text[-6000:] + slurm.log("slurmctld.log")[-2000:]
    print(json.dumps({"job_s": seconds}))
    assert re.search(r"\[ray on slurm\] Ray cluster at 127\.0\.0\.1:\d+: 2 live node\(s\)", text), text[-3000:]
    online = " ".join(next((argv for kind, name, argv in stages_in(text) if name == "online"), []))
    assert "--engine verl" in online and "--nnodes 2 --gpus-per-node 1" in online, text[-3000:]
    # the Ray nodes ended with the job: no process names the cluster's GCS port any more
    ps = subprocess.run(["ps", "-eo", "args="], capture_output=True, text=True).stdout.splitlines()
    assert not [line for line in ps if re.search(rf"[:= ]{env['RAY_PORT']}\b", line)]


def test_verl_sbatch_trains_across_two_slurm_nodes(judge, data, tmp_path):  # noqa: F811
    out, log = tmp_path / "grpo", tmp_path / "job.log"
    env = {**ray_settings(tmp_path), "ALGO": "grpo", "MODEL": str(judge), "DATA": str(data["train"]),
           "VAL_DATA": str(data["val"]), "OUT": str(out)}
    with local_slurm(nodes=2, cpus=2) as slurm:
        code, seconds = sbatch(slurm, "verl.sbatch", env, log, "trainer.total_training_steps=2", "trainer.test_freq=2")
        print(json.dumps({"job_s": seconds}))
        text = log.read_text(errors="replace") if log.exists() else ""
        assert code == 0, text[-6000:] + slurm.log("slurmctld.log")[-2000:]
    assert "[ray on slurm] Ray cluster at 127.0.0.1:" in text and "2 live node(s)" in text
    rows = [json.loads(line) for line in open(out / "logs" / "thinkj" / "thinkj_grpo.jsonl")]
    assert sorted({row["step"] for row in rows if "actor/pg_loss" in row["data"]}) == [1, 2]
    assert two_rank_checkpoint(out / "checkpoints", 2) == ["model_world_size_2_rank_0.pt",
                                                           "model_world_size_2_rank_1.pt"]


def test_pipeline_sbatch_runs_the_cpu_rehearsal_on_two_nodes(tmp_path):
    run_dir, log = tmp_path / "run", tmp_path / "job.log"
    env = {**ray_settings(tmp_path), "REPRODUCE": "scripts/reproduce_cpu.sh", "CPU_MODEL": "tiny",
           "RUN_DIR": str(run_dir), "EVAL_LIMIT": "8",
           # world size 2 takes 4 prompts a step (verl_cpu) and the rehearsal's data selection leaves 3 RL rows: 2
           # prompts a step (1 per rank, each with its GRPO group); the rest is reproduce_cpu.sh's tiny default
           "VERL_OVERRIDES": "actor_rollout_ref.actor.optim.lr=1e-4 data.max_response_length=48 "
                             "data.train_batch_size=2 actor_rollout_ref.actor.ppo_mini_batch_size=2"}
    with local_slurm(nodes=2, cpus=2) as slurm:
        code, seconds = sbatch(slurm, "pipeline.sbatch", env, log)
        print(json.dumps({"job_s": seconds}))
        text = log.read_text(errors="replace") if log.exists() else ""
        assert code == 0, text[-8000:]
    # the pipeline checked the cluster before stage 1; verl's ranks spread over both nodes
    assert "# Ray cluster at 127.0.0.1:" in text and "2 live node(s)" in text
    done = {p.name[: -len(".done.json")] for p in run_dir.rglob("*.done.json")}
    assert {"load", "difficulty", "judge_sft", "online", "merge", "eval_synthetic", "tables"} <= done, sorted(done)
    online = next(run_dir.glob("train/online_*"))
    assert two_rank_checkpoint(online / "checkpoints", 2) == ["model_world_size_2_rank_0.pt",
                                                              "model_world_size_2_rank_1.pt"]
