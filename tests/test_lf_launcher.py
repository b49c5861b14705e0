"""The torchrun entry used on GPUs runs LlamaFactory's dpo stage in a fresh process (TRL import fix applied)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from thinkj.demo.tiny_task import explain, make_pairs
from thinkj.export.llamafactory import write_preference_dataset
from thinkj.prompts import get_template, judge_output
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
        "max_steps": 2, "per_device_train_batch_size": 2, "save_strategy": "no", "report_to": "none"})
    config = tmp_path / "dpo.yaml"
    save_config(plan.config, config)
    result = subprocess.run([sys.executable, "-m", "thinkj.train.lf_launcher", str(config)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (plan.output_dir / "model.safetensors").exists()
