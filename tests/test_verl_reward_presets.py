"""The seed presets through verl 0.9.1's own reward loop (``RewardLoopManager.compute_rm_score`` under ray):
a per-sample preset via ``thinkj.rewards.adapters.verl.compute_score`` and the naive manager, and the group-level XML
judge via ``thinkj.rewards.adapters.verl_group.GroupRewardManager``. One ray session for the module."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

XML_RIGHT = "<notes>\nSample A keeps the dates straight.\n</notes>\n<judgement>A</judgement>"


@pytest.fixture(scope="module")
def verl_env(tiny_model_dir):
    ray = pytest.importorskip("ray")
    import verl
    from hydra import compose, initialize_config_dir
    from transformers import AutoTokenizer

    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")

    def config(*overrides: str):
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return compose("ppo_trainer", overrides=[f"actor_rollout_ref.model.path={tiny_model_dir}",
                                                     "actor_rollout_ref.rollout.name=vllm", "reward.num_workers=1",
                                                     *overrides])

    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=os.environ.get("RAY_TMPDIR"))
    yield config, AutoTokenizer.from_pretrained(tiny_model_dir)
    ray.shutdown()


def make_batch(tok, texts, truths, uids):
    import torch
    from verl import DataProto

    def pad(seqs, left):
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), tok.pad_token_id or 0)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            span = slice(width - len(s), width) if left else slice(0, len(s))
            ids[i, span], mask[i, span] = torch.tensor(s), 1
        return ids, mask

    prompts, prompt_mask = pad([tok.encode(f"question {u}") for u in uids], left=True)
    responses, response_mask = pad([tok.encode(t) for t in texts], left=False)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
                 "attention_mask": torch.cat([prompt_mask, response_mask], 1)},
        non_tensors={"data_source": np.array(["seed"] * len(texts), dtype=object),
                     "reward_model": np.array([{"style": "rule", "ground_truth": g} for g in truths], dtype=object),
                     "extra_info": np.array([{"index": i} for i in range(len(texts))], dtype=object),
                     "uid": np.array(uids, dtype=object)})


def run(config, batch):
    import ray
    from verl.experimental.reward_loop import RewardLoopManager

    manager = RewardLoopManager(config)
    try:
        out = manager.compute_rm_score(batch)
    finally:
        for worker in manager.reward_loop_workers:
            ray.kill(worker)
    scores = out.batch["rm_scores"].sum(-1).tolist()
    return scores, {k: list(out.non_tensor_batch[k]) for k in out.meta_info["reward_extra_keys"]}


def test_group_xml_judge_through_verl_reward_loop(verl_env):
    from thinkj.rewards.adapters.trl_group import get_group_reward

    config, tok = verl_env
    cfg = config("actor_rollout_ref.rollout.n=3", "reward.reward_manager.source=importlib",
                 "reward.reward_manager.module.path=pkg://thinkj.rewards.adapters.verl_group",
                 "reward.reward_manager.name=GroupRewardManager",
                 "+reward.custom_reward_function.reward_kwargs.group_preset=xml_judge",
                 "+reward.custom_reward_function.reward_kwargs.w_fmt=0.3")
    texts = [XML_RIGHT, "<judgement>B</judgement>", "Sure. " + XML_RIGHT,  # group u1: 2 of 3 right
             XML_RIGHT.replace(">A<", ">B<"), XML_RIGHT, "no answer"]  # group u2 (gold b): 1 of 3 right
    truths = [{"label": "a", "strength": None}] * 3 + [{"label": "b", "strength": None}] * 3
    uids = ["u1"] * 3 + ["u2"] * 3
    scores, extra = run(cfg, make_batch(tok, texts, truths, uids))
    reward = get_group_reward("xml_judge")
    expected = reward.score("q", texts[:3], truths[:3], w_fmt=0.3) + reward.score("q", texts[3:], truths[3:], w_fmt=0.3)
    assert scores == pytest.approx([e["score"] for e in expected], abs=1e-6)
    assert extra["group_acc"] == pytest.approx([2 / 3] * 3 + [1 / 3] * 3)
    assert scores[0] > scores[2] > scores[1] == 0.0  # right+format > right, bad format > wrong
    assert set(extra) >= {"acc", "format", "length_bonus", "group_size", "group_skipped"}


def test_per_sample_preset_through_verl_reward_loop(verl_env):
    from thinkj.rewards import get_preset

    config, tok = verl_env
    cfg = config("reward.custom_reward_function.path=pkg://thinkj.rewards.adapters.verl",
                 "reward.custom_reward_function.name=compute_score",
                 "+reward.custom_reward_function.reward_kwargs.preset=multi_objective",
                 "+reward.custom_reward_function.reward_kwargs.failure_penalty=-1.0")
    texts = ["3 4 4 1 2", "The scores: 3 4 3 1 2", "3 4", ""]
    truths = [{"scores": [3, 4, 4, 1, 2]}] * 4
    scores, extra = run(cfg, make_batch(tok, texts, truths, ["a", "b", "c", "d"]))
    preset = get_preset("multi_objective")
    assert scores == pytest.approx([preset(t, g, failure_penalty=-1.0)["score"] for t, g in zip(texts, truths)], abs=1e-6)
    assert scores[0] == pytest.approx(1.1) and scores[2] == scores[3] == -1.0
    assert extra["structural_failure"] == [0.0, 0.0, 1.0, 1.0]


def test_reward_preset_configs_compose_with_verl(verl_env, tiny_model_dir):
    """Every configs/rewards/*.yaml verl override list composes on top of configs/verl/grpo.yaml, and the group
    reward manager starts from the result (verl's loader, our manager; no ray needed for construction)."""
    import yaml
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import load_reward_manager

    from thinkj.rewards.adapters.verl_group import GroupRewardManager

    _, tok = verl_env
    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "configs" / "rewards").glob("*.yaml"))
    assert len(files) >= 5
    with initialize_config_dir(config_dir=str(root / "configs" / "verl"), version_base=None):
        for path in files:
            spec = yaml.safe_load(path.read_text())
            cfg = compose("grpo", overrides=[f"actor_rollout_ref.model.path={tiny_model_dir}", *spec["verl"]])
            OmegaConf.resolve(cfg)
            manager = load_reward_manager(cfg, tok)
            if "group_preset" in (cfg.reward.custom_reward_function.get("reward_kwargs") or {}):
                assert isinstance(manager, GroupRewardManager), path.name
                assert manager.group_size == cfg.actor_rollout_ref.rollout.n == cfg.actor_rollout_ref.rollout.val_kwargs.n
            if path.name == "xml_judge.yaml":
                assert cfg.actor_rollout_ref.actor.grad_clip == 0.2 and cfg.actor_rollout_ref.actor.optim.clip_grad == 0.2
                assert spec["trl"]["lr_scheduler_type"] == "constant_with_warmup" and spec["trl"]["max_grad_norm"] == 0.2


def test_group_manager_scores_a_partial_group_after_the_wait(verl_env):
    """A group that never fills (e.g. a lost rollout) is scored after group_wait_s with the members it has."""
    import asyncio

    from thinkj.rewards.adapters.verl_group import GroupRewardManager

    config, tok = verl_env
    cfg = config("actor_rollout_ref.rollout.n=3", "+reward.custom_reward_function.reward_kwargs.group_wait_s=0.3")
    truths = [{"label": "a", "strength": None}] * 2
    batch = make_batch(tok, [XML_RIGHT, "<judgement>B</judgement>"], truths, ["u", "u"])

    async def score_both():
        manager = GroupRewardManager(cfg, tok)
        return await asyncio.gather(manager.run_single(batch[0:1]), manager.run_single(batch[1:2]))

    first, second = asyncio.run(score_both())
    assert first["reward_extra_info"]["group_size"] == 2 and first["reward_extra_info"]["group_acc"] == 0.5
    assert first["reward_score"] > 0 == second["reward_score"]
