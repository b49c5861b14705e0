"""Demo stages 30-40 (data selection): difficulty filter with the base model, then embedding dedup (MiniLM).

The base models write no verdict zero-shot (the tiny one is random; SmolLM2 answers "(a)" or nothing), so they fail
nearly every pair and the difficulty filter keeps nearly all of them: the stage runs the real code path (k samples,
cache, parsing, summary), and its summary shows how selective it was. The tiny task has only a few dozen distinct
instructions, so dedup embeds the instruction together with both responses.
"""

from __future__ import annotations

from typing import Any


def difficulty(ctx) -> dict[str, Any]:
    from thinkj.data.difficulty import run_difficulty
    from thinkj.demo.plans import hf_backend_args

    plan = ctx.plan
    out = ctx.stage("difficulty") / "kept.jsonl"
    summary = run_difficulty(ctx.artifacts["train_pairs"], out, model=str(ctx.artifacts["base_model"]), backend="hf",
                             k=plan.difficulty_k, temperature=1.0, max_new_tokens=plan.difficulty_max_new_tokens,
                             seed=ctx.seed, template=plan.template, backend_kwargs=hf_backend_args(plan, plan.difficulty_batch),
                             chunk=128, limit=plan.difficulty_pairs)
    ctx.artifacts["selected_pairs"] = out
    return {k: summary[k] for k in ("n_in", "n_out", "k", "unparsable_samples", "failure_histogram", "cache")}


def dedup(ctx) -> dict[str, Any]:
    from thinkj.data.dedup import run_dedup

    source = ctx.artifacts.get("selected_pairs") or ctx.artifacts["train_pairs"]
    out = ctx.stage("dedup") / "kept.jsonl"
    summary = run_dedup(source, out, threshold=ctx.plan.dedup_threshold, text_field=ctx.plan.dedup_text_field)
    ctx.artifacts["selected_pairs"] = out
    return {k: summary[k] for k in ("n_in", "n_out", "removed", "threshold", "model", "text_field")}
