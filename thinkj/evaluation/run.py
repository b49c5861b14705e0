"""Run a judge on a benchmark: judge every comparison in both orders, write records, score, write results.

Outputs in ``out_dir``: ``<bench>.judgments.jsonl`` (one record per comparison and order),
``<bench>.results.json`` (metrics + tags + provenance, the contract ``thinkj tables`` reads) and
``cache.sqlite`` (every successful generation; a killed run resumes from it and recomputes nothing).
A benchmark with a runner of its own (:mod:`thinkj.evaluation.registry`) is handed to it.

A generation call that failed after the backend's retries (a server that is down, answers 5xx or garbage, or
hangs) is never an answer: it is not cached, its record says ``failed`` (no verdict), the metrics count it
(``n_failed_calls``) and name it in ``missing``, so the results are never ``complete``. Past
``max_failure_rate`` (default 0: any failed call; :mod:`thinkj.inference.failures`) the records and the
incomplete results are still written and :class:`~thinkj.errors.StageIncomplete` is raised (exit status 1).
A rerun asks only for the failed calls and then gives the same numbers as a fresh run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation import results
from thinkj.evaluation.config import SCALAR_BACKEND, EvalConfig
from thinkj.evaluation.failed_calls import check_failed_calls, with_failed_calls
from thinkj.evaluation.registry import Benchmark, get_benchmark, load_benchmark, score
from thinkj.inference import LOCAL_ENGINES
from thinkj.inference.base import InferenceBackend
from thinkj.inference.both_orders import judge_both_orders
from thinkj.inference.cache import CachedBackend, ResultCache
from thinkj.inference.context import PromptBudget, budget_for_backend
from thinkj.inference.failures import check_failure_rate
from thinkj.inference.lazy import LazyBackend
from thinkj.progress import progress_bar
from thinkj.records import PreferencePair, write_jsonl

__all__ = ["EvalConfig", "judge_records", "record_fields", "results_document", "run_eval"]


def record_fields(benchmark: str):
    """The per-pair keys a judgment record carries (benchmark, item id and the benchmark's grouping fields)."""
    def fields(pair: PreferencePair) -> dict[str, Any]:
        return {"benchmark": benchmark, **pair.meta["record"]}

    return fields


def judge_records(backend: InferenceBackend, pairs: list[PreferencePair], cfg: EvalConfig,
                  cache: ResultCache, budget: PromptBudget | None = None) -> list[dict[str, Any]]:
    """Both orders of every pair through the cache, chunk by chunk, so an interrupted run loses one chunk at most.
    Pairs whose prompt + budget exceed the context (``budget``) are recorded ``too_long``, never generated."""
    cached = CachedBackend(backend, cache, tag=cfg.template)
    records: list[dict[str, Any]] = []
    fields = record_fields(cfg.benchmark)
    with progress_bar(f"judge {cfg.benchmark} (chunks of {cfg.chunk_pairs} pairs)", total=len(pairs)) as advance:
        for start in range(0, len(pairs), cfg.chunk_pairs):
            chunk = pairs[start:start + cfg.chunk_pairs]
            records += judge_both_orders(cached, chunk, cfg.template, cfg.params, strict=False, fields=fields,
                                         budget=budget)
            advance(len(chunk))
    # what a rerun reused: a run served wholly from the cache says "0 generated" (and loaded no model)
    print(f"{cfg.benchmark}: {cached.hits} answers from the cache, {cached.misses} generated", file=sys.stderr)
    return records


def results_document(cfg: EvalConfig, records: list[dict[str, Any]], source: str | None,
                     scorer_kind: str | None = None) -> dict[str, Any]:
    """Score pair judgment records and wrap the metrics with tags and provenance."""
    n_items = len({str(r["item_id"]) for r in records})
    metrics = with_failed_calls(score(cfg.benchmark, records, cfg.protocol, cfg.unparsed_half), records)
    return results.results_document(cfg, metrics, source, n_items, scorer_kind)


def run_eval(cfg: EvalConfig, *, backend: InferenceBackend | None = None,
             pairs: list[PreferencePair] | None = None, budget: PromptBudget | None = None) -> Path:
    """Judge, record, score; returns the results JSON path. ``backend``/``pairs``/``budget`` let callers reuse
    loaded ones; without a ``budget`` the named backend's is built (tokenizer + context length). A second run of the
    same benchmark into the same ``out_dir`` waits for the first (:meth:`EvalConfig.writing`)."""
    check_failure_rate(cfg.max_failure_rate)
    bench = get_benchmark(cfg.benchmark)
    if cfg.data_parallel > 1 and (backend is not None or cfg.backend not in LOCAL_ENGINES or bench.run is not None):
        raise ThinkJError(f"--data-parallel {cfg.data_parallel}: only for a judge this node loads (--backend "
                          f"{' or '.join(LOCAL_ENGINES)}) on a benchmark of pairs"
                          + (f" ({cfg.benchmark} has a runner of its own)" if bench.run is not None else ""))
    if bench.run is not None:  # items that are not pairs (RewardBench 2): its own runner, records and failure rule
        return bench.run(cfg, backend=backend)
    if pairs is None:
        pairs = load_benchmark(cfg.benchmark, cfg.data, cfg.split, cfg.limit)  # bad input: fails before out_dir is made
    with cfg.writing():
        return _judge_and_score(cfg, bench, backend, pairs, budget)


def _judge_and_score(cfg: EvalConfig, bench: Benchmark, backend: InferenceBackend | None, pairs: list[PreferencePair],
                     budget: PromptBudget | None) -> Path:
    source = cfg.data if cfg.data is not None else bench.default_source
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(out / "cache.sqlite")
    scorer_kind = None
    try:
        if cfg.backend == SCALAR_BACKEND:
            from thinkj.evaluation.scalar import ScalarScorer, scalar_records

            scorer = ScalarScorer(cfg.model, **cfg.backend_kwargs)
            scorer_kind = scorer.kind
            records = scalar_records(scorer, pairs, cache, fields=record_fields(cfg.benchmark))
        else:
            if cfg.data_parallel > 1:  # generate in workers first; the pass below then finds every call cached
                cache.close()
                _generate_sharded(cfg, len(pairs), out / "cache.sqlite")
                cache = ResultCache(out / "cache.sqlite")
            if backend is None:
                backend = LazyBackend(cfg.backend, cfg.model, cfg.backend_kwargs, also=(SCALAR_BACKEND,))
                if budget is None:
                    budget = budget_for_backend(cfg.backend, cfg.model, cfg.backend_kwargs,
                                                context_length=cfg.context_length, tokenizer=cfg.tokenizer)
                    if budget is None:
                        print(f"warning: no local tokenizer for {cfg.model!r}: prompt tokens are not counted "
                              "(pass --tokenizer); the server's refusals count as failed calls", file=sys.stderr)
            records = judge_records(backend, pairs, cfg, cache, budget)
    finally:
        cache.close()
    write_jsonl(out / f"{cfg.benchmark}.judgments.jsonl", records)
    path = results.write_results(out, results_document(cfg, records, source, scorer_kind))
    check_failed_calls(cfg, records, path)
    return path


def _job(cfg: EvalConfig) -> dict[str, Any]:
    """What a data-parallel worker needs to rebuild the run's pairs, prompts, sampling and budget."""
    return {"benchmark": cfg.benchmark, "data": cfg.data, "split": cfg.split, "limit": cfg.limit, "model": cfg.model,
            "backend": cfg.backend, "backend_kwargs": dict(cfg.backend_kwargs), "template": cfg.template,
            "params": cfg.params.to_dict(), "chunk_pairs": cfg.chunk_pairs, "context_length": cfg.context_length,
            "tokenizer": cfg.tokenizer}


def _generate_sharded(cfg: EvalConfig, n_pairs: int, cache: Path) -> None:
    from thinkj.inference.data_parallel import run_sharded

    run_sharded("eval", _job(cfg), n_items=n_pairs, workers=cfg.data_parallel,
                tp=int(cfg.backend_kwargs.get("tensor_parallel_size", 1)), cache=cache)


def generate_shard(job: dict[str, Any], index: int, count: int, cache: ResultCache) -> None:
    """One data-parallel worker of :func:`run_eval`: both orders of the pairs of shard ``index`` of ``count`` into
    ``cache`` (:mod:`thinkj.inference.data_parallel`)."""
    from thinkj.inference.base import SamplingParams
    from thinkj.inference.data_parallel import shard_bounds

    cfg = EvalConfig(job["benchmark"], job["model"], job["backend"], job["template"], job["data"], job["split"],
                     job["limit"], params=SamplingParams(**job["params"]), chunk_pairs=job["chunk_pairs"],
                     backend_kwargs=job["backend_kwargs"], context_length=job["context_length"],
                     tokenizer=job["tokenizer"])
    pairs = load_benchmark(cfg.benchmark, cfg.data, cfg.split, cfg.limit)
    start, end = shard_bounds(len(pairs), index, count)
    budget = budget_for_backend(cfg.backend, cfg.model, cfg.backend_kwargs, context_length=cfg.context_length,
                                tokenizer=cfg.tokenizer)
    records = judge_records(LazyBackend(cfg.backend, cfg.model, cfg.backend_kwargs), pairs[start:end], cfg, cache,
                            budget)
    print(f"shard {index + 1}/{count}: pairs {start}-{end - 1}, {len(records)} judgments", flush=True)
