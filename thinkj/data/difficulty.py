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
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from thinkj.inference.base import InferenceBackend, SamplingParams
from thinkj.inference.cache import CachedBackend, ResultCache
from thinkj.inference.context import PromptBudget, budget_for_backend
from thinkj.progress import progress_bar
from thinkj.prompts import get_template
from thinkj.records import PreferencePair, load_pairs, write_json, write_jsonl
from thinkj.verdict import parse_verdict

DEFAULT_CHUNK = 64  # pairs per generate call: each finished chunk is in the cache before the next starts


def judge_k_times(backend: InferenceBackend, pairs: list[PreferencePair], template: str, params: SamplingParams, *,
                  strict: bool = False, chunk: int = DEFAULT_CHUNK,
                  budget: PromptBudget | None = None) -> list[list[dict[str, Any]]]:
    """For each pair, ``params.n`` judgment records (verdict, strength, correct, raw output); an empty list for
    a pair whose prompt does not fit ``budget`` (not generated)."""
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
                    verdict = parse_verdict(text, tmpl.answer, strict=strict)
                    records.append({"item_id": pair.id, "sample": k, "gold": pair.label, "verdict": verdict.choice,
                                    "strength": verdict.strength, "well_formed": verdict.well_formed,
                                    "correct": verdict.choice == pair.label, "output": text})
                results.append(records)
            advance(len(batch))
    return results


def run_difficulty(in_path: str | os.PathLike, out_path: str | os.PathLike, *, model: str, backend: str = "hf",
                   template: str = "judge_strength_v2", k: int = 3, temperature: float = 1.0, top_p: float = 1.0,
                   max_new_tokens: int | None = None, seed: int = 0, min_failures: int = 1, strict: bool = False,
                   cache_path: str | os.PathLike | None = None, backend_kwargs: dict[str, Any] | None = None,
                   backend_obj: InferenceBackend | None = None, limit: int | None = None,
                   chunk: int = DEFAULT_CHUNK, context_length: int | None = None,
                   budget: PromptBudget | None = None) -> dict[str, Any]:
    """Judge each pair ``k`` times; write pairs with at least ``min_failures`` failures and a summary.

    ``backend_obj`` passes a ready backend (tests, or a caller that judges several files with one engine);
    otherwise ``make_backend(backend, model, **backend_kwargs)``. Tie pairs cannot be judged wrong by an a/b
    judge in a meaningful way, so they are left out and counted.
    """
    from thinkj.checks import (
        check_backend_args,
        check_distinct_paths,
        check_output_file,
        check_range,
        check_sampling,
        check_template_kind,
    )
    from thinkj.inference import make_backend
    from thinkj.train.config import generation_budget

    if max_new_tokens is None:
        max_new_tokens = generation_budget()

    out_path = Path(out_path)
    check_sampling(temperature, top_p, max_new_tokens, k)
    check_range("--min-failures", min_failures, low=1, high=k)  # more failures than samples keeps nothing
    check_range("--limit", limit, low=1)
    check_range("--chunk", chunk, low=1)
    check_template_kind("--template", template, ("judge", "direct"))
    check_distinct_paths("--in", in_path, "--out", out_path)
    check_output_file("--out", out_path)
    if backend_obj is None:
        check_backend_args(backend, backend_kwargs or {})
    pairs = load_pairs(in_path)[:limit] if limit else load_pairs(in_path)
    ties = [p for p in pairs if p.label == "tie"]
    judged = [p for p in pairs if p.label != "tie"]
    params = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, n=k, seed=seed)
    engine = backend_obj or make_backend(backend, model, **(backend_kwargs or {}))  # a bad model fails before any write
    out_path.parent.mkdir(parents=True, exist_ok=True)
    cache = ResultCache(cache_path or out_path.with_suffix(".cache.sqlite"))
    if budget is None and backend_obj is None:
        budget = budget_for_backend(backend, model, backend_kwargs or {}, context_length=context_length)
    cached = CachedBackend(engine, cache, tag=template)
    try:
        per_pair = judge_k_times(cached, judged, template, params, strict=strict, chunk=chunk,
                                 budget=budget) if judged else []
    finally:
        cache.close()
    too_long = [p.id for p, recs in zip(judged, per_pair) if not recs]
    fitted = [(p, recs) for p, recs in zip(judged, per_pair) if recs]
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
    write_jsonl(out_path.with_suffix(".judgments.jsonl"), (r for recs in per_pair for r in recs))
    histogram = Counter(failures.values())
    summary = {
        "stage": "difficulty", "input": str(in_path), "output": str(out_path), "n_in": len(pairs), "n_out": len(kept),
        "ties_skipped": len(ties), "too_long_skipped": len(too_long),
        "k": k, "min_failures": min_failures, "model": engine.name, "backend": backend,
        "template": template, "sampling": params.to_dict(), "strict": strict,
        "samples": sum(len(r) for r in per_pair), "unparsable_samples": unparsable,
        "sample_accuracy": (sum(r["correct"] for recs in per_pair for r in recs) / max(1, sum(len(r) for r in per_pair))),
        "failure_histogram": {str(f): histogram.get(f, 0) for f in range(k + 1)},
        "cache": {"hits": cached.hits, "generated": cached.misses},
        "failures_per_pair": failures,
    }
    write_json(out_path.with_suffix(".summary.json"), summary)
    return summary
