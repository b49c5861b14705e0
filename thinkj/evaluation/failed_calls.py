"""Failed generation calls in judgment records: how results count them and when a run stops.

A record whose generation call failed after the backend's retries says ``failed`` (with ``error``; no output, no
verdict). :func:`with_failed_calls` adds their count to a benchmark's metrics, names them in ``missing`` and clears
``complete`` -- the same from ``eval run`` and from ``eval score`` on its records. :func:`check_failed_calls`
applies the rule of :mod:`thinkj.inference.failures` once the records and the results are written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from thinkj.evaluation.config import EvalConfig
from thinkj.inference.failures import CallTally

FAILED_CALLS_RULE = ("judgments whose generation call failed after the backend's retries: not judged (no verdict, "
                     "never cached); any makes the run incomplete, and a rerun asks only for them")


def failed_call_tally(records: list[dict[str, Any]]) -> CallTally:
    """Calls behind the records (too-long ones were never made) and the failed ones, with the first error."""
    tally = CallTally()
    for r in records:
        if not r.get("too_long"):
            tally.record(bool(r.get("failed")), r.get("error"))
    return tally


def with_failed_calls(metrics: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """``metrics`` plus ``n_failed_calls`` and its rule; failed calls go into ``missing`` and clear ``complete``.
    The same from the run and from ``eval score`` on its records."""
    tally = failed_call_tally(records)
    metrics = {**metrics, "n_failed_calls": tally.failed, "failed_calls_rule": FAILED_CALLS_RULE}
    if tally.failed:
        metrics["missing"] = [*metrics.get("missing", []), f"{tally.describe()}: not judged"]
        metrics["complete"] = False
    return metrics


def check_failed_calls(cfg: EvalConfig, records: list[dict[str, Any]], path: Path) -> None:
    """The failed-call rule (:mod:`thinkj.inference.failures`) on a run whose records and results are written."""
    failed_call_tally(records).check(f"{cfg.benchmark} with {cfg.model}", cfg.max_failure_rate,
                                     written=f"The judgments and the incomplete results ({path}) are written.")
