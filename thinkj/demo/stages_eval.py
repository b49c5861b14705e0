"""Demo stage 120: every judge of the run on the held-out pairs (and, in the tiny plan, real benchmark slices).

    thinkj smoke --model smollm2 --run-dir runs/demo   # again: finished training stages and judged prompts are reused

For each model in ``ctx.artifacts["models"]`` (base / init / offline / online, whichever exist) it judges, in
both orders and greedily, the held-out synthetic pairs and -- when ``../shared/data`` is present -- a few
RM-Bench and Auto-J items. All of a model's prompts go to the backend in ONE generate call (batched by
length inside it), then each benchmark is recorded and scored from the cache without generating again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from thinkj.paths import PROJECT_ROOT
from thinkj.records import write_json

# Sizes are the plan's (eval_pairs, rmbench_items, autoj_items, eval_max_new_tokens, eval_batch). The tiny plan judges
# 100 held-out pairs + 1 RM-Bench item x 9 comparisons + 6 Auto-J pairs per model, both orders.
ROW_ORDER = ("base", "init", "offline", "online")


def shared_data_dir() -> Path:
    return Path(os.environ.get("THINKJ_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))


def _shortest_items(pairs, n: int, group_field: str):
    """The n items with the least text (one per group first): the smoke run checks plumbing, not the benchmark."""
    from thinkj.evaluation.rows import take_items

    size: dict[str, int] = {}
    for pair in pairs:
        item = pair.meta["record"]["item_id"]
        size[item] = max(size.get(item, 0), len(pair.instruction) + len(pair.response_a) + len(pair.response_b))
    ordered = sorted(pairs, key=lambda p: size[p.meta["record"]["item_id"]])
    return take_items(ordered, n, group_field)


def benchmark_slices(test_pairs: Path | None, plan) -> dict[str, tuple[list, str]]:
    """{benchmark: (pairs, source)} for the demo run."""
    from thinkj.evaluation.registry import load_benchmark

    slices: dict[str, tuple[list, str]] = {}
    if test_pairs is not None:
        slices["synthetic"] = (load_benchmark("synthetic", test_pairs)[:plan.eval_pairs], str(test_pairs))
    data = shared_data_dir()
    if plan.rmbench_items and (data / "rm-bench").is_dir():
        source = str(data / "rm-bench")
        slices["rmbench"] = (_shortest_items(load_benchmark("rmbench", source), plan.rmbench_items, "domain"), source)
    if plan.autoj_items and (data / "auto-j" / "testdata_pairwise.jsonl").is_file():
        source = str(data / "auto-j" / "testdata_pairwise.jsonl")
        slices["autoj"] = (_shortest_items(load_benchmark("autoj", source), plan.autoj_items, "scenario"), source)
    return slices


def evaluate(ctx) -> dict[str, Any]:
    from thinkj.demo.plans import hf_backend_args
    from thinkj.evaluation.run import EvalConfig, judge_records, results_document
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.inference.both_orders import judge_both_orders
    from thinkj.inference.cache import CachedBackend, ResultCache
    from thinkj.records import write_jsonl

    models: dict[str, Path] = ctx.artifacts.get("models") or {}
    if not models:
        raise RuntimeError("no models to evaluate: run the tiny_model stage first (ctx.artifacts['models'])")
    plan = ctx.plan
    slices = benchmark_slices(ctx.artifacts.get("test_pairs"), plan)
    params = SamplingParams(temperature=0.0, max_new_tokens=plan.eval_max_new_tokens, seed=ctx.seed)
    results = ctx.artifacts.setdefault("results", {})
    table: dict[str, dict[str, Any]] = {}
    # Only the judges of the Table 4 layout: the critic argues a side it is told, it is not a judge.
    for row in [r for r in ROW_ORDER if r in models]:
        out = ctx.stage("evaluation") / row
        backend_args = hf_backend_args(plan, plan.eval_batch)
        backend = make_backend("hf", str(models[row]), **backend_args)
        cache = ResultCache(out / "cache.sqlite")
        # One generate call over every benchmark's prompts fills the cache; per-benchmark runs below only read it.
        everything = [p for pairs, _ in slices.values() for p in pairs]
        judge_both_orders(CachedBackend(backend, cache, tag=plan.template), everything, plan.template, params)
        results[row] = {}
        table[row] = {}
        for bench, (pairs, source) in slices.items():
            cfg = EvalConfig(bench, str(models[row]), "hf", plan.template, source, None, len(pairs), out, params,
                             {"model": plan.model, "method": row}, chunk_pairs=len(pairs) or 1,
                             backend_kwargs=backend_args)  # recorded in the results' provenance (dtype)
            records = judge_records(backend, pairs, cfg, cache)
            write_jsonl(out / f"{bench}.judgments.jsonl", records)
            ctx.artifacts.setdefault("judgments", {}).setdefault(row, {})[bench] = out / f"{bench}.judgments.jsonl"
            document = results_document(cfg, records, source)
            path = out / f"{bench}.results.json"
            write_json(path, document)
            results[row][bench] = path
            metrics = document["metrics"]
            headline = {"synthetic": "accuracy", "rmbench": "overall", "autoj": "agreement"}[bench]
            table[row][bench] = {headline: metrics[headline], "consistency": metrics["position_consistency"],
                                 "parse_failure": metrics["parse_failure"]}
        cache.close()
    return {"models": list(table), "benchmarks": list(slices), "scores": table}
