"""Demo stages 50-70, the teacher part of data selection: traces from the scripted R1 over HTTP, clip, seed set.

The teacher is :class:`thinkj.synthetic.scripted_teacher.TeacherServer` on 127.0.0.1 (a free port) knowing the plan's
task, reached through the same OpenAI-compatible client a real R1 run uses. It answers wrongly on ~15 % of prompts
and without an explanation on ~10 % (the plan's ``teacher`` settings), so the accuracy filter and trace clipping
both drop items. The stages read the upstream ``selected_pairs`` (difficulty + dedup) when present, else
``train_pairs``.
"""

from __future__ import annotations

from typing import Any

from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer


def teacher_traces(ctx) -> dict[str, Any]:
    from thinkj.data.traces import run_traces

    source = ctx.artifacts.get("selected_pairs") or ctx.artifacts["train_pairs"]
    out = ctx.stage("teacher_traces") / "traces.jsonl"
    with TeacherServer(TeacherConfig(**ctx.plan.teacher, seed=0, task=ctx.plan.task)) as server:
        summary = run_traces(source, out, model=server.model, base_url=server.base_url, api_key_env=None,
                             max_concurrency=8, max_retries=3, timeout=30.0, backoff=0.05, max_backoff=1.0)
    ctx.artifacts["teacher_traces"] = out
    return {k: summary[k] for k in ("n_in", "n_out", "wrong", "unparsable", "failed_calls", "calls")}


def clip(ctx) -> dict[str, Any]:
    from thinkj.data.clip import run_clip

    out = ctx.stage("clip") / "clipped.jsonl"
    summary = run_clip(ctx.artifacts["teacher_traces"], out, tokenizer=str(ctx.artifacts["base_model"]))
    ctx.artifacts["clipped_traces"] = out
    return {"n_in": summary["n_in"], "n_out": summary["n_out"], "dropped_empty": summary["dropped_empty_explanation"],
            "mean_tokens_before": summary["length_before"].get("mean"), "mean_tokens_after": summary["length_after"].get("mean")}


def seed_set(ctx) -> dict[str, Any]:
    from thinkj.data.seed_set import run_seed_set
    from thinkj.data.table1 import table1_counts

    out = ctx.stage("seed_set")
    summary = run_seed_set(ctx.artifacts["clipped_traces"], out, template=ctx.plan.template,
                           critic_template=ctx.plan.critic_template)
    ctx.artifacts["lf_dataset_dir"] = out
    ctx.artifacts["rl_parquet"] = out / "rl.parquet"
    ctx.artifacts["rl_pairs"] = out / "rl_pairs.jsonl"
    table = {label: ours for label, ours, _ in table1_counts(ctx.run_dir)}
    return {"datasets": summary["datasets"], "rl_rows": summary["rl_rows"], "table1": table}
