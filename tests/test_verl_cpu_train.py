"""verl 0.9.1's real trainer on CPU: ``DEVICE=cpu bash scripts/train_verl.sh`` for 2 steps, asserted from verl's files.

The policy is a tiny judge (the tiny model after a short supervised fine-tune on Think-J answers), so the
Think-J reward has variance and the policy gradient is not zero. Each run goes through the project's
config (configs/verl/<algo>.yaml) plus the CPU settings of thinkj/online/verl_cpu.py, and the test adds
only run sizes, a validation file, a rollout dump and a larger learning rate (Table 11's 1e-6 moves a
tiny model by less than float noise, so the weight-sync check would prove nothing).

All three runs here are opt-in (marker ``opt_in``; PPO and Reinforce++ also ``verl_cpu_all``), 125-205 s each on
2 shared cores (experiments/LOG.md), to keep CI within its budget. What ``make test`` keeps of verl on the CPU:
the consistent GRPO run of tests/test_verl_cpu_twins.py (it carries ``W_STR=0``, these checks, the checkpoint merge
and ``thinkj eval run`` on the merged model) and the CPU rehearsal of the whole pipeline
(tests/test_reproduce_cpu.py: plain GRPO through the same script, merge, evaluation, table, a sweep).

    python -m pytest -q tests/test_verl_cpu_train.py -m opt_in        # GRPO, PPO and Reinforce++
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from judgment_checks import check_synthetic_results  # tests/ is on sys.path
from ray_local import SessionMemory

from thinkj.rewards import get_preset
from thinkj.rewards.adapters.verl import compute_score
from thinkj.rewards.designs.twins import consistency_terms

ROOT = Path(__file__).resolve().parent.parent
DATA_SOURCE = "thinkj/pairwise_judge"
PRESET = "thinkj_qwen"  # configs/verl/*.yaml's reward preset
TERMS = (("w_acc", "acc"), ("w_fmt", "format"), ("w_str", "strength"), ("w_con", "consistency"))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a judge fine-tune, a verl run, a merge, an eval


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    from thinkj.export.verl import write_verl_parquet
    from thinkj.synthetic.fruit_task import make_pairs

    out = tmp_path_factory.mktemp("verl_data")
    write_verl_parquet(out / "train.parquet", [p for p in make_pairs(24, seed=31) if p.label != "tie"][:16])
    write_verl_parquet(out / "val.parquet", [p for p in make_pairs(12, seed=32) if p.label != "tie"][:4], split="val")
    return {"train": out / "train.parquet", "val": out / "val.parquet"}


def train(algo: str, judge: Path, data: dict[str, Path], out: Path, *overrides: str, **env: str) -> dict:
    """Run scripts/train_verl.sh with DEVICE=cpu; return verl's metric rows, the rollout dump and the cost."""
    run_env = {**os.environ, "DEVICE": "cpu", "ALGO": algo, "MODEL": str(judge), "DATA": str(data["train"]),
               "VAL_DATA": str(data["val"]), "OUT": str(out), "PYTHON": sys.executable, **env}
    argv = ["bash", str(ROOT / "scripts" / "train_verl.sh"), "trainer.total_training_steps=2", "trainer.test_freq=2",
            f"trainer.rollout_data_dir={out / 'rollouts'}", "data.train_batch_size=4",
            "actor_rollout_ref.actor.optim.lr=1e-4", "critic.optim.lr=1e-4", *overrides]
    start = time.monotonic()
    with open(out.parent / f"{out.name}.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=run_env, cwd=ROOT)
        memory = SessionMemory([], [proc.pid])  # the launcher's process tree: Ray's workers and vLLM included
        memory.start()
        try:
            code = proc.wait(timeout=900)
        finally:
            peak_gb = memory.stop()
    wall = time.monotonic() - start
    tail = (out.parent / f"{out.name}.log").read_text()[-6000:]
    assert code == 0, tail
    experiment = {"reinforce_pp": "reinforce_plus_plus"}.get(algo, algo)
    rows = [json.loads(line) for line in open(out / "logs" / "thinkj" / f"thinkj_{experiment}.jsonl")]
    samples = [json.loads(line) for path in sorted((out / "rollouts").glob("*.jsonl")) for line in open(path)]
    cost = {"algo": algo, "wall_s": round(wall, 1), "peak_rss_gb": round(peak_gb, 2)}
    print(json.dumps(cost))
    (out / "cost.json").write_text(json.dumps(cost))
    return {"rows": rows, "samples": samples, "cost": cost, "out": out}


def check_common(run: dict, weights: dict[str, float], val_n: int = 1) -> tuple[dict, dict]:
    """Assertions every algorithm shares; returns the two training steps' metrics. The score is checked as the
    weighted sum of the terms in ``weights`` (the consistency term only where its weight is not 0)."""
    steps = {row["step"]: row["data"] for row in run["rows"] if "actor/pg_loss" in row["data"]}
    assert sorted(steps) == [1, 2]
    first, last = steps[1], steps[2]
    for metrics in (first, last):
        assert math.isfinite(metrics["actor/pg_loss"]) and math.isfinite(metrics["actor/loss"])
    assert max(first["actor/grad_norm"], last["actor/grad_norm"]) > 0
    # the reward varied across the rollouts (a parsable-verdict judge, not a random model scoring 0 everywhere)
    assert len({sample["score"] for sample in run["samples"]}) > 1
    assert max(first["critic/score/max"], last["critic/score/max"]) > 0
    # vLLM's log-probs of step 2 come from the weights the actor had after step 1: the sync works. Both sides
    # compute in fp32, so the difference is float noise (about 3e-7 measured); the GRPO test shows that one
    # update moves these probabilities by far more
    assert last["training/rollout_probs_diff_mean"] < 1e-4
    # Think-J reward keys, as verl logs them from our compute_score (validation at the last step; verl files
    # `acc` under val-core/ and the other keys under val-aux/)
    # (mean@n: the mean over validation's n samples a prompt)
    terms = [(w, k) for w, k in TERMS if w in weights and (k != "consistency" or weights[w])]
    val = {}
    for row in run["rows"]:
        for key, value in row["data"].items():
            parts = key.split("/")
            if (parts[0] in ("val-core", "val-aux") and "/".join(parts[1:3]) == DATA_SOURCE
                    and parts[-1] == f"mean@{val_n}"):
                val[(row["step"], parts[3])] = value
    for key in ("score", *(k for _, k in terms)):
        assert (2, key) in val, sorted(val)
    assert val[(2, "score")] == pytest.approx(sum(weights[w] * val[(2, k)] for w, k in terms), abs=1e-6)
    # and per training sample, from verl's rollout dump
    assert len(run["samples"]) >= 8 and {"score", *(k for _, k in terms)} <= set(run["samples"][0])
    for sample in run["samples"]:
        assert sample["score"] == pytest.approx(sum(weights[w] * sample[k] for w, k in terms), abs=1e-6)
    check_trained_reward(run, steps, weights)
    return first, last


def recomputed_rewards(samples: list[dict], weights: dict[str, float]) -> list[dict]:
    """The reward of each dumped rollout recomputed from its text and gold alone, by the pure function with
    ``weights`` (plus ``w_con`` x the consistency term over the rollouts' twins, where ``w_con`` is not 0)."""
    base = {k: v for k, v in weights.items() if k != "w_con"}
    results = [compute_score(solution_str=s["output"], ground_truth=s["gts"], preset=PRESET, **base) for s in samples]
    if weights.get("w_con"):
        terms = consistency_terms([r.get("pred") for r in results], [s["gts"]["label"] for s in samples],
                                  [s["twin"] for s in samples], [int(s["order"]) for s in samples])
        for result, term in zip(results, terms):
            result.update(term, score=result["score"] + weights["w_con"] * term["consistency"])
    return results


def check_trained_reward(run: dict, steps: dict[int, dict], weights: dict[str, float]) -> None:
    """verl's logged ``critic/score/{mean,max,min}`` of each step -- the token-level scores it trained on, summed per
    rollout -- equal the reward recomputed from that step's dumped outputs and golds. The dump's own ``score`` is
    not evidence: verl 0.9.1's ``_log_rollout_data`` writes the token-level sum under ``score`` and then lets the
    reward's extra info (which has a ``score`` of its own) overwrite it. Fails when the reward handed to verl differs
    from the one the extra info reports: TwinRewardManager.run_single handing verl its score without the consistency
    term, tried once (step 1: verl 0.9375, recomputed 1.0625; every older check passed); also when a weight override
    does not reach the reward (recomputed with the weights the test expects). A negated ``reward_score`` is caught
    earlier, by ``critic/score/max > 0`` (tried once)."""
    by_step: dict[int, list[dict]] = {}
    for sample in run["samples"]:
        by_step.setdefault(sample["step"], []).append(sample)
    assert sorted(by_step) == sorted(steps)
    for step, samples in by_step.items():
        scores = [r["score"] for r in recomputed_rewards(samples, weights)]
        logged = steps[step]
        assert logged["critic/score/mean"] == pytest.approx(sum(scores) / len(scores), abs=1e-5), step
        assert (logged["critic/score/max"], logged["critic/score/min"]) == pytest.approx((max(scores), min(scores)),
                                                                                            abs=1e-5), step


def merge_and_evaluate(judge: Path, run: dict, first: dict, last: dict) -> None:
    """verl's step-2 checkpoint -> Hugging Face folder -> ``thinkj eval run``; and the policy moved."""
    out = run["out"]
    hf = out / "hf"
    merge = subprocess.run(["bash", str(ROOT / "scripts" / "merge_verl_checkpoint.sh"),
                            str(out / "checkpoints" / "global_step_2" / "actor"), str(hf)],
                           capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHON": sys.executable})
    assert merge.returncode == 0, merge.stderr[-3000:]
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    write_jsonl(out / "pairs.jsonl", make_pairs(4, seed=33))
    evaluation = subprocess.run([sys.executable, "-m", "thinkj.cli", "eval", "run", "synthetic", "--model", str(hf),
                                 "--data", str(out / "pairs.jsonl"), "--max-new-tokens", "64", "--out", str(out / "eval")],
                                capture_output=True, text=True, timeout=600)
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    # golds per order from the pairs file, verdicts re-parsed, accuracy recomputed (the range check it replaces held
    # for any number; a miscount fails it, tried in tests/test_smollm2_slow.py; this judge's verdicts parse, so a
    # misread verdict would too, not tried)
    check_synthetic_results(out / "eval", out / "pairs.jsonl", 4)
    # two updates moved the policy far more than vLLM's log-probs differed from the actor's at step 2
    # (had vLLM kept the initial weights, step 2's difference would be of the order of this movement)
    moved = [mean_token_prob_change(judge, hf, s["input"], s["output"]) for s in run["samples"][:4]]
    print(json.dumps({"policy_moved": moved, "rollout_probs_diff_mean": [first["training/rollout_probs_diff_mean"],
                                                                         last["training/rollout_probs_diff_mean"]]}))
    assert sum(moved) / len(moved) > 10 * last["training/rollout_probs_diff_mean"]


def mean_token_prob_change(model_a: Path, model_b: Path, prompt: str, response: str) -> float:
    """Mean |p_a - p_b| of the response tokens given the prompt (how far the policy moved on a rollout)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_a)
    head = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([head + tokenizer(response, add_special_tokens=False)["input_ids"]])
    probs = []
    for path in (model_a, model_b):
        with torch.no_grad():
            logits = AutoModelForCausalLM.from_pretrained(path).float()(ids).logits[0, len(head) - 1:-1]
        probs.append(torch.softmax(logits, -1).gather(-1, ids[0, len(head):, None]).squeeze(-1))
    return (probs[0] - probs[1]).abs().mean().item()


@pytest.mark.opt_in  # make test covers this through tests/test_verl_cpu_twins.py (module docstring)
def test_grpo_two_steps_strength_weight_zero_merge_and_eval(judge, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("verl_grpo") / "grpo"
    run = train("grpo", judge, data, out, W_STR="0")
    first, last = check_common(run, {**get_preset("thinkj_qwen").defaults, "w_str": 0.0})
    assert "actor/kl_loss" in last and "actor/reward_kl_penalty" not in last  # GRPO: KL in the loss only
    # the override changed the reward: right verdicts with a strength term exist, yet score = acc + format
    # (thinkj_qwen's default would add 0.2 x strength; the Reinforce++ test checks that default)
    assert any(s["strength"] > 0 for s in run["samples"])
    assert all(s["score"] == pytest.approx(s["acc"] + s["format"]) for s in run["samples"])

    merge_and_evaluate(judge, run, first, last)


@pytest.mark.verl_cpu_all
@pytest.mark.opt_in
def test_ppo_two_steps_with_critic_and_kl_in_reward(judge, data, tmp_path_factory):
    # one rollout per prompt: 8 prompts a step so the reward can vary within the run
    run = train("ppo", judge, data, tmp_path_factory.mktemp("verl_ppo") / "ppo", "data.train_batch_size=8")
    first, last = check_common(run, dict(get_preset("thinkj_qwen").defaults))
    for metrics in (first, last):
        assert math.isfinite(metrics["critic/vf_loss"])
        # Table 11's PPO KL: a penalty in the reward with coefficient 0.001 (algorithm.use_kl_in_reward)
        assert metrics["actor/reward_kl_penalty_coeff"] == pytest.approx(0.001)
    assert "actor/kl_loss" not in last


@pytest.mark.verl_cpu_all
@pytest.mark.opt_in
def test_reinforce_pp_two_steps_with_default_weights(judge, data, tmp_path_factory):
    run = train("reinforce_pp", judge, data, tmp_path_factory.mktemp("verl_rpp") / "rpp")
    weights = dict(get_preset("thinkj_qwen").defaults)
    assert weights["w_str"] == 0.2
    first, last = check_common(run, weights)  # score = acc + format + 0.2 x strength, sample by sample
    assert "actor/kl_loss" in last and "actor/reward_kl_penalty" not in last
    assert any(s["strength"] > 0 and s["score"] > s["acc"] + s["format"] for s in run["samples"])
