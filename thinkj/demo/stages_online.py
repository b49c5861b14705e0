"""Demo stage 110 "online": GRPO with the Think-J reward through TRL (paper §3.2.2), sized by the plan.

    thinkj smoke --model smollm2 --set online_steps=6   # earlier stages reuse their finished outputs

Starts from the SFT-initialised judge (``models["init"]``) when the offline stages ran, else from the base model;
trains on the seed set's ``rl_pairs`` or, with ``plan.online_data = "train_pairs"``, on the whole label-only training
set (the paper optimises on a larger preference set with LIMJ707 mixed in). Registers
``models["online"]`` and writes ``online/curves.png``. verl is the cluster engine; the CPU demo uses TRL.
"""

from __future__ import annotations

from typing import Any


def online(ctx) -> dict[str, Any]:
    from thinkj.demo.plans import uses_bf16
    from thinkj.online.trl_grpo import GRPORun, run_trl_grpo

    plan = ctx.plan
    models = ctx.artifacts.setdefault("models", {})
    start = models.get("init") or models.get("base") or ctx.artifacts["base_model"]
    data = ctx.artifacts["train_pairs"]
    if plan.online_data == "seed_set":  # else "train_pairs" (DemoPlan checks the value)
        data = ctx.artifacts.get("rl_pairs") or data
    out = ctx.stage("online")
    summary = run_trl_grpo(GRPORun(
        model=str(start), data=str(data), out_dir=str(out), preset="thinkj_qwen", template=plan.template, steps=plan.online_steps,
        learning_rate=plan.online_lr, beta=plan.online_beta, num_generations=plan.online_generations,
        prompts_per_step=plan.online_prompts_per_step, max_completion_length=plan.online_max_completion,
        max_rows=plan.online_max_rows, seed=ctx.seed, save_steps=plan.online_steps, device="cpu",
        # TRL turns checkpointing on by default; off, 3 smollm2 steps took 128 instead of 137 s, bitwise the same weights
        # bf16 autocast as in the LlamaFactory stages (cpu_bf16); fp32 master weights
        extra={"gradient_checkpointing": plan.gradient_checkpointing, "bf16": uses_bf16(plan, "training")}))
    models["online"] = out / "model"
    return {"start": str(start), "data": str(data), "steps": summary["steps"], "first_reward": summary["first_reward"],
            "last_reward": summary["last_reward"], "curves": summary["curves"]}
