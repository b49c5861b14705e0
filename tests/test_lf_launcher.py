"""The torchrun entry used on GPUs runs LlamaFactory's dpo stage in a fresh process (TRL import fix applied)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from thinkj.export.llamafactory import write_preference_dataset
from thinkj.prompts import get_template, judge_output
from thinkj.synthetic.fruit_task import explain, make_pairs
from thinkj.train.config import save_config
from thinkj.train.launch import plan_stage


@pytest.mark.slow
def test_lf_launcher_trains_dpo_in_a_fresh_process(tmp_path, tiny_model_dir):
    judge = get_template("judge_strength_v2")
    flip = {"a": "b", "b": "a"}
    examples = [(judge.render(p), judge_output(explain(p), p.label, p.strength),
                 judge_output(explain(p), flip[p.label], p.strength)) for p in make_pairs(8, seed=1)]
    write_preference_dataset(tmp_path / "data", "pairs", examples)
    plan = plan_stage("dpo", "dpo", profile="tiny", run_dir=tmp_path / "run", device="cpu", overrides={
        "model_name_or_path": str(tiny_model_dir), "dataset": "pairs", "dataset_dir": str(tmp_path / "data"),
        "max_steps": 2, "per_device_train_batch_size": 2, "save_strategy": "no", "report_to": "none",
        "logging_steps": 1})
    config = tmp_path / "dpo.yaml"
    save_config(plan.config, config)
    result = subprocess.run([sys.executable, "-m", "thinkj.train.lf_launcher", str(config)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # DPO really trained: two logged steps with DPO's own metrics, the first with policy == reference (every reward 0,
    # so the DPO term is log 2; the config's SFT term pref_ftx adds to the loss), and the weights moved from the start
    # model. An exit code and a weights file also passed for a launcher that wrote the start model back untrained
    # (run_exp replaced by a copy), tried once.
    state = json.loads((plan.output_dir / "trainer_state.json").read_text())
    logged = [e for e in state["log_history"] if "loss" in e]
    assert [e["step"] for e in logged] == [1, 2]
    assert logged[0]["rewards/chosen"] == pytest.approx(0.0, abs=1e-3) == logged[0]["rewards/margins"]
    assert logged[0]["loss"] >= math.log(2) - 0.01
    start, trained = (load_file(str(d / "model.safetensors")) for d in (tiny_model_dir, plan.output_dir))
    assert start.keys() == trained.keys() and any(not torch.equal(start[k], trained[k]) for k in start)
