"""The reward settings of a verl run are checked on verl's own path (configs/verl/grpo.yaml composed with Hydra,
``verl.trainer.ppo.reward.load_reward_manager``, the manager's ``run_single``; no ray): a typo'd or NaN weight in
``reward_kwargs`` stops the group manager when it is built and the per-sample adapter at its first sample, and
a bad ground truth is a recorded data error (``gold_error``), never an exception."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest
from verl_batches import reward_batch  # tests/ is on sys.path

from thinkj.prompts import judge_output
from thinkj.rewards.adapters.verl import check_reward_kwargs
from thinkj.rewards.weights import RewardWeightError

ROOT = Path(__file__).resolve().parent.parent
KW = "reward.custom_reward_function.reward_kwargs"
GROUP = ["reward.num_workers=1", "reward.reward_manager.source=importlib",
         "reward.reward_manager.module.path=pkg://thinkj.rewards.adapters.verl_group",
         "reward.reward_manager.name=GroupRewardManager", "actor_rollout_ref.rollout.n=2"]


@pytest.fixture(scope="module")
def verl_config(tiny_model_dir):
    pytest.importorskip("verl")
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    def config(*overrides: str):
        with initialize_config_dir(config_dir=str(ROOT / "configs" / "verl"), version_base=None):
            cfg = compose("grpo", overrides=[f"actor_rollout_ref.model.path={tiny_model_dir}", *overrides])
        OmegaConf.resolve(cfg)
        return cfg

    return config, AutoTokenizer.from_pretrained(tiny_model_dir)


def score_all(cfg, tok, data):
    """verl's loader builds the manager (inside the loop, as verl's reward worker does); every sample is scored."""
    from verl.trainer.ppo.reward import load_reward_manager

    async def run():
        manager = load_reward_manager(cfg, tok)
        return await asyncio.gather(*(manager.run_single(data[i:i + 1]) for i in range(len(data))))

    return asyncio.run(run())


def test_a_typo_in_a_per_sample_weight_stops_verl_at_the_first_sample(verl_config):
    config, tok = verl_config
    cfg = config(f"++{KW}.w_strr=0.0")  # Table 8's w_str ablation, mistyped
    assert cfg.trainer.val_before_train  # the first sample is the validation before step 1: no update is made
    with pytest.raises(RewardWeightError) as err:
        score_all(cfg, tok, reward_batch(tok, [judge_output("t", "a", 2)], [{"label": "a", "strength": 2}]))
    assert str(err.value).startswith(f"{KW}.w_strr: reward preset 'thinkj_qwen' has no weight 'w_strr' "
                                     "(did you mean 'w_str'?)")
    with pytest.raises(RewardWeightError, match="w_strr"):  # the same check on the composed config, before a launch
        check_reward_kwargs(cfg.reward.custom_reward_function.reward_kwargs)
    with pytest.raises(RewardWeightError, match="w_str must be a finite number, got nan"):
        score_all(config(f"++{KW}.w_str=nan"), tok, reward_batch(tok, ["x"], ["a"]))
    good = config(f"++{KW}.w_str=0.0")
    check_reward_kwargs(good.reward.custom_reward_function.reward_kwargs)
    [out] = score_all(good, tok, reward_batch(tok, [judge_output("t", "a", 2)], [{"label": "a", "strength": 2}]))
    assert out["reward_score"] == 2.0


@pytest.mark.parametrize("override, says", [
    (f"++{KW}.w_fmtt=0.1", "has no weight 'w_fmtt' (did you mean 'w_fmt'?)"),
    (f"++{KW}.w_fmt=inf", "w_fmt must be a finite number"),
    (f"++{KW}.w_fmt=-0.2", "w_fmt must be >= 0"),
    (f"++{KW}.w_fmt=abc", "w_fmt must be a number, got 'abc'"),
    (f"++{KW}.group_size=two", "group_size must be a number"),
])
def test_a_bad_group_setting_stops_verl_when_the_manager_is_built(verl_config, override, says):
    from verl.trainer.ppo.reward import load_reward_manager

    config, tok = verl_config
    cfg = config(*GROUP, f"++{KW}.group_preset=xml_judge", override)
    with pytest.raises(RewardWeightError) as err:
        load_reward_manager(cfg, tok)
    assert says in str(err.value) and "\n" not in str(err.value)


BAD_GOLDS = [{"label": "a", "strength": float("inf")}, {"label": "a", "strength": float("nan")},
             {"label": "a", "strength": 2.7}, {"label": "a", "strength": 7}, {"label": "a", "strength": True},
             {"label": "a", "strength": "2"}, {"label": "c"}, {"strength": 2}, None, "garbage"]


def test_bad_ground_truths_through_verl_managers(verl_config):
    config, tok = verl_config
    texts = [judge_output("t", "a", 2)] * len(BAD_GOLDS)
    outs = score_all(config(f"++{KW}.preset=thinkj_qwen"), tok, reward_batch(tok, texts, BAD_GOLDS))
    assert [o["reward_extra_info"]["gold_error"] for o in outs] == [1.0] * len(BAD_GOLDS)
    assert all(math.isfinite(o["reward_score"]) for o in outs)
    assert len({tuple(o["reward_extra_info"]) for o in outs}) == 1  # the same keys: verl can stack them
    xml = "<notes>n</notes><judgement>A</judgement>"
    cfg = config(*GROUP, f"++{KW}.group_preset=xml_judge", "actor_rollout_ref.rollout.n=2")
    outs = score_all(cfg, tok, reward_batch(tok, [xml, xml], [{"label": "c"}, {"label": "a"}]))
    assert [o["reward_extra_info"]["gold_error"] for o in outs] == [1.0, 0.0]
    assert outs[0]["reward_score"] == 0.0 < outs[1]["reward_score"]
