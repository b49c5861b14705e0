"""Both orders of a comparison in one step, on hand-worked cases: the consistency term, the union grouping through
verl's own advantage code, the twin reward manager through verl's reward-manager loader, the twin data layout
and samplers, the position diagnostics, and the refusals of w_con where no twin is in sight."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
import torch
from verl_batches import reward_batch  # tests/ is on sys.path

from thinkj.errors import ThinkJError
from thinkj.online.verl_launch import CONFIG_DIR, LaunchError, VerlLaunch, build_command, check_rl_parquet
from thinkj.prompts import judge_output
from thinkj.rewards.designs.twins import consistency_terms, gold_balance, group_keys, position_stats
from thinkj.rewards.weights import RewardWeightError
from thinkj.synthetic.fruit_task import make_pairs

A, B = judge_output("reasons", "a", 2), judge_output("reasons", "b", 2)
# one comparison, two rollouts per order; in order 0 the gold is (a), in order 1 (its twin) the gold is (b)
TWINS, ORDERS, GOLDS = ["t"] * 4, [0, 0, 1, 1], ["a", "a", "b", "b"]


def test_a_position_constant_group_earns_no_consistency_reward():
    terms = consistency_terms(["a", "a", "a", "a"], GOLDS, TWINS, ORDERS)
    assert [t["consistency"] for t in terms] == [0.0, 0.0, 0.0, 0.0]  # right in order 0 only: never both
    assert [t["twin_missing"] for t in terms] == [0.0] * 4


def test_a_consistent_right_pair_earns_it_and_a_mixed_group_earns_the_share_of_right_twins():
    assert [t["consistency"] for t in consistency_terms(["a", "a", "b", "b"], GOLDS, TWINS, ORDERS)] == [1.0] * 4
    # order 0: one right, one wrong; order 1: both right -> a right rollout earns the twin group's right share
    terms = consistency_terms(["a", "b", "b", "b"], GOLDS, TWINS, ORDERS)
    assert [t["consistency"] for t in terms] == [1.0, 0.0, 0.5, 0.5]
    # unparsed verdicts are never right; a rollout without its twin order in the step earns 0 and is counted
    assert [t["consistency"] for t in consistency_terms(["a", "", "b", None], GOLDS, TWINS, ORDERS)] == [0.5, 0, 0.5, 0]
    alone = consistency_terms(["a", "a"], ["a", "a"], ["t", "t"], [0, 0])
    assert alone == [{"consistency": 0.0, "twin_missing": 1.0}] * 2
    assert group_keys(TWINS, ORDERS, "union") == ["t"] * 4
    assert group_keys(TWINS, ORDERS, "step") == ["t#0", "t#0", "t#1", "t#1"]


def test_position_diagnostics_on_hand_worked_rollouts():
    stats = position_stats(["a", "a", "a", "b"], GOLDS, TWINS, ORDERS)
    assert stats["pos/a_share"] == 0.75 and stats["pos/gold_a_share"] == 0.5
    assert stats["pos/acc_gold_a"] == 1.0 and stats["pos/acc_gold_b"] == 0.5
    # cross-order pairs (2 x 2 = 4): (a, a) twice name the same position (a flip), (a, b) twice do not
    assert stats["pos/flip_rate"] == 0.5
    assert position_stats(["a"] * 4, GOLDS, TWINS, ORDERS)["pos/flip_rate"] == 1.0  # position-constant
    assert position_stats(["a", "a", "b", "b"], GOLDS, TWINS, ORDERS)["pos/flip_rate"] == 0.0  # consistent
    plain = position_stats(["a", "b"], ["a", "a"])
    assert "pos/flip_rate" not in plain and "pos/acc_gold_b" not in plain and plain["pos/acc_gold_a"] == 0.5


def test_gold_balance_warns_beyond_five_points(capsys):
    assert gold_balance(["a"] * 55 + ["b"] * 45) == 0.55
    assert capsys.readouterr().err == ""
    assert gold_balance(["a"] * 56 + ["b"] * 44 + ["tie"], where="x.parquet") == 0.56
    err = capsys.readouterr().err
    assert err.startswith("warning: x.parquet: gold is (a) in 56.0 % of 100 comparisons") and err.count("\n") == 1


# ------------------------------------------------------------------------------------ verl's advantage computation
def _advantages(rewards: list[float], uids: list[str], twins: list[str], estimator: str) -> list[float]:
    """verl's trainer-level compute_advantage (with the thinkj hook installed) on one-token responses."""
    from verl import DataProto
    from verl.trainer.ppo import ray_trainer

    from thinkj.online import verl_hooks

    verl_hooks.install(ray_trainer)
    n = len(rewards)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": torch.tensor(rewards, dtype=torch.float32)[:, None],
                 "response_mask": torch.ones((n, 1), dtype=torch.float32)},
        non_tensors={"uid": np.array(uids, dtype=object),
                     "extra_info": np.array([{"twin": t, "order": i % 2} for i, t in enumerate(twins)], dtype=object)})
    out = ray_trainer.compute_advantage(data, adv_estimator=estimator, num_repeat=2, norm_adv_by_std_in_grpo=True,
                                        config=None)
    return out.batch["advantages"][:, 0].tolist()


def test_union_grouping_gives_a_position_constant_group_no_net_advantage_through_verls_code():
    uids = ["p0", "p0", "p1", "p1"]  # verl's per-prompt groups: one per order
    # Think-J reward (w_acc = w_fmt = 1) of a judge answering "(a)" in both orders: right in order 0, wrong in order 1
    rewards = [2.0, 2.0, 1.0, 1.0]
    assert _advantages(rewards, uids, TWINS, "grpo") == [0.0] * 4  # per order: uniform sub-groups, no signal at all
    union = _advantages(rewards, uids, TWINS, "grpo_twin")
    # over the union: mean 1.5, sample std 0.577 -> +-0.866; the four "(a)" verdicts' advantages sum to zero
    assert union == pytest.approx([0.866, 0.866, -0.866, -0.866], abs=1e-3)
    assert sum(union) == pytest.approx(0.0, abs=1e-6)
    # with the consistency term alone as the reward, the position-constant group earns 0 everywhere: zero advantage
    con = [t["consistency"] for t in consistency_terms(["a"] * 4, GOLDS, TWINS, ORDERS)]
    assert _advantages(con, uids, TWINS, "grpo_twin") == [0.0] * 4
    # two comparisons in one batch stay apart: each is its own union group
    two = _advantages(rewards + [1.0, 1.0, 1.0, 1.0], uids + ["p2", "p2", "p3", "p3"], TWINS + ["u"] * 4, "grpo_twin")
    assert two[:4] == pytest.approx(union) and two[4:] == [0.0] * 4


def test_union_estimator_without_twin_keys_stops_instead_of_grouping_by_uid():
    from verl.trainer.ppo import core_algos

    import thinkj.online.verl_hooks  # noqa: F401 -- registers the estimator

    fn = core_algos.get_adv_estimator_fn("grpo_twin")
    with pytest.raises(RuntimeError, match="needs the twin keys"):
        fn(token_level_rewards=torch.zeros(2, 1), response_mask=torch.ones(2, 1), index=np.array(["u", "u"]))
    from verl import DataProto
    from verl.trainer.ppo import ray_trainer

    from thinkj.online import verl_hooks

    verl_hooks.install(ray_trainer)
    data = DataProto.from_dict(tensors={"token_level_rewards": torch.zeros(2, 1), "response_mask": torch.ones(2, 1)},
                               non_tensors={"uid": np.array(["u", "u"], dtype=object),
                                            "extra_info": np.array([{"index": 0}, {"index": 1}], dtype=object)})
    with pytest.raises(ValueError, match="batch row 0 has no extra_info.twin"):
        ray_trainer.compute_advantage(data, adv_estimator="grpo_twin")


def test_position_metrics_join_verls_step_metrics():
    from verl import DataProto
    from verl.trainer.ppo import ray_trainer

    from thinkj.online import verl_hooks

    verl_hooks.install(ray_trainer)
    assert ray_trainer.compute_data_metrics.__module__ == "thinkj.online.verl_hooks"
    stats = verl_hooks.batch_position_stats({
        "pred": np.array(["a", "a", "a", "b"], dtype=object),
        "reward_model": np.array([{"ground_truth": {"label": g, "strength": 2}} for g in GOLDS], dtype=object),
        "extra_info": np.array([{"twin": "t", "order": o} for o in ORDERS], dtype=object)})
    assert stats == position_stats(["a", "a", "a", "b"], GOLDS, TWINS, ORDERS)
    assert verl_hooks.batch_position_stats({"uid": np.array(["u"])}) == {}  # a reward without verdicts adds nothing
    del DataProto


# ------------------------------------------------------------------------------------------ the twin reward manager
@pytest.fixture(scope="module")
def consistent_config(tiny_model_dir):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    def config(*overrides: str):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
            cfg = compose("grpo_consistent", overrides=[f"actor_rollout_ref.model.path={tiny_model_dir}",
                                                        "actor_rollout_ref.rollout.n=2", *overrides])
        OmegaConf.resolve(cfg)
        return cfg

    return config, AutoTokenizer.from_pretrained(tiny_model_dir)


def _batch(tok, texts, golds, twins, orders):
    return reward_batch(tok, texts, [{"label": g, "strength": 2} for g in golds],
                        [{"index": i, "twin": t, "order": o} for i, (t, o) in enumerate(zip(twins, orders))],
                        [f"u{t}{o}" for t, o in zip(twins, orders)])


def _score(cfg, tok, data):
    from verl.trainer.ppo.reward import load_reward_manager

    async def run():
        manager = load_reward_manager(cfg, tok)  # verl's own loader, as its reward worker builds it
        return await asyncio.gather(*(manager.run_single(data[i:i + 1]) for i in range(len(data))))

    return asyncio.run(run())


def test_twin_manager_pays_consistency_only_to_a_pair_right_in_both_orders(consistent_config):
    config, tok = consistent_config
    cfg = config()
    assert cfg.reward.reward_manager.name == "TwinRewardManager" and cfg.algorithm.adv_estimator == "grpo_twin"
    # two comparisons, arriving interleaved: "pc" answered (a) in both orders, "ok" right in both orders
    texts = [A, A, A, B, A, A, B, B]
    twins = ["pc", "ok", "pc", "ok", "pc", "ok", "pc", "ok"]
    orders = [0, 0, 0, 0, 1, 1, 1, 1]
    golds = ["a", "a", "a", "a", "b", "b", "b", "b"]
    out = _score(cfg, tok, _batch(tok, texts, golds, twins, orders))
    info = [o["reward_extra_info"] for o in out]
    assert [i["twin_size"] for i in info] == [4.0] * 8
    # "pc": order 0 right (acc 1), order 1 rollouts: one (a) wrong, one (b) right -> order 0's share 0.5
    # "ok": order 0: (a) right, (b) wrong; order 1: (a) wrong, (b) right
    assert [i["consistency"] for i in info] == [0.5, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0, 0.5]
    base = [i["acc"] + i["format"] + 0.2 * i["strength"] for i in info]
    assert [o["reward_score"] for o in out] == pytest.approx([b + 1.0 * i["consistency"] for b, i in zip(base, info)])
    # a position-constant comparison: nothing for consistency
    out = _score(cfg, tok, _batch(tok, [A] * 4, ["a", "a", "b", "b"], ["z"] * 4, [0, 0, 1, 1]))
    assert [o["reward_extra_info"]["consistency"] for o in out] == [0.0] * 4
    assert [o["reward_score"] for o in out] == pytest.approx([2.2, 2.2, 1.0, 1.0])


def test_twin_manager_refuses_what_would_hang_or_mislead(consistent_config):
    config, tok = consistent_config
    data = _batch(tok, [A, B], ["a", "b"], ["t", "t"], [0, 1])
    with pytest.raises(ValueError, match=r"val_kwargs.n = rollout.n \(2\), got 1"):
        _score(config("actor_rollout_ref.rollout.val_kwargs.n=1"), tok, data)
    with pytest.raises(RewardWeightError, match="w_con must be >= 0"):
        _score(config("++reward.custom_reward_function.reward_kwargs.w_con=-1"), tok, data)
    with pytest.raises(ValueError, match="extra_info has no twin key"):
        plain = _batch(tok, [A], ["a"], ["t"], [0])
        plain.non_tensor_batch["extra_info"] = np.array([{"index": 0}], dtype=object)
        _score(config(), tok, plain)


def test_consistent_config_is_grpo_plus_the_stated_diff():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    def flat(node, prefix=""):
        if isinstance(node, dict):
            return {k: v for key, value in node.items() for k, v in flat(value, f"{prefix}{key}.").items()}
        return {prefix[:-1]: node}

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        plain, twin = (flat(OmegaConf.to_container(compose(name, overrides=["actor_rollout_ref.model.path=m"]),
                                                   resolve=True)) for name in ("grpo", "grpo_consistent"))
    changed = {k for k in plain.keys() | twin.keys() if plain.get(k) != twin.get(k)}
    assert changed == {"algorithm.adv_estimator", "data.shuffle", "actor_rollout_ref.rollout.val_kwargs.n",
                       "reward.num_workers", "reward.reward_manager.source", "reward.reward_manager.name",
                       "reward.reward_manager.module.path", "reward.custom_reward_function.reward_kwargs.w_con",
                       "trainer.experiment_name", "trainer.default_local_dir",
                       "actor_rollout_ref.rollout.trace.experiment_name"}
    assert twin["algorithm.adv_estimator"] == "grpo_twin" and twin["reward.custom_reward_function.reward_kwargs.w_con"] == 1
    assert plain["actor_rollout_ref.model.external_lib"] == "thinkj.online.verl_hooks"  # diagnostics in every run


# ----------------------------------------------------------------------------------------- data layout and samplers
def test_twin_parquet_keeps_both_orders_side_by_side_and_balanced(tmp_path, capsys):
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from thinkj.data.cli import app
    from thinkj.records import write_jsonl

    pairs = [p for p in make_pairs(30, seed=5) if p.label != "tie"]
    skewed = [p if p.label == "a" else p.swapped() for p in pairs]  # every gold (a): a judge could learn "(a)"
    write_jsonl(tmp_path / "pairs.jsonl", skewed)
    result = CliRunner().invoke(app, ["verl-parquet", str(tmp_path / "pairs.jsonl"), str(tmp_path / "plain.parquet")])
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "gold is (a) in 100.0 %" in result.output  # stderr is mixed in
    result = CliRunner().invoke(app, ["verl-parquet", str(tmp_path / "pairs.jsonl"), str(tmp_path / "twins.parquet"),
                                      "--twins", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["gold_a_share"] == 0.5
    rows = pq.read_table(tmp_path / "twins.parquet").to_pylist()
    assert len(rows) == 2 * len(pairs)
    for first, second in zip(rows[::2], rows[1::2]):
        assert first["extra_info"]["twin"] == second["extra_info"]["twin"]
        assert (first["extra_info"]["order"], second["extra_info"]["order"]) == (0, 1)
        assert {first["reward_model"]["ground_truth"]["label"], second["reward_model"]["ground_truth"]["label"]} == {"a", "b"}
        assert first["prompt"] != second["prompt"]
    assert [r["extra_info"]["id"] for r in rows[::2]] != [p.id for p in pairs]  # comparisons shuffled by pair
    # the launch check: the twin parquet passes, the plain one is refused for the consistent config
    check_rl_parquet("--data", str(tmp_path / "twins.parquet"), twins=True)
    with pytest.raises(LaunchError, match="rows 1 and 2 are not the two orders of one comparison"):
        check_rl_parquet("--data", str(tmp_path / "plain.parquet"), twins=True)


def test_trl_twin_rows_and_sampler_keep_both_orders_in_one_generation_batch(tmp_path):
    from thinkj.online.trl_grpo import TwinSampler, load_rl_rows
    from thinkj.records import write_jsonl

    write_jsonl(tmp_path / "p.jsonl", [p for p in make_pairs(12, seed=6) if p.label != "tie"][:6])
    rows, _ = load_rl_rows(tmp_path / "p.jsonl", twins=True, seed=1)
    assert len(rows) == 12 and [r["order"] for r in rows] == [0, 1] * 6
    assert all(a["twin"] == b["twin"] and a["label"] != b["label"] for a, b in zip(rows[::2], rows[1::2]))
    sampler = TwinSampler(len(rows), per_order=2, pairs_per_batch=2, repeat_count=1, seed=0)
    order = list(sampler)
    assert len(order) == len(sampler) == 24
    for start in range(0, 24, 8):  # a generation batch: 2 comparisons x 2 orders x 2 rollouts
        batch = order[start:start + 8]
        for block in (batch[:4], batch[4:]):  # one comparison: order 0 twice, then order 1 twice
            first = block[0]
            assert first % 2 == 0 and block == [first, first, first + 1, first + 1]
    assert sorted(set(order)) == list(range(12))
    # the plain rows are unchanged (no twin columns)
    plain, _ = load_rl_rows(tmp_path / "p.jsonl")
    assert set(plain[0]) == {"prompt", "label", "strength"}


# ---------------------------------------------------------------------------------- w_con needs twins, everywhere
def test_w_con_is_a_validated_weight_refused_where_no_twin_is_seen(tmp_path):
    from thinkj.online.trl_grpo import check_weights_with_twins
    from thinkj.rewards import get_preset
    from thinkj.rewards.adapters.trl import TRLReward
    from thinkj.rewards.adapters.verl import compute_score

    for name in ("thinkj_qwen", "thinkj_llama", "thinkj_subtractive"):
        assert get_preset(name).defaults["w_con"] == 0.0  # the paper's reward is unchanged by default
    with pytest.raises(RewardWeightError, match="w_con must be a finite number"):
        get_preset("thinkj_qwen").weights({"w_con": float("nan")})
    with pytest.raises(RewardWeightError, match="w_con=1 .*needs both orders"):
        compute_score(solution_str=A, ground_truth={"label": "a", "strength": 2}, preset="thinkj_qwen", w_con=1.0)
    assert compute_score(solution_str=A, ground_truth={"label": "a", "strength": 2}, preset="thinkj_qwen",
                         w_con=0.0)["score"] == pytest.approx(2.2)
    with pytest.raises(ThinkJError, match="needs both orders"):
        TRLReward("thinkj_qwen", w_con=0.5)
    with pytest.raises(ThinkJError, match="needs both orders"):
        check_weights_with_twins("thinkj_qwen", {"w_con": 0.5})
    check_weights_with_twins("thinkj_qwen", {"w_con": 0.5}, "union")
    with pytest.raises(ThinkJError, match="--twins 'both'"):
        check_weights_with_twins("thinkj_qwen", {}, "both")
    spec = dict(model="m", train_files="d.parquet", out_dir=str(tmp_path / "o"), weights={"w_con": 1.0})
    with pytest.raises(LaunchError, match="needs both orders"):
        build_command(VerlLaunch(algo="grpo", **spec))
    argv, _ = build_command(VerlLaunch(algo="grpo_consistent", **spec))
    assert argv[argv.index("--config-name") + 1] == "grpo_consistent"
    assert "++reward.custom_reward_function.reward_kwargs.w_con=1.0" in argv
