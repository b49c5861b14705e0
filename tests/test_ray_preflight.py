"""verl on several nodes joins the user's Ray cluster (issue 38, fault 2), checked before anything launches.

What needs no cluster is here (seconds); the check against a real two-node Ray cluster on this machine is in
tests/test_ray_two_node.py (``test_head_worker_status_and_stop_on_loopback``). Each test fails on the code
before the fix: ``--nnodes 2`` without a cluster went on to start verl (which waits for ever for the second
node), and a cluster launch kept relative paths and shipped no code to the other nodes.
"""

from __future__ import annotations

import pytest

from thinkj.errors import ThinkJError
from thinkj.online.ray_cluster import WORKING_DIR_EXCLUDES, preflight
from thinkj.online.verl_launch import VerlLaunch, build_command, main
from thinkj.paths import PROJECT_ROOT


def test_several_gpu_nodes_without_a_cluster_are_refused_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ThinkJError, match=r"^2 nodes \(NNODES / --nnodes\): verl on several nodes joins a Ray cluster"):
        preflight(2, 8, "gpu")
    assert "no Ray cluster" in preflight(1, 8, "gpu")  # one node: verl starts its own Ray here
    # the launcher, on a GPU node (as if: this machine's own no-GPU refusal comes first, tests/test_online_verl.py),
    # refuses before any data is read (none exists here)
    monkeypatch.setattr("thinkj.online.verl_launch.gpu_available", lambda: True)
    code = main(["--algo", "grpo", "--model", str(tmp_path / "no_model"), "--data", str(tmp_path / "none.parquet"),
                 "--nnodes", "2", "--gpus-per-node", "8", "--allow-think-tokens"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: 2 nodes (NNODES / --nnodes)")
    assert sum(line.startswith("error") for line in err) == 1  # one line, no traceback


def test_pipeline_refuses_two_nodes_without_a_cluster_before_stage_one(monkeypatch, tmp_path):
    from thinkj.pipeline.run import run_pipeline
    from thinkj.pipeline.settings import env_settings

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("THINKJ_TEST_TEACHER_KEY", "x")
    s = env_settings({"RUN_DIR": str(tmp_path / "run"), "NNODES": "2", "TEACHER_KEY_ENV": "THINKJ_TEST_TEACHER_KEY",
                  "MODEL_PROFILE": "tiny"})
    with pytest.raises(ThinkJError, match="verl on several nodes joins a Ray cluster"):
        run_pipeline(s)
    assert not (tmp_path / "run" / "data").exists()  # no stage ran


def test_a_cluster_launch_has_absolute_paths_and_ships_the_checkout(monkeypatch, tmp_path):
    """With RAY_ADDRESS the workers run on other nodes, in the job's copy of the checkout: every local path is
    absolute and the checkout is the job's working_dir (so `thinkj` imports there); the overrides parse in Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "train.parquet").write_bytes(b"")
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    argv, _ = build_command(VerlLaunch(algo="grpo", model="model", train_files="train.parquet", out_dir="out",
                                       nnodes=2, gpus_per_node=8, overrides=["trainer.total_epochs=1"]))
    assert f"actor_rollout_ref.model.path={tmp_path / 'model'}" in argv
    assert f"data.train_files={tmp_path / 'train.parquet'}" in argv
    assert argv[-1] == "trainer.total_epochs=1"  # the user's overrides stay last
    shipped = [o for o in argv if o.startswith("+ray_kwargs.ray_init.runtime_env.")]
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(shipped)}
    assert parsed["ray_kwargs.ray_init.runtime_env.working_dir"] == str(PROJECT_ROOT)
    assert parsed["ray_kwargs.ray_init.runtime_env.excludes"] == list(WORKING_DIR_EXCLUDES)
    # inside a job sent by `ray job submit` the job's runtime env already ships the code (Ray refuses a second one)
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {"working_dir": "gcs://x.zip"}}')
    argv, _ = build_command(VerlLaunch(algo="grpo", model="model", train_files="train.parquet", nnodes=2))
    assert not any("runtime_env.working_dir" in o for o in argv)
