"""Judge-as-reward presets against a real HTTP server on 127.0.0.1: a scripted OpenAI-compatible judge (the
tests are about aggregation: dropped passes, retries, score map, both orders, round robin), through the TRL
adapter and through verl's own reward managers (run in-process, without ray)."""

from __future__ import annotations

import asyncio
import itertools
import re
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from thinkj.rewards.adapters.trl_group import TRLGroupReward, get_group_reward
from thinkj.rewards.designs.grm import listwise_messages, map_score, parse_listwise_scores
from thinkj.rewards.designs.judge_http import JudgeUnavailableError
from thinkj.rewards.designs.pairwise_rm import PAIRWISE_KEYS, REFERENCE_KEYS, reference_score, signed_preference

_GRM_BLOCK = re.compile(r"\[Response (\d+)\]\n(.*?)\n\[End of Response \1\]", re.DOTALL)
_PAIR_BLOCK = re.compile(r"\[Response \(([ab])\)\]\n(.*?)\n\[End of Response \(\1\)\]", re.DOTALL)


def merit(text: str) -> int:
    return text.count("good") - text.count("bad")


class ScriptedJudge:
    """GRM prompts: pass k (the request's seed) 0 = wrong count, 1 = a score of 11, 2 = HTTP 500 on the first try;
    valid passes give good -> 8 + k % 2, bad -> 2, else 5; a conversation saying POSBIAS gets reply k scored k.
    Pairwise prompts: the side with more merit wins with strength |difference| (1-3); a draw always goes to (a), a
    position bias that both orders must cancel."""

    def __init__(self):
        self.requests = 0
        self.failed_once: set[str] = set()

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        body = await request.json()
        content = body["messages"][-1]["content"]
        seed = int(body.get("seed") or 0)
        if "#### Replies ####" in content:
            replies = [r for _, r in _GRM_BLOCK.findall(content)]
            if seed == 2 and content not in self.failed_once:
                self.failed_once.add(content)
                return web.Response(status=500, text="overloaded")
            scores = [8 + seed % 2 if "good" in r else 2 if "bad" in r else 5 for r in replies]
            if "POSBIAS" in content:  # a judge that scores by position alone: reply k gets k
                scores = list(range(1, len(replies) + 1))
            elif seed == 0:
                scores = scores[:-1]
            elif seed == 1:
                scores[0] = 11
            answer = f"Analysis: compared.\nScores: \\boxed{{{', '.join(map(str, scores))}}}"
        else:
            sides = dict(_PAIR_BLOCK.findall(content))
            diff = merit(sides.get("a", "")) - merit(sides.get("b", ""))
            choice = "a" if diff >= 0 else "b"
            answer = (f"<think>\nweighing both\n</think>\nTherefore, Response ({choice}) is better, and the preference "
                      f"strength is [[{min(3, max(1, abs(diff)))}]].")
        return web.json_response({"id": "x", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                               "finish_reason": "stop"}]})


@pytest.fixture(scope="module")
def judge_server():
    judge = ScriptedJudge()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", judge.handle)
    runner = web.AppRunner(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield judge, f"http://127.0.0.1:{port}/v1"
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


FAST = {"retries": 2, "backoff_s": 0.01, "timeout_s": 10}


def test_score_map_and_parser_table():
    assert [map_score(s) for s in (0, 0.5, 1, 5, 5.5, 10, 12, -3)] == pytest.approx([0, -0.9, -0.8, 0, 0.2, 2, 2, 0])
    assert parse_listwise_scores("blah\nScores: \\boxed{7, 3.5, 10}") == [7, 3.5, 10]
    assert parse_listwise_scores("**boxed**: {1,2}") == [1, 2]
    assert parse_listwise_scores("Final score line: 4 and 6\nthanks") == [4, 6]
    assert parse_listwise_scores("no digits") == [] and parse_listwise_scores(None) == []
    assert "exactly 3" in listwise_messages("q", ["a", "b", "c"])[0]["content"]


JUDGE_BITS = st.sampled_from(["\\boxed{", "}", "7", "11", "-2", ",", "score", "\n", "<think>", "</think>",
                              "Therefore, Response (a) is better", "Response (b) is better", "[[2]]", "[[9]]", " "])


@settings(max_examples=150, deadline=None)
@given(text=st.one_of(st.none(), st.text(max_size=200), st.lists(JUDGE_BITS, max_size=30).map("".join)),
       raw=st.floats(allow_nan=False, allow_infinity=False))
def test_judge_parsers_never_raise_and_stay_in_bounds(text, raw):
    for score in parse_listwise_scores(text):
        assert -1.0 <= map_score(score) <= 2.0
    assert -1.0 <= map_score(raw) <= 2.0
    p, win, ok = signed_preference(text, "judge_strength_v2")
    assert -1.0 <= p <= 1.0 and win in (0.0, 1.0) and (ok or p == 0.0)


def test_grm_listwise_drops_bad_passes_retries_and_maps(judge_server):
    judge, url = judge_server
    before = judge.requests
    reward = TRLGroupReward("grm_listwise", base_url=url, model="judge", n_iter=6, **FAST)
    prompts = [[{"role": "user", "content": "Q1"}]] * 3 + [[{"role": "user", "content": "Q2"}]] * 2
    completions = ["a good reply", "a bad reply", "meh", "good", "good too"]
    scores = reward(prompts=prompts, completions=completions, ground_truth=[None] * 5)
    # passes 0 (wrong count) and 1 (out of range) dropped; 2..5 valid -> good = mean(8, 9, 8, 9) = 8.5
    assert scores == pytest.approx([map_score(8.5), map_score(2), map_score(5), map_score(8.5), map_score(8.5)])
    assert scores[:3] == pytest.approx([1.4, -0.6, 0.0])
    assert reward.last_metrics["n_valid_passes"] == 4 and reward.last_metrics["judge_failure_rate"] == 0.0
    assert judge.requests - before == 2 * (6 + 1)  # two groups, six passes each, one retried after HTTP 500


def test_grm_rewards_do_not_follow_the_order_the_group_arrives_in(judge_server):
    """verl hands a group's rollouts over as they finish; a judge that scores by position must not make that order
    the reward: the replies are listed in content order, so every arrival order gives each text the same reward."""
    _, url = judge_server
    grm = get_group_reward("grm_listwise")
    texts = ["first text", "second text", "third text", "fourth text"]

    def rewards(order):
        out = grm.score("POSBIAS", order, [None] * len(order), base_url=url, n_iter=1, **FAST)
        return {t: r["score"] for t, r in zip(order, out)}

    base = rewards(texts)
    assert sorted(base.values()) == pytest.approx([map_score(k) for k in (1, 2, 3, 4)])  # the bias is there to follow
    assert all(rewards([texts[i] for i in perm]) == base for perm in itertools.permutations(range(4)))


def test_grm_answer_tag_and_unreachable_server(judge_server):
    judge, url = judge_server
    grm = get_group_reward("grm_listwise")
    before = judge.requests
    out = grm.score("Q", ["no tags here", "none"], [None, None], base_url=url, answer_tag="answer", n_iter=2, **FAST)
    assert [r["score"] for r in out] == [0.0, 0.0] and judge.requests == before  # the seed's no-answer rule
    out = grm.score("Q", ["<answer>good</answer>", "rambling"], [None, None], base_url=url, answer_tag="answer",
                    n_iter=3, **FAST)
    assert [r["answer_found"] for r in out] == [1.0, 0.0] and out[0]["score"] > 0 == out[1]["score"]  # "I do not know": 5
    # a judge that cannot be reached stops the reward with a clear error, never a silent 0.0 for every sample
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(JudgeUnavailableError, match=r"judge at http://127\.0\.0\.1:\d+/v1 .*2 of the last 2 requests"):
        grm.score("Q", ["good", "bad"], [None, None], base_url=dead, n_iter=2, retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(JudgeUnavailableError, match="max_failure_rate"):
        get_group_reward("thinkj_round_robin").score("Q", ["good", "bad"], [None] * 2, base_url=dead, retries=0)
    # with the stop switched off the failures are still counted and reported, not hidden
    out = grm.score("Q", ["good", "bad"], [None, None], base_url=dead, n_iter=2, retries=0, max_failure_rate=1.0)
    assert [(r["score"], r["n_valid_passes"], r["judge_failure_rate"]) for r in out] == [(0.0, 0, 1.0)] * 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_round_robin_both_orders(judge_server):
    _, url = judge_server
    rr = get_group_reward("thinkj_round_robin")
    out = rr.score([{"role": "user", "content": "Q"}], ["good good", "good", "bad"], [None] * 3, base_url=url, **FAST)
    assert [r["score"] for r in out] == pytest.approx([(2 / 3 + 2) / 4, (2 / 3) / 4, -(2 + 4 / 3) / 4])
    assert [r["win_rate"] for r in out] == [1.0, 0.5, 0.0] and {r["consistency"] for r in out} == {1.0}
    assert all(tuple(r)[:7] == PAIRWISE_KEYS and r["n_judgments"] == 4 == r["n_parsed"] for r in out)
    assert {r["judge_failure_rate"] for r in out} == {0.0} and all(r["judge_latency_s"] > 0 for r in out)
    # equal candidates: the judge's position bias gives each order to (a); both orders cancel it
    out = rr.score("Q", ["same", "same"], [None] * 2, base_url=url, **FAST)
    assert [(r["score"], r["consistency"]) for r in out] == [(0.0, 0.0), (0.0, 0.0)]
    assert rr.score("Q", ["alone"], [None], base_url=url, **FAST)[0]["score"] == 0.0


def test_reference_mode(judge_server):
    _, url = judge_server
    better = asyncio.run(reference_score("Q", "good good", {"reference": "good"}, base_url=url, **FAST))
    worse = asyncio.run(reference_score("Q", "bad", {"reference": "good"}, base_url=url, **FAST))
    assert better["score"] == pytest.approx(1 / 3) and worse["score"] == pytest.approx(-2 / 3)
    assert better["consistency"] == worse["consistency"] == 1.0
    missing = asyncio.run(reference_score("Q", "x", {"label": "a"}, base_url=url, **FAST))  # a data error, no request
    assert missing["gold_error"] == 1.0 and missing["score"] == 0.0 and missing["n_judgments"] == 0


@pytest.mark.slow
def test_through_verl_reward_managers(judge_server, tiny_model_dir):
    """verl's NaiveRewardManager awaiting our async compute_score, and our GroupRewardManager with the GRM."""
    import torch
    import verl
    from hydra import compose, initialize_config_dir
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from thinkj.rewards.adapters.verl_group import GroupRewardManager

    _, url = judge_server
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        def cfg(*extra):
            return compose("ppo_trainer", overrides=[f"actor_rollout_ref.model.path={tiny_model_dir}",
                                                     "actor_rollout_ref.rollout.name=vllm", *extra])
        ref_cfg = cfg("reward.custom_reward_function.path=pkg://thinkj.rewards.adapters.verl_reference",
                      f"+reward.custom_reward_function.reward_kwargs.base_url={url}",
                      "+reward.custom_reward_function.reward_kwargs.backoff_s=0.01")
        split_cfg = cfg("+reward.custom_reward_function.reward_kwargs.group_preset=grm_listwise")  # 8 workers
        grm_cfg = cfg("actor_rollout_ref.rollout.n=2", "reward.num_workers=1",
                      "+reward.custom_reward_function.reward_kwargs.group_preset=grm_listwise",
                      f"+reward.custom_reward_function.reward_kwargs.base_url={url}",
                      "+reward.custom_reward_function.reward_kwargs.n_iter=4",
                      "+reward.custom_reward_function.reward_kwargs.backoff_s=0.01")

    def item(text, truth, uid, extra):
        prompt, response = tok.encode("question"), tok.encode(text)
        return DataProto.from_dict(
            tensors={"prompts": torch.tensor([prompt]), "responses": torch.tensor([response]),
                     "attention_mask": torch.ones(1, len(prompt) + len(response), dtype=torch.long)},
            non_tensors={"data_source": np.array(["s"], dtype=object),
                         "reward_model": np.array([{"ground_truth": truth}], dtype=object),
                         "extra_info": np.array([extra], dtype=object), "uid": np.array([uid], dtype=object)})

    async def run_all():
        naive = NaiveRewardManager(ref_cfg, tok, get_custom_reward_fn(ref_cfg))
        assert naive.is_async_reward_score  # verl awaits our coroutine instead of using a thread
        ref = await naive.run_single(item("good good", {"reference": "good"}, "r", {"prompt": "Q"}))
        group = GroupRewardManager(grm_cfg, tok)
        outs = await asyncio.gather(*(group.run_single(item(t, None, "g", {})) for t in ("good one", "bad one")))
        return ref, outs

    with pytest.raises(ValueError, match="num_workers=1"):
        GroupRewardManager(split_cfg, tok)
    ref, outs = asyncio.run(run_all())
    assert ref["reward_score"] == pytest.approx(1 / 3) and set(ref["reward_extra_info"]) == set(REFERENCE_KEYS)
    # passes 0 and 1 dropped, 2 and 3 valid: good = mean(8, 9) = 8.5
    assert [o["reward_score"] for o in outs] == pytest.approx([map_score(8.5), map_score(2)])
    assert {o["reward_extra_info"]["group_size"] for o in outs} == {2}
