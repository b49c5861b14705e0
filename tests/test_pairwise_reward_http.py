"""The ``thinkj_pairwise`` group reward against a real HTTP judge on 127.0.0.1 (tests/scripted_judge.py): requests per
scheme, the endpoint's concurrency limit, the (prompt, pair, order) cache, failure counting and the stop on a dead
judge; then through TRL's GRPOTrainer and verl's RewardLoopManager (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_judge import free_port, serve_judge

from thinkj.rewards.adapters.trl_group import TRLGroupReward, get_group_reward
from thinkj.rewards.designs.judge_http import JudgeUnavailableError
from thinkj.rewards.designs.pairwise_group import PAIRWISE_GROUP_KEYS, judge_calls

ROOT = Path(__file__).resolve().parent.parent
FAST = {"retries": 1, "backoff_s": 0.01, "timeout_s": 10}
A, B, C, D = "good good", "good", "bad", "good good good"


@pytest.fixture(scope="module")
def judge_server():
    with serve_judge() as served:
        yield served


def prompts_for(*groups):
    return [[{"role": "user", "content": f"Q{k}"}] for k, g in enumerate(groups) for _ in g]


def test_round_robin_over_http_through_the_trl_adapter(judge_server):
    judge, url = judge_server
    before = judge.requests
    reward = TRLGroupReward("thinkj_pairwise", base_url=url, **FAST)
    groups = [[A, B, C], [D, C, B, A]]
    scores = reward(prompts=prompts_for(*groups), completions=sum(groups, []), ground_truth=[None] * 7)
    assert scores == pytest.approx([1.0, 0.5, 0.0, 1.0, 0.0, 1 / 3, 2 / 3])
    assert judge.requests - before == judge_calls(3, "round_robin") + judge_calls(4, "round_robin") == 18
    m = reward.last_metrics
    assert m["judge_failure_rate"] == 0.0 and m["flip_rate"] == 0.0 and m["judge_latency_s"] > 0
    assert set(PAIRWISE_GROUP_KEYS) <= set(m)


def test_schemes_strength_and_bradley_terry_over_http(judge_server):
    _, url = judge_server
    reward = get_group_reward("thinkj_pairwise")
    out = reward.score("Q", [C, A, B, D], [None] * 4, base_url=url, scheme="knockout", **FAST)
    assert [r["score"] for r in out] == [0.0, 0.0, 0.5, 1.0] and out[0]["judge_calls"] == 6  # seeds C, B, D, A
    out = reward.score("Q", [A, C], [{"reference": B}] * 2, base_url=url, scheme="anchor", anchor="reference", **FAST)
    assert [r["score"] for r in out] == [1.0, 0.0] and out[0]["judge_calls"] == 4
    weighted = reward.score("Q", [A, B, C], [None] * 3, base_url=url, weight_strength=True, **FAST)
    assert weighted[0]["score"] == pytest.approx((0.5 + 0.5 / 3 + 1.0) / 2)
    bt = reward.score("Q", [A, B, C], [None] * 3, base_url=url, bradley_terry=True, **FAST)
    assert bt[0]["score"] > bt[1]["score"] > bt[2]["score"] and bt[0]["win_rate"] == 1.0


def test_flips_unparsed_answers_and_the_cache(judge_server, tmp_path):
    judge, url = judge_server
    reward = get_group_reward("thinkj_pairwise")
    out = reward.score("Q", ["BIAS one", "BIAS two"], [None] * 2, base_url=url, **FAST)
    assert [r["score"] for r in out] == [0.5, 0.5] and out[0]["flip_rate"] == 1.0
    out = reward.score("Q", ["GARBLE", B], [None] * 2, base_url=url, **FAST)
    assert out[0]["unparsed_rate"] == 1.0 and [r["score"] for r in out] == [0.5, 0.5]
    cache = str(tmp_path / "judge.sqlite")
    first = reward.score("Qc", [A, B, C], [None] * 3, base_url=url, cache_path=cache, **FAST)
    before = judge.requests
    again = reward.score("Qc", [A, B, C, D], [None] * 4, base_url=url, cache_path=cache, **FAST)
    # per (prompt, pair, order): the 6 ordered A/B/C comparisons come from the cache, only the D ones are sent
    assert judge.requests - before == 6 and again[0]["cache_hits"] == 6 and again[0]["judge_calls"] == 6
    assert [r["score"] for r in first] == [1.0, 0.5, 0.0]


def test_concurrency_limit_is_per_endpoint_across_groups(judge_server):
    judge, url = judge_server
    judge.max_in_flight = 0
    reward = TRLGroupReward("thinkj_pairwise", base_url=url, concurrency=2, **FAST)
    groups = [["SLOW good", "SLOW bad", "SLOW"], ["SLOW x", "SLOW good good"]]
    reward(prompts=prompts_for(*groups), completions=sum(groups, []), ground_truth=[None] * 5)
    assert judge.max_in_flight == 2  # 8 requests from two groups at once, never more than 2 in flight


def test_failures_counted_below_the_threshold_and_stop_above_it(judge_server):
    _, url = judge_server
    reward = get_group_reward("thinkj_pairwise")
    texts = [A, B, C, "FAIL"]  # 6 of the 12 requests fail (HTTP 400)
    fresh = {"base_url": url, "model": "judge-failing", **FAST}  # its own failure meter (keyed by url and model)
    out = reward.score("Qf", texts, [None] * 4, max_failure_rate=0.6, **fresh)
    assert out[0]["judge_failure_rate"] == 0.5 and out[3]["n_compared"] == 0 and out[3]["score"] == 0.5
    assert [r["score"] for r in out[:3]] == [1.0, 0.5, 0.0]
    with pytest.raises(JudgeUnavailableError, match=r"\d+ of the last \d+ requests failed"):
        TRLGroupReward("thinkj_pairwise", **fresh)(prompts=["Qg"] * 4, completions=texts, ground_truth=[None] * 4)


def test_dead_judge_stops_every_http_reward():
    dead = f"http://127.0.0.1:{free_port()}/v1"
    for name, extra in [("thinkj_pairwise", {}), ("thinkj_round_robin", {}), ("grm_listwise", {"n_iter": 2})]:
        reward = TRLGroupReward(name, base_url=dead, **FAST, **extra)
        with pytest.raises(JudgeUnavailableError, match=rf"judge at {dead} .*Is the judge server up"):
            reward(prompts=["Q"] * 2, completions=["one", "two"], ground_truth=[None] * 2)


ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
TINY = ["num_generations=2", "max_completion_length=8", "max_prompt_length=96", "gradient_accumulation_steps=1"]


def _rows(tmp_path: Path) -> Path:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"Say something good about {x}."}],
                                        "ground_truth": {"reference": "good"}}) + "\n" for x in ("tea", "rain")))
    return rows


@pytest.mark.slow
def test_trl_grpo_with_the_served_judge_logs_judge_metrics(judge_server, tiny_model_dir, tmp_path):
    from thinkj.online.trl_presets import main

    judge, url = judge_server
    before = judge.requests
    out = tmp_path / "run"
    summary = main(["--config", str(ROOT / "configs/rewards/thinkj_pairwise.yaml"), "--model", str(tiny_model_dir),
                    "--rows", str(_rows(tmp_path)), "--out", str(out), "--steps", "2", "--device", "cpu",
                    "--set", *TINY, "--reward-set", f"base_url={url}", "retries=1", "backoff_s=0.01"])
    assert summary["steps"] == 2 and summary["reward_fn"] == "thinkj_pairwise_group_reward"
    logged = summary["reward_metrics"]
    assert len(logged) == 2 and all(h["thinkj_pairwise_group_reward/judge_failure_rate"] == 0.0 for h in logged)
    assert all({"flip_rate", "judge_latency_s", "judge_calls"} <= {k.split("/")[-1] for k in h} for h in logged)
    assert 0 < judge.requests - before <= 2 * 2 * judge_calls(2, "round_robin")  # 2 steps x 2 groups of 2


@pytest.mark.slow
def test_trl_run_with_a_dead_judge_exits_with_one_clear_line(tiny_model_dir, tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    proc = subprocess.run([sys.executable, "-m", "thinkj.online.trl_presets", "--config",
                           str(ROOT / "configs/rewards/thinkj_pairwise.yaml"), "--model", str(tiny_model_dir), "--rows",
                           str(_rows(tmp_path)), "--out", str(tmp_path / "dead"), "--steps", "2", "--device", "cpu",
                           "--set", *TINY, "--reward-set", f"base_url={dead}", "retries=1", "backoff_s=0.01"],
                          capture_output=True, text=True, env=ENV, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: judge at {dead}") and "requests failed" in last
    assert not (tmp_path / "dead" / "model").exists()


@pytest.mark.slow
def test_verl_reward_loop_with_the_served_judge(judge_server, tiny_model_dir):
    """verl's RewardLoopManager (under ray) -> our GroupRewardManager -> thinkj_pairwise over HTTP; a dead judge
    fails the reward computation with the judge's error instead of returning zeros."""
    ray = pytest.importorskip("ray")
    import verl
    from hydra import compose, initialize_config_dir
    from test_verl_reward_presets import make_batch, run
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop import RewardLoopManager

    _, url = judge_server
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)

    def config(base_url: str, scheme: str):
        with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
            return compose("ppo_trainer", overrides=[
                f"actor_rollout_ref.model.path={tiny_model_dir}", "actor_rollout_ref.rollout.name=vllm",
                "reward.num_workers=1", "actor_rollout_ref.rollout.n=4", "reward.reward_manager.source=importlib",
                "reward.reward_manager.module.path=pkg://thinkj.rewards.adapters.verl_group",
                "reward.reward_manager.name=GroupRewardManager",
                "+reward.custom_reward_function.reward_kwargs.group_preset=thinkj_pairwise",
                f"+reward.custom_reward_function.reward_kwargs.scheme={scheme}",
                f"+reward.custom_reward_function.reward_kwargs.base_url={base_url}",
                "+reward.custom_reward_function.reward_kwargs.retries=1",
                "+reward.custom_reward_function.reward_kwargs.backoff_s=0.01"])

    texts = [C, A, B, D, A, B, C, B]
    batch = make_batch(tok, texts, [{"reference": B}] * 8, ["u1"] * 4 + ["u2"] * 4)
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=os.environ.get("RAY_TMPDIR"), ignore_reinit_error=True)
    try:
        scores, extra = run(config(url, "knockout"), batch)
        # the bracket is seeded in content order, so the rollouts' arrival order (which verl's concurrent reward
        # loop does not fix) does not matter. u1 = C, A, B, D: seeds C, B, D, A, so B beats C, D beats A, D beats B.
        # u2 = A, B, C, B: seeds C, B, B, A: one B beats C, A beats the other B, A beats the first B; which B is
        # which follows arrival, so the two B's are checked as a pair
        assert scores[:4] == [0.0, 0.0, 0.5, 1.0]
        assert (scores[4], scores[6], sorted([scores[5], scores[7]])) == (1.0, 0.0, [0.0, 0.5])
        asked = [calls + hits for calls, hits in zip(extra["judge_calls"], extra["cache_hits"])]
        assert set(asked[:4]) == {judge_calls(4, "knockout")} == {6} and max(asked[4:]) <= 6
        assert set(extra) >= {"judge_failure_rate", "flip_rate", "judge_latency_s", "judge_calls"}
        assert set(extra["judge_failure_rate"]) == {0.0}
        dead = f"http://127.0.0.1:{free_port()}/v1"
        manager = RewardLoopManager(config(dead, "round_robin"))
        try:
            with pytest.raises(Exception, match=rf"judge at {dead}"):
                manager.compute_rm_score(batch)
        finally:
            for worker in manager.reward_loop_workers:
                ray.kill(worker)
    finally:
        ray.shutdown()
