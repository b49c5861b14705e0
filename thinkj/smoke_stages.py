"""The foundation's smoke stages: tiny model, synthetic data, base judge in both orders."""

from __future__ import annotations

import json
from typing import Any

from thinkj.records import write_jsonl

SMOKE_TRAIN, SMOKE_TEST = 512, 100


def build_model(ctx) -> dict[str, Any]:
    from thinkj.tiny_model import build_tiny_model

    path = build_tiny_model(ctx.stage("tiny_model") / "model", seed=ctx.seed)
    ctx.artifacts["base_model"] = path
    ctx.artifacts.setdefault("models", {})["base"] = path
    return json.loads((path / "thinkj_tiny.json").read_text())


def make_data(ctx) -> dict[str, Any]:
    from thinkj.synthetic import make_pairs

    out = ctx.stage("synthetic_data")
    train = make_pairs(SMOKE_TRAIN, seed=ctx.seed, id_prefix="train")
    test = make_pairs(SMOKE_TEST, seed=ctx.seed + 10_000, id_prefix="test")
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "test.jsonl", test)
    ctx.artifacts.update(train_pairs=out / "train.jsonl", test_pairs=out / "test.jsonl")
    return {"train": len(train), "test": len(test), "label_a": sum(p.label == "a" for p in train)}


def judge_base(ctx) -> dict[str, Any]:
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.judging import accuracy_summary, judge_both_orders
    from thinkj.records import load_pairs

    backend = make_backend("hf", str(ctx.artifacts["base_model"]), batch_size=32)
    pairs = load_pairs(ctx.artifacts["test_pairs"])[:16]
    records = judge_both_orders(backend, pairs, "judge_strength_v2", SamplingParams(max_new_tokens=32))
    write_jsonl(ctx.stage("judge_base") / "judgments.jsonl", records)
    return accuracy_summary(records)
