"""The demo's budgets, one plan per model: sizes, steps and learning rates of every stage.

    thinkj smoke --model smollm2     # PLANS["smollm2"]: SmolLM2-135M-Instruct on the facts task (make demo)
    thinkj smoke --model tiny        # PLANS["tiny"]: the 0.4 M-parameter random-init model (make demo-tiny, tests)

Everything that trades time for quality on 2 CPU cores is here, beside the measurements that chose it; the
stages (``thinkj.demo.stages_*``) only call the library with these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.registry import Registry

ONLINE_DATA = ("seed_set", "train_pairs")  # where the online stage's prompts come from (DemoPlan.online_data)


@dataclass(frozen=True)
class DemoPlan:
    model: str  # "tiny" (built on the spot) or a ``thinkj models`` catalog name
    profile: str  # LlamaFactory model profile (configs/models/)
    task: str  # thinkj.synthetic.tasks
    threads: int = 2
    train_pairs: int = 512
    test_pairs: int = 100
    base_preview: int = 16  # judge_base stage: pairs judged by the base model before anything (0 = no stage)
    # the prompts of every stage (judge: difficulty, SFT, pairs, GRPO, evaluation; critic: SFT, pairs)
    template: str = "judge_strength_v2"
    critic_template: str = "critic_strength_v2"
    # data selection
    difficulty_pairs: int | None = None  # judge only the first N training pairs (None = all)
    difficulty_k: int = 3
    difficulty_max_new_tokens: int = 8
    difficulty_batch: int = 64
    dedup_threshold: float = 0.9
    dedup_text_field: str = "instruction+responses"
    teacher: dict[str, Any] = field(default_factory=lambda: {"error_rate": 0.15, "empty_explanation_rate": 0.1})
    # SFT of judge and critic
    sft_steps: int = 160
    critic_steps: int = 160
    sft_batch: int = 8
    sft_lr: float = 5e-3
    sft_scheduler: str = "constant_with_warmup"
    sft_warmup: int = 4
    cutoff_len: int = 1024
    # bf16 autocast for the LlamaFactory stages (SFT, DPO) where the CPU computes bf16 natively (for_cpu)
    cpu_bf16: bool = False
    # bf16 for the judge's generation too (HF backend: difficulty, critic pairs, evaluation), on the same condition
    bf16_generation: bool = False
    # LlamaFactory and TRL turn on gradient checkpointing; a 135 M model fits in memory without it, each step is cheaper
    gradient_checkpointing: bool = True
    critic_wrong_side_every: int = 2
    # critic-guided pairs and DPO
    pair_limit: int = 128  # critic-guided pairs from the first N training pairs outside the seed set
    pair_max_new_tokens: int = 96
    pair_batch: int = 48
    min_pairs: int = 4
    dpo_steps: int = 40
    dpo_batch: int = 4
    dpo_lr: float = 5e-4
    dpo_sft_weight: float = 1.0
    # online (TRL GRPO, Think-J reward)
    online_steps: int = 30
    online_lr: float = 5e-4
    online_generations: int = 4
    online_prompts_per_step: int = 8
    online_max_completion: int = 72
    online_max_rows: int = 256
    online_beta: float = 0.001
    # "seed_set": the seed set's RL rows; "train_pairs": the whole label-only training set, the seed set's pairs
    # included (the paper optimises on HelpSteer2 / HH-RLHF preferences with LIMJ707 mixed in)
    online_data: str = "seed_set"
    # evaluation
    eval_pairs: int = 100
    eval_max_new_tokens: int = 96
    eval_batch: int = 64
    rmbench_items: int = 1
    autoj_items: int = 6


    def __post_init__(self) -> None:
        if self.online_data not in ONLINE_DATA:
            raise ThinkJError(f"demo plan: online_data must be one of {ONLINE_DATA}, got {self.online_data!r}")

PLANS: Registry[DemoPlan] = Registry("demo plan", {})


def uses_bf16(plan: DemoPlan, what: str) -> bool:
    """Whether ``what`` ("training" or "generation") runs in bf16: asked for by the plan and native on this CPU
    (emulated bf16 is slower than fp32, see ``thinkj.train.config.for_cpu``)."""
    from thinkj.train.config import cpu_has_bf16

    wanted = {"training": plan.cpu_bf16, "generation": plan.bf16_generation}[what]
    return wanted and cpu_has_bf16()


def hf_backend_args(plan: DemoPlan, batch_size: int) -> dict[str, Any]:
    """Keyword arguments of every HF backend a demo stage builds for the judge."""
    return {"batch_size": batch_size, "dtype": "bfloat16" if uses_bf16(plan, "generation") else "auto"}


def _fits(current: Any, value: Any) -> bool:
    """Whether an override ``value`` has the type of the plan's ``current`` value (an int is a fine float)."""
    if current is None or value is None:
        return True  # optional fields (difficulty_pairs=None means all)
    if isinstance(current, bool) or isinstance(value, bool):
        return isinstance(current, bool) and isinstance(value, bool)
    if isinstance(current, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(current))


def with_overrides(plan: DemoPlan, items: list[str]) -> DemoPlan:
    """``plan`` with ``field=value`` items applied (``thinkj smoke --set dpo_steps=16``), each value parsed as YAML
    and checked against the field's type, so a sweep changes one budget without editing this file."""
    from dataclasses import fields, replace

    from thinkj.train.config import parse_overrides

    known = {f.name for f in fields(DemoPlan)}
    changes = parse_overrides(items)
    for key, value in changes.items():
        if key not in known:
            raise ThinkJError(f"demo plan: unknown field {key!r} in --set; fields: {', '.join(sorted(known))}")
        current = getattr(plan, key)
        if not _fits(current, value):
            raise ThinkJError(f"demo plan: --set {key}={value!r}: expected a {type(current).__name__} "
                              f"like the plan's {current!r}")
        if isinstance(current, float):
            changes[key] = float(value)
    return replace(plan, **changes)

# The tiny model starts from random weights, hence learning rates far above the paper's (Table 10 is for 7B models).
# Measured (seed 0, 48 training comparisons for the pairs):
#   30 steps x 4 at 3e-3, cosine   -> no well-formed judge answer, no critic-guided pair
#   40 steps x 8 at 5e-3, constant -> well-formed answers, judge right on 6/48, 23 pairs (17 critic positives)
#   On the 204-example seed set (512 synthetic pairs through the selection stages), seed 0:
#     80 steps x 8, constant           -> init 30%, offline 49%, online 58%
#     160 steps x 8, constant (kept)   -> init 29% (44% unparsable), offline 50%, online 66%
#     160 steps x 8, cosine            -> init 62%, offline 57% (DPO below init), online 72%
#   The constant rate leaves the SFT judge half-formed; see experiments/LOG.md for what that means for the table.
# Every 2nd critic example argues the wrong side: a tiny critic trained on right-side examples only learns to judge
# rather than to argue the side it is told, and then writes no negatives (measured: 0 of 43).
PLANS.add("tiny", DemoPlan(model="tiny", profile="tiny", task="fruit"))

# SmolLM2-135M-Instruct on the facts task, sized for ~15 minutes of stage time on 2 idle cores. Cost model: the
# judge prompt is ~265 tokens, ~200 of them shared (the HF backend runs that prefix once per batch), so decoding
# dominates generation; full fine-tuning costs ~2 s per ~270-token sequence in bf16 autocast (cpu_bf16, CPUs with
# native bf16; ~3 s in fp32). The judge's answer is ~50 tokens (at most ~70), so generation budgets are 96 tokens.
# Measured from a fresh clone, seed 0 (experiments/LOG.md), with fp32 generation and 16 judge steps at 5e-5: 862 s of
# stage time (SFT 271, evaluation 283). That judge learned the format, not the comparison (init ~55 %); the probe in
# experiments/LOG.md needed 64 examples x 32 steps at 1e-4 for 90 %. The critic gets 16 steps: with 8 it argued the
# told side on 2 of 16 comparisons (8 rule-based fallback pairs), with 16 on 10 of 16, with 24 on 32 of 32. A larger offline stage
# (24-step critic, 32 comparisons, 16 DPO steps at 5e-5) cost 1050 s and lowered offline to 43 %. With the critic's
# wrong-side examples arguing the side they are told (Task.argue), 32 comparisons and DPO at 1e-4 gave offline 55.0
# after 16 steps and 46.7 (10 % unparsed) after 32: DPO fits the training pairs (reward accuracy 1.0) without
# generalising to held-out facts. Without gradient checkpointing (off below) SFT of judge + critic took 218 s, not 266.
# The judge also generates in bf16 (bf16_generation) and GRPO trains in bf16 autocast (cpu_bf16): 60 held-out
# judgments by the init judge took ~67 s in fp32 (batch 20) and 41 s in bf16 (batch 30; 47 s at 20, 47-58 s at 60),
# with 31 against 33 right; 3 GRPO steps 128 -> 81 s in the demo. A developer run of seed 0 with both (and
# sft_lr=3e-4, which left init at 55.0) took 565 s of stage time instead of 752-862. The time saved goes to the SFT
# judge: 32 steps at 1e-4 (probe G's budget) instead of 16 at 5e-5 took init from 55.0 / pair 20.0 to 76.7 / 53.3
# on seed 0 (developer run, 667 s of stage time); the critic keeps 16 steps, now at 1e-4. Fresh clone of this plan,
# seeds 0-2: init 76.7 / 73.3 / 65.0, offline and online within 6.7 points of init, 663-692 s of stage time. With the
# critic-guided pairs drawn from training pairs outside the seed set (f422c62; before, 11 of 16 were seed-set items):
# offline 78.3 / 75.0 / 70.0, above init on every seed but within noise; 648-674 s of stage time.
# The online stage's GRPO step (2 prompts x 4 rollouts of <= 96 tokens) got cheaper without a plan change: TRL now
# runs the prompts' shared prefix once (generation, reference and loss) and samples from bf16 weights where the loss
# is bf16 autocast (GRPORun.shared_prefix / rollout_bf16): 39.3 -> 17.6 s per step of base SmolLM2, generation then
# 10 of the 18 s (scripts/speed/rl_step.py; experiments/LOG.md "RL step cost on CPU").
PLANS.add("smollm2", DemoPlan(
    model="smollm2", profile="smollm2-135m-instruct", task="facts",
    train_pairs=256, test_pairs=30, base_preview=0,
    # zero-shot the base model writes no verdict within 8 tokens, so the filter keeps (nearly) all: it runs the stage
    difficulty_pairs=40, difficulty_k=3, difficulty_max_new_tokens=8, difficulty_batch=20,
    dedup_threshold=0.95,
    sft_steps=32, critic_steps=16, sft_batch=4, sft_lr=1e-4, sft_scheduler="cosine", sft_warmup=2, cutoff_len=512,
    cpu_bf16=True, bf16_generation=True, gradient_checkpointing=False,
    pair_limit=16, pair_max_new_tokens=96, pair_batch=16,
    dpo_steps=4, dpo_batch=2, dpo_lr=1e-5,
    # GRPO samples its prompts from the whole label-only training set (the seed set's pairs among them), as the
    # paper's online stage reads preference data beyond LIMJ707
    online_steps=3, online_lr=5e-6, online_generations=4, online_prompts_per_step=2, online_max_completion=96,
    online_max_rows=256, online_data="train_pairs",
    eval_pairs=30, eval_max_new_tokens=96, eval_batch=30, rmbench_items=0, autoj_items=0,
))
