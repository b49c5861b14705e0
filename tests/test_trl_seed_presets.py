"""A few TRL GRPO steps on the tiny model with the group-level XML judge and multi-objective presets, driven
by their configs under configs/rewards/ (the rewards themselves are checked in test_reward_seed_presets)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from thinkj.online.trl_presets import load_config, main, rows_for_trl, run_grpo

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
TINY = {"num_generations": 2, "max_completion_length": 8, "max_prompt_length": 96}

TEXTS = ["The bridge opened in 1932 and carried 40 cars a day. It is still in use. Engineers inspect it in spring.",
         "A kettle holds 2 litres of water and boils in 4 minutes. The handle is wood. It was sold in 1999.",
         "The library is open from 9 to 5. Children can borrow 3 books at a time. The reading room is quiet."]


def check_run(summary, out, reward_name, steps=2):
    assert summary["steps"] == steps and summary["reward_fn"] == reward_name
    assert len(summary["rewards"]) == steps and all(math.isfinite(r) for r in summary["rewards"])
    assert summary["last_metrics"]["group_size"] == TINY["num_generations"]  # grouped by prompt, as TRL sent them
    # TRL's logged reward for the last step is the mean of what our reward returned for that batch
    assert summary["rewards"][-1] == pytest.approx(summary["last_metrics"]["score"], abs=1e-4)
    assert (out / "model" / "config.json").exists()
    assert json.loads((out / "summary.json").read_text())["steps"] == steps


def test_trl_grpo_xml_judge_preset(tiny_model_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS))
    out = tmp_path / "xml"
    sets = [f"{k}={v}" for k, v in TINY.items()]
    summary = main(["--config", str(ROOT / "configs/rewards/xml_judge.yaml"), "--model", str(tiny_model_dir),
                    "--texts", str(corpus), "--out", str(out), "--steps", "2", "--device", "cpu", "--set", *sets])
    check_run(summary, out, "xml_judge_group_reward")
    # the seed's optimiser settings reached the trainer: constant LR after a linear warm-up of 10 steps
    assert summary["learning_rates"] == pytest.approx([0.0, 1e-7])
    assert not list(out.glob("checkpoints/checkpoint-*"))  # save_strategy "no": a smoke run leaves no checkpoints


def test_trl_grpo_multi_objective_preset(tiny_model_dir, tmp_path):
    from thinkj.rewards.designs.multi_objective import build_attribute_rows

    cfg = load_config(ROOT / "configs/rewards/multi_objective.yaml")
    hs2 = [{"prompt": f"Question {i}: name a colour.", "response": f"Colour {i} is blue.", "helpfulness": i % 5,
            "correctness": 3, "coherence": 4, "complexity": 0, "verbosity": 1} for i in range(2)]
    rows = rows_for_trl(build_attribute_rows(hs2))
    overrides = {**TINY, "gradient_accumulation_steps": 1}
    summary = run_grpo(cfg, str(tiny_model_dir), rows, tmp_path / "mo", steps=2, overrides=overrides, device="cpu")
    check_run(summary, tmp_path / "mo", "multi_objective_group_reward")
