"""The GPU node's LlamaFactory launch, rehearsed on the CPU: torchrun with 2 processes on gloo, the stage's own
DeepSpeed config (judge SFT: ZeRO-3, DPO: ZeRO-2, the BT reward model: ZeRO-3) on DeepSpeed's CPU accelerator,
through ``thinkj train ... --device cpu --processes 2``.

A distributed run is checked against the same command on one process, which runs without DeepSpeed: the same
global batch of 4 (the launcher splits the 4 accumulation steps over the 2 processes), the same seed, plain SGD at
a large step, no clipping and a constant rate, so that a gradient summed instead of averaged over the ranks, a
micro-batch counted twice or a ZeRO-3 save that wrote the placeholder shards shows as a different model. Adam and
clipping would hide a scale.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from thinkj.export.llamafactory import write_preference_dataset, write_sft_dataset
from thinkj.prompts import get_template, judge_output
from thinkj.synthetic.fruit_task import explain, make_pairs
from thinkj.train.config import ConfigError
from thinkj.train.launch import plan_stage

pytest.importorskip("deepspeed", reason="DeepSpeed is part of the CPU stack (requirements/cpu.txt)")

# SGD with a step large enough that the update dwarfs float noise; the rest as the device run's LlamaFactory steps
SETTINGS = ["max_steps=3", "save_strategy=no", "cutoff_len=512", "plot_loss=false", "logging_steps=1", "optim=sgd",
            "learning_rate=0.5", "lr_scheduler_type=constant", "warmup_steps=0", "max_grad_norm=0"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lf_data")
    judge, flip = get_template("judge_strength_v2"), {"a": "b", "b": "a"}
    pairs = make_pairs(16, seed=1)
    write_sft_dataset(folder, "sft", [(judge.render(p), judge_output(explain(p), p.label, p.strength)) for p in pairs])
    write_preference_dataset(folder, "pairs", [(judge.render(p), judge_output(explain(p), p.label, p.strength),
                                                judge_output(explain(p), flip[p.label], p.strength)) for p in pairs])
    return folder


def _train(kind: str, stage: str, dataset: str, processes: int, run_dir, model, data) -> tuple[dict, list[float]]:
    """``thinkj train KIND STAGE`` at a global batch of 4 (1 x 4 accumulation steps; on 2 processes the launcher
    makes that 2 x 1 x 2); the saved weights and the logged losses."""
    command = [sys.executable, "-m", "thinkj.cli", "train", kind, stage, "--model", "tiny", "--device", "cpu",
               "--processes", str(processes), "--run-dir", str(run_dir), f"model_name_or_path={model}",
               f"dataset_dir={data}", f"dataset={dataset}", "per_device_train_batch_size=1",
               "gradient_accumulation_steps=4", *SETTINGS]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    out = run_dir / stage
    record = json.loads((out / "thinkj_train.json").read_text())
    assert record["world_size"] == processes and record["global_batch"] == 4
    config = (out / "train_config.yaml").read_text()
    assert f"gradient_accumulation_steps: {4 // processes}\n" in config
    assert ("torchrun" in record["command"]) is (processes > 1)
    losses = [e["loss"] for e in json.loads((out / "trainer_state.json").read_text())["log_history"] if "loss" in e]
    return load_file(str(out / "model.safetensors")), losses


def _compare(start: dict, one: dict, two: dict) -> tuple[float, float]:
    """The size of one process's update and how far the two-process model is from it, relative to that update."""
    # the tiny model's tied lm_head is saved once, as the embedding, or also under its own name and equal to it
    # (seen: DPO under ZeRO-2)
    keys = set(start) - {"lm_head.weight"}
    for model in (one, two):
        assert keys <= set(model) <= keys | {"lm_head.weight"}
        assert "lm_head.weight" not in model or torch.equal(model["lm_head.weight"], model["model.embed_tokens.weight"])
    assert all(two[k].shape == start[k].shape for k in keys)  # a ZeRO-3 save of the local shards fails here
    delta_one = torch.cat([(one[k] - start[k]).flatten() for k in sorted(keys)])
    delta_two = torch.cat([(two[k] - start[k]).flatten() for k in sorted(keys)])
    return delta_one.norm().item(), ((delta_two - delta_one).norm() / delta_one.norm()).item()


# make test keeps the judge SFT under ZeRO-3 (partitioned parameters, the gathered save); DPO under ZeRO-2 (its
# reference model beside the policy) is opt-in for CI time: ~1 min alone, several beside the other xdist worker
@pytest.mark.slow
@pytest.mark.parametrize("kind,stage,dataset,zero", [
    ("sft", "judge_sft", "sft", 3), pytest.param("dpo", "dpo", "pairs", 2, marks=pytest.mark.opt_in)])
def test_two_processes_with_zero_train_the_model_one_process_trains(tmp_path, tiny_model_dir, data, kind, stage,
                                                                     dataset, zero):
    """Measured 2026-12-01: relative gap 1.6e-7 (SFT, ZeRO-3) and 4.8e-7 (DPO, ZeRO-2) for an update of norm 4.7
    and 5.3; losses equal to the 5 digits logged. Break tried once: the CPU config keeping ``use_cpu`` with several
    processes stopped both ranks in DeepSpeed's batch check (``4 != 2 * 1 * 1``)."""
    plan = plan_stage(kind, stage, profile="tiny", run_dir=tmp_path, device="cpu", processes=2,
                      overrides={"model_name_or_path": str(tiny_model_dir)})
    assert json.loads(Path(plan.config["deepspeed"]).read_text())["zero_optimization"]["stage"] == zero
    assert "use_cpu" not in plan.config and plan.env["CUDA_VISIBLE_DEVICES"] == ""
    one, losses_one = _train(kind, stage, dataset, 1, tmp_path / "one", tiny_model_dir, data)
    two, losses_two = _train(kind, stage, dataset, 2, tmp_path / "two", tiny_model_dir, data)
    update, gap = _compare(load_file(str(tiny_model_dir / "model.safetensors")), one, two)
    assert update > 1.0  # it learned something worth comparing (SGD at 0.5, three steps)
    assert gap < 1e-4, f"{kind} on 2 processes with ZeRO-{zero} is {gap:.2e} of the update away from 1 process"
    assert losses_two == pytest.approx(losses_one, rel=1e-4) and len(losses_one) == 3


@pytest.mark.slow
@pytest.mark.opt_in  # ~45 s alone; make test keeps the rm stage in one process (test_offline_train.py)
def test_reward_model_under_zero3_saves_its_value_head_whole(tmp_path, tiny_model_dir, data):
    """The BT classifier (LlamaFactory ``rm``, ZeRO-3 in bt_rm.yaml) on 2 processes: its tied embeddings untied
    first, then the backbone and the value head saved at their full shapes. Not compared with one process: TRL's
    value head applies dropout 0.1 in training, so a run's random draws depend on how its batch is laid out."""
    two, losses = _train("rm", "bt_rm", "pairs", 2, tmp_path / "two", tiny_model_dir, data)
    start = load_file(str(tiny_model_dir / "model.safetensors"))
    untied = {**start, "lm_head.weight": start["model.embed_tokens.weight"]}  # the untied base's own lm_head
    assert two.keys() == untied.keys() and all(two[k].shape == untied[k].shape for k in two) and len(losses) == 3
    head = load_file(str(tmp_path / "two" / "bt_rm" / "value_head.safetensors"))
    hidden = json.loads((tiny_model_dir / "config.json").read_text())["hidden_size"]
    assert head["v_head.summary.weight"].shape == (1, hidden)


def test_processes_are_a_cpu_setting_and_deepspeed_must_be_readable(tmp_path, tiny_model_dir):
    with pytest.raises(ConfigError, match="--processes 2: CPU only"):
        plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="gpu", processes=2)
    with pytest.raises(ConfigError, match="--processes 0"):
        plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="cpu", processes=0)
    one = plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="cpu")
    assert one.command is None and "deepspeed" not in one.config and one.config["use_cpu"] is True
    two = plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="cpu", processes=2)
    # judge_sft.yaml's 1 x 8 accumulation on one process stays a global batch of 8: 2 processes x 1 x 4
    assert one.config["gradient_accumulation_steps"] == 8 and two.config["gradient_accumulation_steps"] == 4
    # where the accumulation steps do not divide, the per-device batch does (tiny-cpu's 8 x 1 -> 2 x 4 x 1)
    split = plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="cpu", processes=2,
                       overrides=["per_device_train_batch_size=8", "gradient_accumulation_steps=1"])
    assert (split.config["per_device_train_batch_size"], split.config["gradient_accumulation_steps"]) == (4, 1)
    with pytest.raises(ConfigError, match="--processes 2: divides neither per_device_train_batch_size 3 nor "
                                          "gradient_accumulation_steps 3 .* global batch, 9, is kept"):
        plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="cpu", processes=2,
                   overrides=["per_device_train_batch_size=3", "gradient_accumulation_steps=3"])
    flags = dict(zip(two.command[1:-3:2], two.command[2:-3:2]))
    assert flags["--nproc_per_node"] == "2" and flags["--nnodes"] == "1" and two.world_size == 2
    assert flags["--master_port"] == two.env["MASTER_PORT"]  # a free port (29500 is the GPU default): side by side
    broken = tmp_path / "ds.json"
    broken.write_text("{not json")
    from thinkj.train.launch import check_deepspeed

    with pytest.raises(ConfigError, match="ds.json: not a readable DeepSpeed JSON"):
        check_deepspeed({"deepspeed": str(broken)})
    check_deepspeed({"deepspeed": two.config["deepspeed"]})
    check_deepspeed({"deepspeed": None})


def test_a_failed_launch_is_a_stage_incomplete_and_writes_no_completion_record(tmp_path, tiny_model_dir):
    """The ranks' own tracebacks are the story: the launcher adds one line (``StageIncomplete``, exit 1 at the
    entry point) and writes no thinkj_train.json. The launch here is a process that exits 3, not a torchrun."""
    from dataclasses import replace

    from thinkj.errors import StageIncomplete
    from thinkj.train.launch import DONE_FILE, run_plan

    write_sft_dataset(tmp_path / "data", "sft", [([{"role": "user", "content": "q"}], "a")])
    plan = plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path / "run", device="cpu", processes=2,
                      overrides={"model_name_or_path": str(tiny_model_dir), "dataset": "sft",
                                 "dataset_dir": str(tmp_path / "data")})
    failing = replace(plan, command=[sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(StageIncomplete, match="failed with exit code 3 .* rerun the same command to resume"):
        run_plan(failing)
    assert not (plan.output_dir / DONE_FILE).exists()


def test_a_finished_stage_is_reused_only_on_as_many_processes(tmp_path, tiny_model_dir):
    """The same config on 1 and on 2 processes is another global batch (and a ZeRO checkpoint holds one partition per
    rank): the completion record and the started record name the process count."""
    from thinkj.records import write_json
    from thinkj.train.launch import DONE_FILE, STARTED_FILE, _normalised, _resumable, finished_with

    plan = plan_stage("sft", "judge_sft", profile="tiny", run_dir=tmp_path, device="cpu", processes=2,
                      overrides={"model_name_or_path": str(tiny_model_dir)})
    plan.output_dir.mkdir(parents=True)
    planned = _normalised(plan.config)
    write_json(plan.output_dir / DONE_FILE, {"planned": planned, "world_size": 2})
    assert finished_with(plan.output_dir, plan.config, 2) and not finished_with(plan.output_dir, plan.config, 4)
    write_json(plan.output_dir / STARTED_FILE, {"planned": planned, "world_size": 2})
    assert _resumable(plan.output_dir, plan.config, planned, 2)
    assert not _resumable(plan.output_dir, plan.config, planned, 3)

