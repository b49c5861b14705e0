"""Demo stages 10-25: the base model, the task's train / held-out pairs, and (tiny plan) a first look at the base judge."""

from __future__ import annotations

import json
from typing import Any

from thinkj.records import write_jsonl


def build_model(ctx) -> dict[str, Any]:
    """The tiny model is built from a seed; a catalog model (SmolLM2) is fetched once into the cache."""
    if ctx.plan.model == "tiny":
        from thinkj.models.tiny import build_tiny_model

        path = build_tiny_model(ctx.stage("tiny_model") / "model", seed=ctx.seed)
        info = json.loads((path / "thinkj_tiny.json").read_text())
    else:
        from thinkj.models.catalog import DONE_MARKER
        from thinkj.models.fetch import fetch_model

        path = fetch_model(ctx.plan.model, log=lambda msg: print(msg, flush=True))
        record = json.loads((path / DONE_MARKER).read_text())
        info = {k: record[k] for k in ("name", "wheel", "parameters")}
    ctx.artifacts["base_model"] = path
    ctx.artifacts.setdefault("models", {})["base"] = path
    return info


def make_data(ctx) -> dict[str, Any]:
    from thinkj.synthetic.tasks import get_task

    task = get_task(ctx.plan.task)
    out = ctx.stage("synthetic_data")
    train = task.make_pairs(ctx.plan.train_pairs, ctx.seed, "train")
    test = task.make_pairs(ctx.plan.test_pairs, ctx.seed, "test")
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "test.jsonl", test)
    ctx.artifacts.update(train_pairs=out / "train.jsonl", test_pairs=out / "test.jsonl")
    summary = {"task": task.name, "train": len(train), "test": len(test), "label_a": sum(p.label == "a" for p in train)}
    if hasattr(task.module, "split_report"):
        summary["split"] = task.module.split_report()
    return summary


def judge_base(ctx) -> dict[str, Any]:
    from thinkj.demo.plans import hf_backend_args
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.inference.both_orders import accuracy_summary, judge_both_orders
    from thinkj.records import load_pairs

    backend = make_backend("hf", str(ctx.artifacts["base_model"]), **hf_backend_args(ctx.plan, 32))
    pairs = load_pairs(ctx.artifacts["test_pairs"])[:ctx.plan.base_preview]
    records = judge_both_orders(backend, pairs, ctx.plan.template, SamplingParams(max_new_tokens=32))
    write_jsonl(ctx.stage("judge_base") / "judgments.jsonl", records)
    return accuracy_summary(records)
