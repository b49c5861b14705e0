"""Online learning through verl 0.9.1's own code on CPU: Hydra configs, the launcher's command, the reward loop
under Ray, RLHFDataset on our parquet, and the trainer's advantage computation for GRPO / PPO / Reinforce++.

The full trainer runs on CPU in tests/test_verl_cpu_train.py (verl's CPU platform, docs/online_learning.md).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from thinkj.online.verl_launch import CONFIG_DIR, LaunchError, VerlLaunch, build_command, check_override
from thinkj.prompts import judge_output
from thinkj.rewards.adapters.verl import compute_score
from thinkj.rewards.weights import RewardWeightError
from thinkj.synthetic.fruit_task import make_pairs

ROOT = Path(__file__).resolve().parent.parent
ALGO_CONFIGS = {"grpo": "grpo", "ppo": "ppo", "reinforce_pp": "reinforce_plus_plus"}
# Table 11 of the paper, per algorithm (GRPO, PPO, Reinforce++)
TABLE11 = {
    "grpo": {"actor_rollout_ref.actor.optim.lr": 1e-6, "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 16, "actor_rollout_ref.actor.use_kl_loss": True,
             "actor_rollout_ref.actor.kl_loss_coef": 0.001, "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
             "actor_rollout_ref.rollout.n": 8, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 16,
             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 16, "trainer.total_epochs": 10,
             "algorithm.adv_estimator": "grpo"},
    "ppo": {"actor_rollout_ref.actor.optim.lr": 1e-6, "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 4, "actor_rollout_ref.actor.use_kl_loss": False,
            "actor_rollout_ref.rollout.n": 1, "critic.optim.lr": 1e-5, "critic.ppo_micro_batch_size_per_gpu": 4,
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 4, "trainer.total_epochs": 5,
            "algorithm.adv_estimator": "gae"},
    "reinforce_pp": {"actor_rollout_ref.actor.optim.lr": 3e-6, "actor_rollout_ref.actor.ppo_mini_batch_size": 1024,
                     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 8, "actor_rollout_ref.actor.use_kl_loss": True,
                     "actor_rollout_ref.actor.kl_loss_coef": 0.001, "actor_rollout_ref.actor.kl_loss_type": "mse",
                     "actor_rollout_ref.rollout.n": 4, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 8,
                     "trainer.total_epochs": 5, "algorithm.adv_estimator": "reinforce_plus_plus"},
}
SHARED = {"data.train_batch_size": 1024, "data.max_prompt_length": 1024, "data.max_response_length": 3072,
          "algorithm.kl_ctrl.kl_coef": 0.001, "trainer.nnodes": 2, "trainer.n_gpus_per_node": 8,
          "actor_rollout_ref.rollout.name": "vllm", "actor_rollout_ref.actor.entropy_coeff": 0.001}
# The one key we add that verl's schema does not declare: get_custom_reward_fn reads it with .get().
EXTENSION_KEYS = ("reward.custom_reward_function.reward_kwargs",)


def _compose(config_name: str, overrides: list[str], config_dir: Path = CONFIG_DIR):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def _leaves(node, prefix: str = "") -> set[str]:
    if isinstance(node, dict):
        out = set()
        for key, value in node.items():
            out |= _leaves(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    return {prefix}


def _get(cfg, dotted: str):
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, dotted)


def _launcher_overrides(tiny_model_dir: Path, algo: str, tmp_path: Path, **kw) -> list[str]:
    argv, _ = build_command(VerlLaunch(algo=algo, model=str(tiny_model_dir), train_files=str(tmp_path / "train.parquet"),
                                       out_dir=str(tmp_path / "out"), **kw))
    return argv[argv.index("--config-name") + 2:]


@pytest.fixture(scope="module")
def composed(tiny_model_dir, tmp_path_factory):
    """Each algorithm config composed with verl's real ppo_trainer plus the launcher's overrides (one weight changed)."""
    tmp = tmp_path_factory.mktemp("verl_cfg")
    return {algo: _compose(name, _launcher_overrides(tiny_model_dir, algo, tmp, weights={"w_str": 0.0},
                                                      overrides=["reward.num_workers=1"]))
            for algo, name in ALGO_CONFIGS.items()}


def test_configs_carry_table11_and_pass_verl_validation(composed):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    for algo, cfg in composed.items():
        for key, value in {**SHARED, **TABLE11[algo]}.items():
            got = _get(cfg, key)
            assert got == pytest.approx(value) if isinstance(value, float) else got == value, (algo, key, got, value)
        # verl's own checks (batch divisibility over 16 GPUs, micro-batch settings, critic config)
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        assert need_critic(cfg) == (algo == "ppo")
        assert need_reference_policy(cfg)  # GRPO / Reinforce++: KL loss; PPO: KL penalty in the reward
    assert composed["ppo"].critic.model.path == composed["ppo"].actor_rollout_ref.model.path


def test_every_key_we_set_exists_in_verls_schema():
    from omegaconf import OmegaConf

    verl_dir = Path(__import__("verl").__file__).parent / "trainer" / "config"
    schema = _leaves(OmegaConf.to_container(_compose("ppo_trainer", [], verl_dir), resolve=False))
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        ours = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        ours.pop("defaults", None)
        ours.pop("hydra", None)
        for key in _leaves(ours):
            if key.startswith(EXTENSION_KEYS):
                continue
            assert key in schema, f"{path.name}: {key} is not a key of verl's ppo_trainer config"
    # and the check itself can fail: a misspelt key is not in the schema
    assert "actor_rollout_ref.actor.ppo_mini_batch" not in schema


def test_reward_function_resolves_through_verls_loader(composed):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    text = judge_output("Response (a) answers; (b) does not.", "a", 2)
    gt = {"label": "a", "strength": 3}
    for cfg in composed.values():
        fn = get_custom_reward_fn(cfg)
        assert fn is not None and fn.func.__name__ == "_call_with_kwargs"
        assert fn.args[0] is compute_score
        assert dict(fn.args[1]) == {"preset": "thinkj_qwen", "w_str": 0.0}
        # verl calls it with keywords plus its own extras (with a reward router: reward_router_address,
        # reward_model_tokenizer); the weight override (w_str=0) reaches the preset
        out = fn(data_source="thinkj/pairwise_judge", solution_str=text, ground_truth=gt, extra_info={},
                 reward_router_address=None, reward_model_tokenizer=None)
        assert out == compute_score(solution_str=text, ground_truth=gt, preset="thinkj_qwen", w_str=0.0)
        assert out["score"] == 2.0 and out["strength"] == 0.5


def test_old_top_level_reward_keys_are_ignored_by_verl_and_absent_from_our_files(tiny_model_dir):
    from verl.trainer.ppo.reward import get_custom_reward_fn

    # why the rule exists: verl 0.9 composes the old key without complaint and then never reads it
    old = _compose("grpo", [f"actor_rollout_ref.model.path={tiny_model_dir}", "reward.custom_reward_function.path=null",
                            "custom_reward_function.path=pkg://thinkj.rewards.adapters.verl"])
    assert get_custom_reward_fn(old) is None

    legacy = re.compile(r"(?<![\w.])(custom_reward_function\.|reward_model\.reward_manager)")
    assert legacy.search("python -m verl.trainer.main_ppo custom_reward_function.path=x")  # the scan can fail
    assert legacy.search("  +reward_model.reward_manager=naive")
    assert not legacy.search("reward.custom_reward_function.path=x reward.reward_manager.name=naive")
    files = [*ROOT.glob("configs/**/*.yaml"), *ROOT.glob("scripts/**/*.sh"), *ROOT.glob("scripts/**/*.py")]
    assert any(f.name == "grpo.yaml" for f in files)
    from omegaconf import OmegaConf

    for path in files:
        text = path.read_text(encoding="utf-8")
        code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())  # comments may name the old keys
        assert not legacy.search(code), f"{path.relative_to(ROOT)} uses an old top-level reward key that verl 0.9 ignores"
        if path.suffix == ".yaml":
            top = OmegaConf.load(path)
            assert "custom_reward_function" not in top and "reward_model" not in top, path
    with pytest.raises(LaunchError, match="old top-level reward key"):
        check_override("custom_reward_function.path=pkg://thinkj.rewards.adapters.verl")
    with pytest.raises(LaunchError, match="old top-level reward key"):
        check_override("+reward_model.reward_manager=naive")


def test_launcher_command_is_accepted_by_verls_entry_point(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """The exact command line the launcher builds, given to verl's main_ppo with Hydra's --cfg job (prints, no training)."""
    import verl.trainer.main_ppo as main_ppo

    argv, env = build_command(VerlLaunch(algo="reinforce_pp", model=str(tiny_model_dir), train_files=str(tmp_path / "t.parquet"),
                                         out_dir=str(tmp_path / "out"), preset="thinkj_llama", weights={"w_str": 0.2},
                                         overrides=["trainer.total_epochs=2"]))
    assert argv[1:3] == ["-m", "verl.trainer.main_ppo"] and env["VERL_FILE_LOGGER_ROOT"].endswith("logs")
    monkeypatch.setattr(sys, "argv", ["main_ppo", *argv[3:], "--cfg", "job"])
    capsys.readouterr()
    main_ppo.main()  # in-process: same Hydra entry point as `python -m verl.trainer.main_ppo`, without re-importing torch
    stdout = capsys.readouterr().out
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(stdout[stdout.index("actor_rollout_ref:"):])
    assert cfg.algorithm.adv_estimator == "reinforce_plus_plus" and cfg.trainer.total_epochs == 2
    assert cfg.reward.custom_reward_function.path == "pkg://thinkj.rewards.adapters.verl"
    assert dict(cfg.reward.custom_reward_function.reward_kwargs) == {"preset": "thinkj_llama", "w_str": 0.2}
    with pytest.raises(RewardWeightError, match="no weight"):  # the one weight rule (thinkj.rewards.weights)
        build_command(VerlLaunch(algo="grpo", model="m", train_files="t", weights={"w_margin": 1.0}))
    with pytest.raises(LaunchError, match="unknown algorithm"):
        build_command(VerlLaunch(algo="dpo", model="m", train_files="t"))


def test_active_kl_terms_per_algorithm_match_the_papers_verl(composed):
    """Which KL term verl 0.9.1 actually applies, read the way its trainer reads the composed config.

    Table 11 lists kl_ctrl.kl_coef 0.001 for GRPO and PPO and a KL loss for GRPO and Reinforce++. In the
    paper's verl (early 2025) ``ray_trainer.fit`` put the kl_ctrl penalty into the reward exactly when the
    actor had no KL loss (``if not use_kl_loss: apply_kl_penalty(...)``), so: PPO = KL penalty in the reward,
    GRPO / Reinforce++ = KL loss only. verl 0.9.1 gates the reward penalty on ``algorithm.use_kl_in_reward``
    (``verl/trainer/ppo/ray_trainer.py``), default false: without ppo.yaml setting it PPO had no KL at all.
    """
    from verl.trainer.ppo.utils import need_reference_policy

    active = {}
    for algo, cfg in composed.items():
        actor, algorithm = cfg.actor_rollout_ref.actor, cfg.algorithm
        active[algo] = {
            "reward": (algorithm.kl_penalty, algorithm.kl_ctrl.type, algorithm.kl_ctrl.kl_coef) if algorithm.use_kl_in_reward
            else None,
            "loss": (actor.kl_loss_type, actor.kl_loss_coef) if actor.use_kl_loss else None,
            "entropy": actor.entropy_coeff,
        }
        assert need_reference_policy(cfg)  # both KL forms need the reference policy's log-probs
    assert active == {
        "grpo": {"reward": None, "loss": ("low_var_kl", 0.001), "entropy": 0.001},
        "ppo": {"reward": ("kl", "fixed", 0.001), "loss": None, "entropy": 0.001},
        "reinforce_pp": {"reward": None, "loss": ("mse", 0.001), "entropy": 0.001},
    }


# ---- data: our parquet through verl's RLHFDataset, outputs tokenised into a DataProto ----

def _outputs() -> list[tuple[str, dict]]:
    """Judge outputs with known rewards: right/wrong verdicts, strengths off by 0-2, malformed, tie gold."""
    think = "Response (a) follows the instruction; response (b) ignores the requested format."
    return [
        (judge_output(think, "a", 2), {"label": "a", "strength": 2}),
        (judge_output(think, "a", 3), {"label": "a", "strength": 1}),
        (judge_output(think, "b", 2), {"label": "a", "strength": 2}),
        ("Response (a) is better.", {"label": "a", "strength": 2}),
        (judge_output(think, "b", 1), {"label": "b", "strength": 2}),
        (judge_output(think, "b", 3), {"label": "b", "strength": None}),
        ("<think>unfinished", {"label": "b", "strength": 3}),
        (judge_output(think, "a", 1), {"label": "tie", "strength": None}),
    ]


def _data_proto(tokenizer, prompts: list[list[dict]], outputs: list[tuple[str, dict]], prompt_len: int = 48,
                resp_len: int = 96):
    """A rollout batch as verl's agent loop leaves it: left-padded prompts, right-padded responses, ground truth."""
    from verl import DataProto

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    rows_p, rows_r, masks = [], [], []
    for msgs, (text, _) in zip(prompts, outputs):
        p = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        p = list(p["input_ids"] if isinstance(p, dict) or hasattr(p, "keys") else p)[-prompt_len:]
        r = tokenizer(text, add_special_tokens=False)["input_ids"][: resp_len - 1] + [tokenizer.eos_token_id]
        rows_p.append([pad] * (prompt_len - len(p)) + p)
        rows_r.append(r + [pad] * (resp_len - len(r)))
        masks.append([0] * (prompt_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (resp_len - len(r)))
    prompts_t, responses = torch.tensor(rows_p), torch.tensor(rows_r)
    attention = torch.tensor(masks)
    batch = {"prompts": prompts_t, "responses": responses, "input_ids": torch.cat([prompts_t, responses], 1),
             "attention_mask": attention, "response_mask": attention[:, prompt_len:].clone()}
    n = len(outputs)
    non_tensor = {"data_source": np.array(["thinkj/pairwise_judge"] * n, dtype=object),
                  "reward_model": np.array([{"style": "rule", "ground_truth": gt} for _, gt in outputs], dtype=object),
                  "extra_info": np.array([{"index": i} for i in range(n)], dtype=object),
                  "raw_prompt": np.array(prompts + [None], dtype=object)[:-1]}
    return DataProto.from_dict(tensors=batch, non_tensors=non_tensor)


def test_parquet_loads_with_verls_rlhf_dataset(tiny_model_dir, tmp_path):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from thinkj.export.verl import write_verl_parquet

    pairs = make_pairs(6, seed=3)
    counts = write_verl_parquet(tmp_path / "train.parquet", pairs)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
                            "truncation": "error", "return_raw_chat": True, "cache_dir": str(tmp_path / "cache")})
    ds = RLHFDataset(str(tmp_path / "train.parquet"), tok, cfg)
    assert len(ds) == counts["rows"] > 0
    batch = collate_fn([ds[i] for i in range(len(ds))])
    gts = [r["ground_truth"] for r in batch["reward_model"]]
    kept = [p for p in pairs if p.label != "tie"]
    assert [g["label"] for g in gts] == [p.label for p in kept]
    assert list(batch["data_source"]) == ["thinkj/pairwise_judge"] * len(kept)
    # the raw chat verl hands to the rollout is our judge_strength_v2 prompt, verbatim
    from thinkj.prompts import get_template

    assert [dict(m) for m in batch["raw_prompt"][0]] == get_template("judge_strength_v2").render(kept[0])
    # and the reward on a right answer for the first row, from the ground truth verl carries, is the full score
    assert compute_score(solution_str=judge_output("x", gts[0]["label"], gts[0]["strength"] or 1),
                         ground_truth=gts[0])["acc"] == 1.0


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_reward_loop_manager_scores_equal_pure_function(ray_session, composed, tiny_model_dir):
    from transformers import AutoTokenizer
    from verl.experimental.reward_loop import RewardLoopManager

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    outputs = _outputs()
    prompts = [[{"role": "user", "content": f"Which response is better? case {i}"}] for i in range(len(outputs))]
    data = _data_proto(tok, prompts, outputs)
    cfg = composed["grpo"]  # preset thinkj_qwen with w_str overridden to 0.0 through reward_kwargs
    result = RewardLoopManager(cfg).compute_rm_score(data)
    rm = result.batch["rm_scores"]
    expected = [compute_score(solution_str=text, ground_truth=gt, preset="thinkj_qwen", w_str=0.0) for text, gt in outputs]
    # the score sits on the last response token, zeros elsewhere
    assert rm.sum(-1).tolist() == pytest.approx([e["score"] for e in expected])
    last = data.batch["response_mask"].sum(-1) - 1
    assert rm[torch.arange(len(outputs)), last].tolist() == pytest.approx([e["score"] for e in expected])
    assert result.meta_info["reward_extra_keys"] and set(result.meta_info["reward_extra_keys"]) == set(expected[0])
    assert result.non_tensor_batch["acc"].tolist() == [e["acc"] for e in expected]
    assert sorted({e["score"] for e in expected}) == [0.0, 1.0, 2.0]  # the cases really differ


def _token_rewards(tokenizer, outputs, group: int):
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    prompts = [[{"role": "user", "content": f"pair {i // group}"}] for i in range(len(outputs))]
    data = _data_proto(tokenizer, prompts, outputs)
    scores = [compute_score(solution_str=t, ground_truth=gt)["score"] for t, gt in outputs]
    data.batch["token_level_rewards"] = NaiveRewardManager.assemble_rm_scores(data, scores)
    data.non_tensor_batch["uid"] = np.array([f"p{i // group}" for i in range(len(outputs))], dtype=object)
    return data, np.array(scores)


def _whiten(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    vals = x[mask.astype(bool)]
    var = ((vals - vals.mean()) ** 2).sum() / (len(vals) - 1)  # verl's masked_var is the unbiased one
    return (x - vals.mean()) / np.sqrt(var + 1e-8)


def test_advantages_with_verls_core_algos(composed, tiny_model_dir):
    from transformers import AutoTokenizer
    from verl.trainer.ppo.ray_trainer import compute_advantage

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    outputs = _outputs()  # two groups of 4 rollouts (prompts p0, p1)
    for algo, cfg in composed.items():
        data, scores = _token_rewards(tok, outputs, group=4)
        mask = data.batch["response_mask"].numpy().astype(float)
        if algo == "ppo":
            values = torch.linspace(0.1, 0.9, mask.shape[1]).repeat(len(outputs), 1) * data.batch["response_mask"]
            data.batch["values"] = values
        out = compute_advantage(data, adv_estimator=cfg.algorithm.adv_estimator, gamma=cfg.algorithm.gamma,
                                lam=cfg.algorithm.lam, norm_adv_by_std_in_grpo=cfg.algorithm.norm_adv_by_std_in_grpo,
                                config=cfg.algorithm)
        adv = out.batch["advantages"].numpy()
        if algo == "grpo":
            groups = scores.reshape(2, 4)
            z = (groups - groups.mean(1, keepdims=True)) / (groups.std(1, ddof=1, keepdims=True) + 1e-6)
            np.testing.assert_allclose(adv, z.reshape(-1, 1) * mask, atol=1e-5)
        elif algo == "reinforce_pp":
            # gamma = 1: every valid token's return is the sequence score, whitened over all valid tokens of the batch
            returns = scores[:, None] * mask
            np.testing.assert_allclose(out.batch["returns"].numpy(), returns, atol=1e-6)
            np.testing.assert_allclose(adv, _whiten(returns, mask) * mask, atol=1e-4)
        else:
            v, r = values.numpy(), data.batch["token_level_rewards"].numpy()
            gamma, lam = cfg.algorithm.gamma, cfg.algorithm.lam
            gae = np.zeros_like(r)
            for i in range(len(r)):
                last, nxt = 0.0, 0.0
                for t in reversed(range(int(mask[i].sum()))):
                    delta = r[i, t] + gamma * nxt - v[i, t]
                    last = delta + gamma * lam * last
                    gae[i, t], nxt = last, v[i, t]
            np.testing.assert_allclose(out.batch["returns"].numpy() * mask, (gae + v) * mask, atol=1e-5)
            np.testing.assert_allclose(adv * mask, _whiten(gae, mask) * mask, atol=1e-4)


def test_dry_run_cli_and_gpu_refusal(tiny_model_dir, tmp_path, capsys, monkeypatch):
    from typer.testing import CliRunner

    from thinkj.export.verl import write_verl_parquet
    from thinkj.offline.cli import train_app as app
    from thinkj.online.verl_launch import gpu_available

    write_verl_parquet(tmp_path / "t.parquet", make_pairs(4, seed=0))  # the dry run checks the data as the launch does
    result = CliRunner().invoke(app, ["rl", "--engine", "verl", "--algo", "ppo", "--model", str(tiny_model_dir), "--data",
                                      str(tmp_path / "t.parquet"), "--out", str(tmp_path / "o"), "--weight", "w_fmt=0.5",
                                      "--dry-run", "critic.optim.lr=2e-5"])
    assert result.exit_code == 0, result.output
    assert "--config-name ppo" in result.output and "++reward.custom_reward_function.reward_kwargs.w_fmt=0.5" in result.output
    assert result.output.rstrip().endswith("critic.optim.lr=2e-05") or "critic.optim.lr=2e-5" in result.output
    bad = CliRunner().invoke(app, ["rl", "--engine", "trl", "--algo", "ppo", "--model", "m", "--data", "d"])
    assert bad.exit_code != 0 and "GRPO only" in bad.output
    if not gpu_available():
        from thinkj.online.verl_launch import main

        monkeypatch.delenv("RAY_ADDRESS", raising=False)
        capsys.readouterr()
        assert main(["--algo", "grpo", "--model", str(tiny_model_dir), "--data", "d", "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert "no GPU" in err and "--device cpu" in err
        # a model whose tokenizer cannot be read is refused before anything starts (the <think> check needs it)
        assert main(["--algo", "grpo", "--model", str(tmp_path / "missing"), "--data", "d", "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert "could not be loaded" in err and "--allow-think-tokens" in err and len(err.strip().splitlines()) == 1


def test_shell_launchers_print_commands_verl_accepts(tmp_path, monkeypatch):
    """DRY_RUN=1 of the bash scripts: the one-node command, the 2-node ray job, and the merger's CLI (verl's own parser)."""
    import os
    import shlex
    import subprocess

    from thinkj.export.verl import write_verl_parquet

    data = tmp_path / "d.parquet"
    write_verl_parquet(data, make_pairs(4, seed=0))  # the dry run checks the data as the launch does
    env = {**os.environ, "DRY_RUN": "1", "ALGO": "reinforce_pp", "MODEL": "m", "DATA": str(data), "W_STR": "0.0",
           "PYTHON": sys.executable}
    one = subprocess.run(["bash", str(ROOT / "scripts/train_verl.sh"), "trainer.total_epochs=1"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 0, one.stderr
    line = one.stdout.strip().splitlines()[-1]
    for part in ("verl.trainer.main_ppo", "--config-name reinforce_plus_plus", "trainer.nnodes=1",
                 "++reward.custom_reward_function.reward_kwargs.w_str=0.0", "trainer.total_epochs=1"):
        assert part in line, part
    two = subprocess.run(["bash", str(ROOT / "scripts/submit_verl_2node.sh"), "actor_rollout_ref.rollout.n=16"],
                         env={**env, "HEAD_ADDR": "10.0.0.1", "OUT": "/shared/o"}, capture_output=True, text=True, timeout=60)
    assert two.returncode == 0, two.stderr
    argv = shlex.split(two.stdout)
    assert argv[:3] == ["ray", "job", "submit"] and "http://10.0.0.1:8265" in argv
    runtime = __import__("json").loads(argv[argv.index("--runtime-env-json") + 1])
    assert runtime["working_dir"] == "." and "/.venv/" in runtime["excludes"]
    entry = argv[argv.index("--") + 1:]  # words: `ray job submit` would shell-quote a single string as one word
    assert entry[:3] == ["python", "-m", "thinkj.online.verl_launch"] and "--nnodes" in entry
    assert entry[-1] == "actor_rollout_ref.rollout.n=16"
    missing = subprocess.run(["bash", str(ROOT / "scripts/submit_verl_2node.sh")], env={**env, "OUT": "o"},
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "HEAD_ADDR" in missing.stderr

    merge = subprocess.run(["bash", str(ROOT / "scripts/merge_verl_checkpoint.sh"), "ck/global_step_5/actor",
                            str(tmp_path / "hf")], env=env, capture_output=True, text=True, timeout=60)
    assert merge.returncode == 0, merge.stderr
    cmd = shlex.split(merge.stdout)
    assert cmd[1:3] == ["-m", "verl.model_merger"]
    from verl.model_merger.base_model_merger import parse_args

    monkeypatch.setattr(sys, "argv", ["verl.model_merger", *cmd[3:]])
    args = parse_args()
    assert (args.operation, args.backend, args.local_dir, args.target_dir) == ("merge", "fsdp", "ck/global_step_5/actor",
                                                                              str(tmp_path / "hf"))


def test_a_catalog_model_name_becomes_its_converted_folder(tmp_path, monkeypatch):
    """``--model smollm2`` means the cache folder `thinkj models fetch` made, as for LlamaFactory, TRL and vLLM."""
    from thinkj.errors import ThinkJError
    from thinkj.models.catalog import DONE_MARKER, model_dir

    monkeypatch.setenv("THINKJ_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    spec = VerlLaunch(algo="grpo", model="smollm2", train_files="t.parquet")
    with pytest.raises(ThinkJError, match="thinkj models fetch smollm2"):
        build_command(spec)
    folder = model_dir("smollm2")
    folder.mkdir(parents=True)
    (folder / DONE_MARKER).write_text("{}")
    argv, _ = build_command(spec)
    assert f"actor_rollout_ref.model.path={folder}" in argv


@pytest.mark.parametrize("folder", ["runs/sweeps/table8/runs/model=tiny_w_fmt=1.0_w_str=0.2-5fe761a1", "a dir/x,y",
                                    "it's[1]", "plain/path-1.0"])
def test_paths_reach_hydra_whole_whatever_their_characters(folder):
    """A sweep's run folder holds '=': every path override must parse back, by Hydra's own parser, to the path."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from thinkj.online.verl_launch import hydra_value

    parsed = OverridesParser.create().parse_overrides([f"trainer.default_local_dir={hydra_value(folder)}"])
    assert parsed[0].value() == folder
