"""TRL GRPO's step layout (thinkj/online/trl_batching.py): how many rollouts go through one forward and backward,
gradient checkpointing and the rollout engine, the exact fields handed to TRL's GRPOConfig, and -- with TRL's own
trainer on the tiny judge -- that micro-batches with gradient accumulation make the same update as one batch.

Break tried once (2026-11-28, in a copy of the package): the layout handing TRL ``steps_per_generation=N`` with
``gradient_accumulation_steps=1`` instead of accumulating (TRL then makes one optimizer update per micro-batch): the
same-update test failed (largest gap 2.4e-4 against a largest change of 4.3e-4; 7.5e-9 when not broken), and both
GRPOConfig tests failed on gradient_accumulation_steps.
"""

from __future__ import annotations

import pytest

from thinkj.errors import ThinkJError
from thinkj.online.trl_batching import GPU_MICRO_BATCH, StepLayout, micro_batch_size, rollout_engine, step_layout
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs


def test_micro_batch_arithmetic():
    assert micro_batch_size(0, 32, cpu=True) == 32  # a CPU keeps every rollout of a step in one pass
    assert micro_batch_size(0, 64, cpu=False) == GPU_MICRO_BATCH == 8
    assert micro_batch_size(0, 12, cpu=False) == 6  # the largest divisor of the step up to 8
    assert micro_batch_size(0, 7, cpu=False) == 7 and micro_batch_size(0, 11, cpu=False) == 1
    assert micro_batch_size(16, 64, cpu=True) == 16
    for bad in (3, 65, -1):
        with pytest.raises(ThinkJError, match="micro_batch"):
            micro_batch_size(bad, 64, cpu=False)
    with pytest.raises(ThinkJError, match="whole number"):
        micro_batch_size(True, 64, cpu=False)


def test_layout_checkpointing_and_rollouts():
    cpu = step_layout(rollouts=32, micro_batch=0, cpu=True, twins=False, extra={})
    # GRPOConfig's own default (gradient checkpointing on), which every CPU run so far used
    assert (cpu.micro_batch, cpu.accumulation, cpu.gradient_checkpointing, cpu.rollout) == (32, 1, True, "hf")
    assert cpu.grpo_config_fields() == {"per_device_train_batch_size": 32, "gradient_accumulation_steps": 1,
                                        "gradient_checkpointing": True, "use_vllm": False}
    gpu = step_layout(rollouts=64, micro_batch=0, cpu=False, twins=True, extra={})
    assert (gpu.micro_batch, gpu.accumulation, gpu.gradient_checkpointing, gpu.rollout) == (8, 8, True, "hf")
    assert "twin sampler" in gpu.rollout_why  # both orders are laid out by the twin sampler, never by vLLM
    off = step_layout(rollouts=64, micro_batch=16, cpu=False, twins=False,
                      extra={"gradient_checkpointing": False, "use_vllm": False})
    assert (off.micro_batch, off.accumulation, off.gradient_checkpointing, off.rollout) == (16, 4, False, "hf")
    assert rollout_engine(cpu=True, twins=False, extra={}) == ("hf", "on a CPU")
    for extra, says in (({"use_vllm": True}, "needs a GPU"), ({"use_vllm": "yes"}, "true or false"),
                        ({"gradient_checkpointing": "no"}, "true or false"),
                        ({"per_device_train_batch_size": 4}, "--micro-batch"),
                        ({"steps_per_generation": 2}, "--micro-batch")):
        with pytest.raises(ThinkJError, match=says):
            step_layout(rollouts=32, micro_batch=0, cpu=True, twins=False, extra=extra)
    with pytest.raises(ThinkJError, match="twin sampler"):
        rollout_engine(cpu=False, twins=True, extra={"use_vllm": True})
    vllm = StepLayout(64, 8, 8, True, "vllm", "a GPU").grpo_config_fields()
    assert (vllm["use_vllm"], vllm["vllm_mode"]) == (True, "colocate")


def test_vllm_rollouts_only_where_trl_can_use_vllm():
    """Here vLLM is the CPU build 0.28, which lacks the 0.10.2 API TRL 0.24 imports (trl_compat): TRL's vLLM path is
    off, so a GPU run would generate with transformers and say why; use_vllm=true is refused with the same reason."""
    from thinkj.online.trl_batching import vllm_problem

    problem = vllm_problem()
    engine, why = rollout_engine(cpu=False, twins=False, extra={})
    assert (engine == "vllm") == (problem is None) and (problem is None or why == problem)
    if problem is not None:
        with pytest.raises(ThinkJError, match="use_vllm=true: "):
            rollout_engine(cpu=False, twins=False, extra={"use_vllm": True})
        gpu = step_layout(rollouts=64, micro_batch=0, cpu=False, twins=False, extra={})
        assert gpu.grpo_config_fields()["use_vllm"] is False and "vllm_mode" not in gpu.grpo_config_fields()


def test_grpo_config_gets_the_layout(tiny_model_dir, tmp_path):
    from thinkj.online.trl_grpo import GRPORun, _grpo_config

    write_jsonl(tmp_path / "pairs.jsonl", [p for p in make_pairs(12, seed=3) if p.label != "tie"][:4])
    base = dict(model=str(tiny_model_dir), data=str(tmp_path / "pairs.jsonl"), out_dir=str(tmp_path / "run"),
                num_generations=4, prompts_per_step=4)
    whole = _grpo_config(GRPORun(**base), tmp_path / "ckpt", cpu=True)
    assert (whole.per_device_train_batch_size, whole.gradient_accumulation_steps, whole.steps_per_generation,
            whole.generation_batch_size, whole.gradient_checkpointing, whole.use_vllm) == (16, 1, 1, 16, True, False)
    split = _grpo_config(GRPORun(**base, micro_batch=4), tmp_path / "ckpt", cpu=True)
    assert (split.per_device_train_batch_size, split.gradient_accumulation_steps, split.steps_per_generation,
            split.generation_batch_size, split.num_generations) == (4, 4, 4, 16, 4)
    twins = _grpo_config(GRPORun(**base, twins="union", micro_batch=8), tmp_path / "ckpt", cpu=True)
    assert (twins.per_device_train_batch_size, twins.gradient_accumulation_steps, twins.generation_batch_size,
            twins.num_generations) == (8, 4, 32, 8)
    with pytest.raises(ThinkJError, match="must divide the 16 rollouts"):
        _grpo_config(GRPORun(**base, micro_batch=6), tmp_path / "ckpt", cpu=True)


def test_gpu_settings_for_grpo_config(tmp_path, monkeypatch):
    """What a GPU run hands GRPOConfig (GRPOConfig itself refuses bf16 on this CPU, so the dict is read): here, where
    TRL's vLLM path is off, transformers with its KV cache; where vLLM is usable (the probe replaced), vLLM colocated
    without transformers-only generation keys (TRL passes them to vLLM's SamplingParams)."""
    import thinkj.online.trl_batching as batching
    from thinkj.online.trl_grpo import GRPORun, grpo_settings

    run = GRPORun(model="m", data="d", out_dir=str(tmp_path / "run"), num_generations=8, prompts_per_step=8,
                  max_completion_length=512)
    layout = ("per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "use_vllm",
              "bf16", "use_cpu")
    if batching.vllm_problem() is not None:
        hf = grpo_settings(run, tmp_path / "ckpt", cpu=False)
        assert tuple(hf[k] for k in layout) == (8, 8, True, False, True, False) and "vllm_mode" not in hf
        assert hf["generation_kwargs"] == {"use_cache": True, "top_k": 0}
    monkeypatch.setattr(batching, "vllm_problem", lambda: None)
    vllm = grpo_settings(run, tmp_path / "ckpt", cpu=False)
    assert tuple(vllm[k] for k in layout) == (8, 8, True, True, True, False)
    assert vllm["vllm_mode"] == "colocate" and vllm["generation_kwargs"] == {}
    off = grpo_settings(GRPORun(**{**run.__dict__, "micro_batch": 32, "extra": {"gradient_checkpointing": False,
                                                                                 "use_vllm": False}}),
                        tmp_path / "ckpt", cpu=False)
    assert tuple(off[k] for k in layout[:4]) == (32, 2, False, False)


@pytest.mark.slow
def test_micro_batches_make_the_same_update_as_one_batch(judge, tmp_path):
    """One GRPO step of TRL's own trainer from the tiny judge, all 16 rollouts in one pass vs 4 micro-batches of 4:
    the same seed gives the same rollouts, and the accumulated gradient (TRL's "dapo" loss divides every micro-batch
    by the whole generation batch's tokens) the same update, up to float error. Plain SGD without clipping, so the
    update is the gradient itself: Adam's step hardly depends on the gradient's scale and would hide one that is off
    by a constant factor. The weights must move at all."""
    import torch
    from safetensors.torch import load_file

    from thinkj.online.trl_grpo import GRPORun, run_trl_grpo

    write_jsonl(tmp_path / "pairs.jsonl", [p for p in make_pairs(16, seed=5) if p.label != "tie"][:8])
    weights = {}
    for micro in (0, 4):
        out = tmp_path / f"micro{micro}"
        summary = run_trl_grpo(GRPORun(model=str(judge), data=str(tmp_path / "pairs.jsonl"), out_dir=str(out),
                                       steps=1, num_generations=4, prompts_per_step=4, learning_rate=1e-2,
                                       max_completion_length=48, device="cpu", micro_batch=micro,
                                       extra={"shuffle_dataset": False, "optim": "sgd", "max_grad_norm": 0.0}))
        assert summary["layout"]["micro_batch"] == (16 if micro == 0 else 4)
        weights[micro] = load_file(str(out / "model" / "model.safetensors"))
    start = load_file(str(judge / "model.safetensors"))
    moved = max((weights[0][k] - start[k]).abs().max().item() for k in start)
    gap = max((weights[0][k] - weights[4][k]).abs().max().item() for k in start)
    print(f"largest weight change {moved:.3g}, largest gap between the two updates {gap:.3g}")
    assert moved > 1e-4, moved
    assert gap < 1e-3 * moved, (gap, moved)
    assert all(torch.isfinite(w).all() for w in weights[4].values())
