"""Difficulty filter (paper §3.1): judge every pair k times and keep the pairs the judge gets wrong at least once.

A sample counts as a failure when its verdict differs from the label, including an unparsable answer
(choice ``none``): both show the judge is not yet reliable on that pair. Pairs are judged as stored (the
loader has already shuffled positions) with the chosen template, ``k`` samples per pair at the given
temperature (the paper samples three judgments; with temperature 0 the k samples coincide, so sampling
is what makes k > 1 informative).

Generation goes through :class:`~thinkj.inference.cache.CachedBackend` in chunks, so an interrupted
run resumes where it stopped and a finished run reruns for free. Outputs: kept pairs (JSONL, with
``meta.difficulty``), every judgment (JSONL) and a summary JSON (counts in/out, failure histogram,
per-pair failure counts).

The generation budget defaults to the model profile's (``configs/models/*.yaml`` max_new_tokens, 4,096), as
in evaluation, and the same too-long rule applies (``thinkj.inference.context``): a pair whose prompt plus
budget exceeds the judge's context is not judged, not kept, and counted (``too_long_skipped``).

A generation call that failed after the backend's retries is never a wrong answer: a pair with a failed sample is
not judged, not kept and counted (``failed_pairs``; ``calls`` in the summary). The failure rule of
:mod:`thinkj.inference.failures` applies: past ``max_failure_rate`` (default 0: any failed call) the outputs are
written and :class:`~thinkj.errors.StageIncomplete` is raised (exit status 1); failed calls are not cached, so a
rerun asks only for them. A filter that keeps nothing of a non-empty input fails the same way, with the reason:
every pair a tie, every pair too long for the judge's context (lower the budget), or no pair judged wrong.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from thinkj.errors import StageIncomplete, ThinkJError
from thinkj.inference.base import InferenceBackend, SamplingParams
from thinkj.inference.cache import CachedBackend, ResultCache
from thinkj.inference.context import PromptBudget, budget_for_backend
from thinkj.inference.failures import CallTally, FailedCall, check_failure_rate
from thinkj.progress import progress_bar
from thinkj.prompts import get_template
from thinkj.records import PreferencePair, load_pairs, write_json, write_jsonl
from thinkj.verdict_parser import parse_verdict

DEFAULT_CHUNK = 64  # pairs per generate call: each finished chunk is in the cache before the next starts


def judge_k_times(backend: InferenceBackend, pairs: list[PreferencePair], template: str, params: SamplingParams, *,
                  strict: bool = False, chunk: int = DEFAULT_CHUNK,
                  budget: PromptBudget | None = None) -> list[list[dict[str, Any]]]:
    """For each pair, ``params.n`` judgment records (verdict, strength, correct, raw output); an empty list for
    a pair whose prompt does not fit ``budget`` (not generated). A sample whose call failed after the backend's
    retries is a record with ``failed`` (and its ``error``), no verdict and ``correct`` None: neither right nor
    wrong."""
    tmpl = get_template(template)
    results: list[list[dict[str, Any]]] = []
    with progress_bar(f"difficulty ({template}, k={params.n})", total=len(pairs)) as advance:
        for start in range(0, len(pairs), chunk):
            batch = pairs[start:start + chunk]
            prompts = [tmpl.render(p) for p in batch]
            fits = budget.fits(prompts, params.max_new_tokens) if budget is not None else [True] * len(batch)
            generated = iter(backend.generate([m for m, ok in zip(prompts, fits) if ok], params) if any(fits) else [])
            outputs = [next(generated) if ok else [] for ok in fits]
            for pair, samples in zip(batch, outputs):
                records = []
                for k, text in enumerate(samples):
                    if isinstance(text, FailedCall):
                        records.append({"item_id": pair.id, "sample": k, "gold": pair.label, "verdict": None,
                                        "strength": None, "well_formed": False, "correct": None, "output": None,
                                        "failed": True, "error": text.error})
                        continue
                    verdict = parse_verdict(text, tmpl.answer, strict=strict)
                    records.append({"item_id": pair.id, "sample": k, "gold": pair.label, "verdict": verdict.choice,
                                    "strength": verdict.strength, "well_formed": verdict.well_formed,
                                    "correct": verdict.choice == pair.label, "output": text, "failed": False})
                results.append(records)
            advance(len(batch))
    return results


def run_difficulty(in_path: str | os.PathLike, out_path: str | os.PathLike, *, model: str, backend: str = "hf",
                   template: str = "judge_strength_v2", k: int = 3, temperature: float = 1.0, top_p: float = 1.0,
                   max_new_tokens: int | None = None, seed: int = 0, min_failures: int = 1, strict: bool = False,
                   cache_path: str | os.PathLike | None = None, backend_kwargs: dict[str, Any] | None = None,
                   backend_obj: InferenceBackend | None = None, limit: int | None = None,
                   chunk: int = DEFAULT_CHUNK, context_length: int | None = None,
                   budget: PromptBudget | None = None, max_failure_rate: float = 0.0,
                   data_parallel: int = 1) -> dict[str, Any]:
    """Judge each pair ``k`` times; write pairs with at least ``min_failures`` failures and a summary.

    ``backend_obj`` passes a ready backend (tests, or a caller that judges several files with one engine);
    otherwise ``make_backend(backend, model, **backend_kwargs)``. ``data_parallel`` > 1 generates first in that
    many worker processes, each on its own GPUs over a contiguous shard of the pairs
    (:mod:`thinkj.inference.data_parallel`); the outputs are then written by the one pass below, from the cache.
    Tie pairs cannot be judged wrong by an a/b judge in a meaningful way, so they are left out and counted. Failed
    calls past ``max_failure_rate``, or an output that keeps nothing, raise :class:`StageIncomplete` once the
    outputs are written.
    """
    from thinkj.checks import (
        check_distinct_paths,
        check_output_file,
        check_range,
        check_sampling,
        check_template_kind,
    )
    from thinkj.inference import LOCAL_ENGINES, check_backend_args, make_backend
    from thinkj.models.profiles import generation_budget

    budget_option = "--max-new-tokens" if max_new_tokens is not None else "--max-new-tokens (the model profile's default)"
    if max_new_tokens is None:
        max_new_tokens = generation_budget()

    out_path = Path(out_path)
    check_sampling(temperature, top_p, max_new_tokens, k)
    check_range("--min-failures", min_failures, low=1, high=k)  # more failures than samples keeps nothing
    check_range("--limit", limit, low=1)
    check_range("--chunk", chunk, low=1)
    check_range("--data-parallel", data_parallel, low=1)
    check_template_kind("--template", template, ("judge", "direct"))
    check_distinct_paths("--in", in_path, "--out", out_path)
    check_output_file("--out", out_path)
    check_failure_rate(max_failure_rate)
    if backend_obj is None:
        check_backend_args(backend, backend_kwargs or {})
    pairs = load_pairs(in_path)[:limit] if limit else load_pairs(in_path)
    ties = [p for p in pairs if p.label == "tie"]
    judged = [p for p in pairs if p.label != "tie"]
    if not judged:  # nothing could be kept: say so before any model loads
        raise ThinkJError(f"--in {in_path}: " + (f"every one of its {len(pairs)} pairs is a tie; the difficulty "
                                                 "filter judges a/b pairs only" if pairs else "holds no pairs"))
    params = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, n=k, seed=seed)
    if backend_obj is None:
        if backend in LOCAL_ENGINES:  # a missing model says so, before its tokenizer is asked for the budget
            from thinkj.inference.identity import check_model_source
            from thinkj.models import resolve_model

            check_model_source(str(resolve_model(model)), (backend_kwargs or {}).get("revision"))
        if budget is None:
            budget = budget_for_backend(backend, model, backend_kwargs or {}, context_length=context_length)
    if budget is not None and max_new_tokens >= budget.context_length:  # before the model loads
        raise ThinkJError(_too_long(budget_option, max_new_tokens, budget.context_length, len(judged)))
    cache_file = Path(cache_path or out_path.with_suffix(".cache.sqlite"))
    if data_parallel > 1:
        if backend_obj is not None or backend not in LOCAL_ENGINES:
            raise ThinkJError(f"--data-parallel {data_parallel}: only for a model this node loads (--backend "
                              f"{' or '.join(LOCAL_ENGINES)}); a server is parallel by itself")
        from thinkj.inference.data_parallel import run_sharded
        from thinkj.inference.lazy import LazyBackend

        out_path.parent.mkdir(parents=True, exist_ok=True)
        job = {"in_path": str(in_path), "limit": limit, "model": model, "backend": backend,
               "backend_kwargs": backend_kwargs or {}, "template": template, "params": params.to_dict(),
               "strict": strict, "chunk": chunk, "context_length": context_length}
        run_sharded("difficulty", job, n_items=len(judged), workers=data_parallel,
                    tp=int((backend_kwargs or {}).get("tensor_parallel_size", 1)), cache=cache_file)
        engine = LazyBackend(backend, model, backend_kwargs or {})  # every generation is cached now: no model loads
    else:
        engine = backend_obj or make_backend(backend, model, **(backend_kwargs or {}))  # a bad model fails before any write
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(cache_file)
    cached = CachedBackend(engine, cache, tag=template)
    try:
        per_pair = judge_k_times(cached, judged, template, params, strict=strict, chunk=chunk, budget=budget)
    finally:
        cache.close()
    calls = CallTally()
    for recs in per_pair:
        for r in recs:
            calls.record(r["failed"], r.get("error"))
    all_records = [r for recs in per_pair for r in recs]
    too_long = [p.id for p, recs in zip(judged, per_pair) if not recs]
    failed_pairs = [p.id for p, recs in zip(judged, per_pair) if any(r["failed"] for r in recs)]
    # a pair with a failed sample is not judged: its right/wrong count would differ from a run where the call answered
    fitted = [(p, recs) for p, recs in zip(judged, per_pair) if recs and not any(r["failed"] for r in recs)]
    judged, per_pair = [p for p, _ in fitted], [recs for _, recs in fitted]
    failures = {p.id: sum(not r["correct"] for r in recs) for p, recs in zip(judged, per_pair)}
    unparsable = sum(r["verdict"] == "none" for recs in per_pair for r in recs)
    kept = []
    for pair in judged:
        if failures[pair.id] >= min_failures:
            meta = {**pair.meta, "difficulty": {"failures": failures[pair.id], "k": k, "model": engine.name}}
            kept.append(PreferencePair(pair.id, pair.source, pair.messages, pair.response_a, pair.response_b,
                                       pair.label, pair.strength, meta))
    write_jsonl(out_path, kept)
    write_jsonl(out_path.with_suffix(".judgments.jsonl"), all_records)
    histogram = Counter(failures.values())
    summary = {
        "stage": "difficulty", "input": str(in_path), "output": str(out_path), "n_in": len(pairs), "n_out": len(kept),
        "ties_skipped": len(ties), "too_long_skipped": len(too_long), "failed_pairs": len(failed_pairs),
        "calls": {**calls.summary(), "max_failure_rate": max_failure_rate},
        "k": k, "min_failures": min_failures, "model": engine.name, "backend": backend,
        "template": template, "sampling": params.to_dict(), "strict": strict,
        "samples": sum(len(r) for r in per_pair), "unparsable_samples": unparsable,
        "sample_accuracy": (sum(r["correct"] for recs in per_pair for r in recs) / max(1, sum(len(r) for r in per_pair))),
        "failure_histogram": {str(f): histogram.get(f, 0) for f in range(k + 1)},
        "cache": {"hits": cached.hits, "generated": cached.misses},
        "failures_per_pair": failures,
    }
    write_json(out_path.with_suffix(".summary.json"), summary)
    calls.check(str(out_path), max_failure_rate, written=f"{len(kept)} kept pairs, the judgments and the summary "
                                                        "are written; a pair with a failed call is not kept.")
    if not kept:
        raise StageIncomplete(f"{out_path}: kept no pair of {len(pairs)}: " + _why_empty(
            summary, budget_option, max_new_tokens, budget.context_length if budget is not None else None))
    return summary


def generate_shard(job: dict[str, Any], index: int, count: int, cache: ResultCache) -> None:
    """One data-parallel worker of :func:`run_difficulty`: judge shard ``index`` of ``count`` of the judged pairs
    into ``cache`` (:mod:`thinkj.inference.data_parallel`), with the prompts, sampling and budget of the main pass."""
    from thinkj.inference.data_parallel import shard_bounds
    from thinkj.inference.lazy import LazyBackend

    pairs = load_pairs(job["in_path"])
    judged = [p for p in (pairs[:job["limit"]] if job["limit"] else pairs) if p.label != "tie"]
    start, end = shard_bounds(len(judged), index, count)
    budget = budget_for_backend(job["backend"], job["model"], job["backend_kwargs"],
                                context_length=job["context_length"])
    engine = LazyBackend(job["backend"], job["model"], job["backend_kwargs"])  # a shard already cached loads nothing
    cached = CachedBackend(engine, cache, tag=job["template"])
    judge_k_times(cached, judged[start:end], job["template"], SamplingParams(**job["params"]), strict=job["strict"],
                  chunk=job["chunk"], budget=budget)
    print(f"shard {index + 1}/{count}: pairs {start}-{end - 1}, {cached.hits} cached and {cached.misses} generated "
          f"samples, {cached.failures} failed calls", flush=True)


def _too_long(option: str, max_new_tokens: int, context: int, n: int) -> str:
    return (f"{option} {max_new_tokens}: every one of the {n} pairs is too long for the model's context "
            f"({context} tokens), the generation budget alone filling it or more: lower --max-new-tokens "
            "(or pass --context-length when the judge's real context is longer)")


def _why_empty(summary: dict[str, Any], option: str, max_new_tokens: int, context: int | None) -> str:
    """Why a filter kept nothing: nothing fitted, nothing was judged, or no pair was judged wrong often enough."""
    if summary["too_long_skipped"] and not summary["failed_pairs"] and not summary["samples"]:
        return (f"every pair was too long for the model's context ({context} tokens) with {option} {max_new_tokens} "
                f"({summary['ties_skipped']} ties left out): lower --max-new-tokens")
    if not summary["samples"]:
        return (f"no pair was judged ({summary['too_long_skipped']} too long for the context, "
                f"{summary['failed_pairs']} with failed calls, {summary['ties_skipped']} ties)")
    return (f"none of the {len(summary['failures_per_pair'])} judged pairs was judged wrong in at least "
            f"--min-failures {summary['min_failures']} of its {summary['k']} samples (sample accuracy "
            f"{summary['sample_accuracy']:.0%}): the output is empty; lower --min-failures or sample at a higher "
            "--temperature")
