"""The smoke pipeline's evaluation stage: every trained tiny judge on held-out pairs and real benchmark slices.

    thinkj smoke --only evaluation     # after the earlier stages have run in the same run directory

For each model in ``ctx.artifacts["models"]`` (base / init / offline / online, whichever exist) it judges, in
both orders and greedily, the held-out synthetic pairs and -- when ``../shared/data`` is present -- a few
RM-Bench and Auto-J items. All of a model's prompts go to the backend in ONE generate call (batched by
length inside it), then each benchmark is recorded and scored from the cache without generating again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from thinkj.paths import PROJECT_ROOT

# 4 models x (100 synthetic pairs + 1 RM-Bench item x 9 comparisons + 6 Auto-J pairs) x 2 orders. 100 held-out
# pairs (200 judgments) make a 95% interval of about +-5 points at 80% accuracy: enough to tell the stages apart.
SYNTHETIC_PAIRS, RMBENCH_ITEMS, AUTOJ_ITEMS = 100, 1, 6
BATCH_SIZE = 64  # 2 length-sorted batches per model: decode steps, not rows, dominate on the tiny model
TEMPLATE = "judge_strength_v2"  # the paper's answer format (judge_strength_v1 adds a bias sentence)
ROW_ORDER = ("base", "init", "offline", "online")


def shared_data_dir() -> Path:
    return Path(os.environ.get("THINKJ_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))


def _shortest_items(pairs, n: int, group_field: str):
    """The n items with the least text (one per group first): the smoke run checks plumbing, not the benchmark."""
    from thinkj.evaluation.loaders import take_items

    size: dict[str, int] = {}
    for pair in pairs:
        item = pair.meta["record"]["item_id"]
        size[item] = max(size.get(item, 0), len(pair.instruction) + len(pair.response_a) + len(pair.response_b))
    ordered = sorted(pairs, key=lambda p: size[p.meta["record"]["item_id"]])
    return take_items(ordered, n, group_field)


def benchmark_slices(test_pairs: Path | None) -> dict[str, tuple[list, str]]:
    """{benchmark: (pairs, source)} for the smoke run."""
    from thinkj.evaluation.loaders import load_benchmark

    slices: dict[str, tuple[list, str]] = {}
    if test_pairs is not None:
        slices["synthetic"] = (load_benchmark("synthetic", test_pairs)[:SYNTHETIC_PAIRS], str(test_pairs))
    data = shared_data_dir()
    if (data / "rm-bench").is_dir():
        source = str(data / "rm-bench")
        slices["rmbench"] = (_shortest_items(load_benchmark("rmbench", source), RMBENCH_ITEMS, "domain"), source)
    if (data / "auto-j" / "testdata_pairwise.jsonl").is_file():
        source = str(data / "auto-j" / "testdata_pairwise.jsonl")
        slices["autoj"] = (_shortest_items(load_benchmark("autoj", source), AUTOJ_ITEMS, "scenario"), source)
    return slices


def evaluate(ctx) -> dict[str, Any]:
    from thinkj.evaluation.run import EvalConfig, judge_records, results_document
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.inference.cache import CachedBackend, ResultCache
    from thinkj.judging import judge_both_orders
    from thinkj.records import write_jsonl

    models: dict[str, Path] = ctx.artifacts.get("models") or {}
    if not models:
        raise RuntimeError("no models to evaluate: run the tiny_model stage first (ctx.artifacts['models'])")
    slices = benchmark_slices(ctx.artifacts.get("test_pairs"))
    from thinkj.train.config import generation_budget

    # the tiny model profile's budget (configs/models/tiny.yaml: 96 new tokens)
    params = SamplingParams(temperature=0.0, max_new_tokens=generation_budget("tiny"), seed=ctx.seed)
    results = ctx.artifacts.setdefault("results", {})
    table: dict[str, dict[str, Any]] = {}
    # Only the judges of the Table 4 layout: the critic argues a side it is told, it is not a judge.
    for row in [r for r in ROW_ORDER if r in models]:
        out = ctx.stage("evaluation") / row
        backend = make_backend("hf", str(models[row]), batch_size=BATCH_SIZE)
        cache = ResultCache(out / "cache.sqlite")
        # One generate call over every benchmark's prompts fills the cache; per-benchmark runs below only read it.
        everything = [p for pairs, _ in slices.values() for p in pairs]
        judge_both_orders(CachedBackend(backend, cache, tag=TEMPLATE), everything, TEMPLATE, params)
        results[row] = {}
        table[row] = {}
        for bench, (pairs, source) in slices.items():
            cfg = EvalConfig(bench, str(models[row]), "hf", TEMPLATE, source, None, len(pairs), out, params,
                             {"model": "tiny", "method": row}, chunk_pairs=len(pairs) or 1)
            records = judge_records(backend, pairs, cfg, cache)
            write_jsonl(out / f"{bench}.judgments.jsonl", records)
            document = results_document(cfg, records, source)
            path = out / f"{bench}.results.json"
            path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
            results[row][bench] = path
            metrics = document["metrics"]
            headline = {"synthetic": "accuracy", "rmbench": "overall", "autoj": "agreement"}[bench]
            table[row][bench] = {headline: metrics[headline], "consistency": metrics["position_consistency"],
                                 "parse_failure": metrics["parse_failure"]}
        cache.close()
    _print_table(table)
    return {"models": list(table), "benchmarks": list(slices), "scores": table}


def _print_table(table: dict[str, dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    benches = list(dict.fromkeys(b for row in table.values() for b in row))
    view = Table(title="evaluation (tiny judges; both orders; %)")
    view.add_column("model")
    for bench in benches:
        view.add_column(f"{bench} score / consistency / unparsed", justify="right")
    for row, scores in table.items():
        cells = []
        for bench in benches:
            got = scores.get(bench)
            cells.append("-" if got is None else " / ".join(str(v) for v in got.values()))
        view.add_row(row, *cells)
    Console(stderr=True).print(view)
