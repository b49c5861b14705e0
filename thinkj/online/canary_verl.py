"""verl RL canaries: the canary's arms (:mod:`thinkj.online.canary`) run through ``DEVICE=cpu bash
scripts/train_verl.sh``, the script a cluster user runs, then verl's own model merger
(``scripts/merge_verl_checkpoint.sh``) and the canary's held-out test on the merged policy.

    from thinkj.online.canary_verl import verl_canary_arm
    right = verl_canary_arm(init, "runs/canary_verl", algo="grpo", seed=0, val=True)
    control = verl_canary_arm(init, "runs/canary_verl", algo="grpo", seed=0, control="flipped")

Run sizes mirror the TRL canary's :data:`~thinkj.online.canary.RL_SETTINGS` (4 prompts x 8 rollouts a step,
lr 3e-4, constant as verl's default schedule is, no KL term, responses up to 96 tokens, one on-policy update a
step); the algorithm's estimator and the rest of configs/verl/<algo>.yaml stay as configured.
``grpo_consistent`` trains on both orders of each comparison (2 comparisons x 2 orders a step: the same 32
rollouts).

verl GRPO runs 60 steps (:data:`STEPS`): at 30 its right arm rose past the +0.05 bar on 3 of 5 runs, at 60 on 5 of 5
(+0.088 to +0.107; flipped control -0.250; experiments/LOG.md, "verl GRPO canary at 60 steps"). A pair of arms then
takes ~9 min on 2 cores, over the canary's 5-minute budget and `make test`'s 45, so the verl canaries are opt-in
(tests/test_rl_canary.py) and ``thinkj train canary --engine verl`` reports one draw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.online.canary import RL_PAIRS, RL_SETTINGS, canary_rl_pairs, eval_pairs, judge_moved
from thinkj.paths import PROJECT_ROOT

ALGOS = ("grpo", "grpo_consistent", "ppo", "reinforce_pp")
CRITIC_LR = 1e-3  # PPO's value head starts from nothing; Table 11's 1e-5 would leave it there for 30 steps
# steps per algorithm (the TRL canary's RL_SETTINGS["steps"] is its own): verl GRPO's rise at 30 was small and
# variable; the other algorithms held at 30 on their one run each
STEPS: dict[str, int] = {"grpo": 60}
DEFAULT_STEPS = 30
VAL_EVERY = 10  # held-out validation (both orders of the canary's 64 eval pairs) every so many steps, and at step 0


class CanaryRunError(ThinkJError):
    pass


def canary_steps(algo: str) -> int:
    """Training steps of a verl canary arm of ``algo``."""
    return STEPS.get(algo, DEFAULT_STEPS)


def verl_canary_overrides(algo: str, prompt_length: int, *, val: bool = False,
                          validation_dir: Path | None = None) -> list[str]:
    """Hydra overrides of a verl canary arm (applied after verl_cpu's CPU settings)."""
    if algo not in ALGOS:
        raise ValueError(f"algo {algo!r}: choose one of {', '.join(ALGOS)}")
    steps = canary_steps(algo)
    overrides = [f"trainer.total_training_steps={steps}", f"trainer.save_freq={steps}",
                 f"data.train_batch_size={RL_SETTINGS['prompts_per_step']}",
                 f"actor_rollout_ref.actor.ppo_mini_batch_size={RL_SETTINGS['prompts_per_step']}",
                 f"actor_rollout_ref.rollout.n={RL_SETTINGS['num_generations']}",
                 f"actor_rollout_ref.actor.optim.lr={RL_SETTINGS['learning_rate']}",
                 f"data.max_response_length={RL_SETTINGS['max_completion_length']}",
                 f"data.max_prompt_length={prompt_length}",
                 # file order: each step's golds balanced (canary_rl_pairs); grpo_consistent's twins need it too
                 "data.shuffle=False",
                 # beta 0 as in the TRL arms: no KL loss, no KL in the reward, no entropy bonus
                 "actor_rollout_ref.actor.use_kl_loss=False", "algorithm.use_kl_in_reward=False",
                 "actor_rollout_ref.actor.entropy_coeff=0"]
    # verl's constant lr, unlike TRL's linear decay: decaying it (cosine) did not make the right arm learn more
    # reliably (3 of 3 runs under the bar, against 4 of 5 passing at constant lr; experiments/LOG.md, "RL canaries,
    # session 10")
    if algo == "ppo":
        overrides += [f"critic.optim.lr={CRITIC_LR}", f"critic.ppo_mini_batch_size={RL_SETTINGS['prompts_per_step']}"]
    if val:
        overrides += [f"trainer.test_freq={VAL_EVERY}", "trainer.val_before_train=True"]
        if validation_dir is not None:
            overrides.append(f"trainer.validation_data_dir={validation_dir}")
    return overrides


def verl_canary_arm(init: str | Path, root: str | Path, *, algo: str, seed: int, control: str | None = None,
                    before: list[float] | None = None, gen_before: dict[str, Any] | None = None,
                    val: bool = False) -> dict[str, Any]:
    """One verl canary arm from ``init``: train, merge the last checkpoint, and :func:`judge_moved` it.

    ``val``: verl also validates on the held-out pairs in both orders (``val-judge/*``, dumped under
    ``<out>/validation``) before training and every :data:`VAL_EVERY` steps. The result holds the test, the arm,
    the run folder, verl's metric rows, the first and last mean training score and the wall time."""
    import shutil
    import time

    from thinkj.export.verl import fitted_prompt_length, write_verl_parquet

    arm = control or "right"
    root = Path(root)
    out = root / f"{algo}-{arm}"
    # an arm is one fresh run: verl would resume from an earlier run's last checkpoint there (resume_mode auto),
    # train nothing and hand back the old policy, and its file logger would append to the old metric rows
    shutil.rmtree(out, ignore_errors=True)
    twins = algo == "grpo_consistent"
    train = root / f"{algo}-{arm}.parquet"
    write_verl_parquet(train, canary_rl_pairs(RL_PAIRS, seed, control=control), twins=twins, seed=seed)
    env = {**os.environ, "DEVICE": "cpu", "ALGO": algo, "MODEL": str(init), "DATA": str(train), "OUT": str(out),
           "PYTHON": sys.executable}
    if val:
        env["VAL_DATA"] = str(root / "val.parquet")
        write_verl_parquet(env["VAL_DATA"], eval_pairs(), split="val", twins=True, seed=seed)
    overrides = verl_canary_overrides(algo, fitted_prompt_length(init, train), val=val,
                                      validation_dir=out / "validation" if val else None)
    log = root / f"{algo}-{arm}.log"
    start = time.monotonic()
    with open(log, "w") as handle:
        code = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "train_verl.sh"), *overrides], env=env,
                              stdout=handle, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT).returncode
    if code != 0:
        raise CanaryRunError(f"verl {algo} ({arm} arm) exited with {code}; its log: {log}")
    hf = out / "hf"
    checkpoint = out / "checkpoints" / f"global_step_{canary_steps(algo)}" / "actor"
    merge = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "merge_verl_checkpoint.sh"), str(checkpoint),
                            str(hf)], env=env, capture_output=True, text=True, cwd=PROJECT_ROOT)
    if merge.returncode != 0:
        raise CanaryRunError(f"merging {checkpoint} failed ({merge.returncode}): {merge.stderr[-2000:]}")
    wall = time.monotonic() - start
    rows = [json.loads(line) for path in sorted((out / "logs").rglob("*.jsonl")) for line in open(path)]
    scores = [row["data"]["critic/score/mean"] for row in rows if "critic/score/mean" in row["data"]]
    if not scores:
        raise CanaryRunError(f"verl {algo} ({arm} arm) logged no training score under {out / 'logs'}")
    return {**judge_moved(init, hf, before, gen_before), "arm": arm, "algo": algo, "out": str(out), "rows": rows,
            "first_reward": scores[0], "last_reward": scores[-1], "wall_s": round(wall, 1)}
