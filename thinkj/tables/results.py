"""Read results JSON files and pull one metric out of each.

A results JSON (the contract shared with ``thinkj eval``) is one evaluation of one model on one benchmark:
``{"benchmark": "rewardbench" | "rmbench" | "autoj" | "synthetic" | "rewardbench2" | "judgebench", "complete",
"metrics": {...}, "tags": {...}, "provenance": {...}}``; metrics are percentages 0-100 as ``thinkj eval score``
prints them (RewardBench 2's Ties score and overall may pass 100 or 0 by up to one point, as upstream).
"""

from __future__ import annotations

import glob
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkj.records import RecordError
from thinkj.tables.specs import (
    PAPER_PROTOCOL,
    REWARDBENCH_CHAT_HARD_N,
    REWARDBENCH_CHAT_N,
    RULE_FREE_BENCHMARKS,
    UNPARSED_HALF,
    Metric,
)


@dataclass(frozen=True)
class Result:
    path: Path
    benchmark: str
    metrics: dict[str, Any]
    tags: dict[str, Any]
    provenance: dict[str, Any]

    complete: bool | None = None  # the results' own verdict; None in files written before it existed

    @property
    def time(self) -> str:
        return str(self.provenance.get("time") or "")

    def notes(self) -> list[str]:
        """Why a number from this result is not a full, default-protocol run ([] when it is one): incomplete
        (``metrics.missing``, ``--limit``; ``complete`` alone in older files), not official (``metrics.official``
        false: RewardBench 2's round robin), another ``--protocol``, or ``--unparsed-half``."""
        out = []
        missing = [str(m) for m in self.metrics.get("missing") or []]
        limit = (self.provenance.get("data") or {}).get("limit") if isinstance(self.provenance.get("data"), dict) else None
        if limit is not None and not any(m.startswith("--limit") for m in missing):
            missing.insert(0, f"--limit {limit}")
        if self.complete is not True:
            if missing:
                out.append("incomplete: " + "; ".join(missing))
            else:
                out.append("incomplete" if self.complete is False else "completeness not recorded (older results file)")
        if self.metrics.get("official") is False:
            out.append(f"not official (mode {self.metrics.get('mode', 'not recorded')})")
        if self.benchmark in RULE_FREE_BENCHMARKS:
            return out
        protocol = self.metrics.get("protocol")
        if protocol is not None and protocol != PAPER_PROTOCOL:
            out.append(f"--protocol {protocol} (the paper's is taken to be {PAPER_PROTOCOL})")
        if self.metrics.get("unparsed") == UNPARSED_HALF:
            out.append("--unparsed-half (a verdict naming neither response scored 0.5, not 0)")
        return out


def parse_result(data: Any, path: Path) -> Result:
    if not isinstance(data, dict):
        raise RecordError("a results JSON must be an object", path=path)
    for key, kind in (("benchmark", str), ("metrics", dict)):
        if not isinstance(data.get(key), kind):
            raise RecordError(f"missing or not a {kind.__name__}", path=path, field=key)
    for key in ("tags", "provenance"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise RecordError("must be an object", path=path, field=key)
    complete = data.get("complete", data["metrics"].get("complete"))
    if complete is not None and not isinstance(complete, bool):
        raise RecordError(f"must be true or false, got {complete!r}", path=path, field="complete")
    return Result(path, data["benchmark"].lower(), data["metrics"], dict(data.get("tags") or {}),
                  dict(data.get("provenance") or {}), complete)


def load_result(path: str | Path) -> Result:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RecordError(f"not valid JSON ({err.msg} at line {err.lineno})", path=path) from None
    return parse_result(data, path)


def _looks_like_result(path: Path) -> bool:
    """A JSON with benchmark and metrics; a ``*.results.json`` (what ``thinkj eval`` writes) always counts, so a
    broken one is reported by ``load_result`` instead of being skipped."""
    if path.name.endswith(".results.json"):
        return True
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and "benchmark" in data and "metrics" in data


def collect_results(sources: list[str | Path]) -> list[Result]:
    """Results from files, directories (searched recursively for ``*.json`` that look like results; other JSON
    such as model configs is skipped) and glob patterns. A file named explicitly must be a valid result."""
    found: dict[Path, Result] = {}
    for source in sources:
        text = str(source)
        if any(ch in text for ch in "*?["):
            matches = [Path(p) for p in sorted(glob.glob(text, recursive=True))]
            if not matches:
                print(f"thinkj tables: no files match {text!r}", file=sys.stderr)
            for p in matches:
                if p.is_dir():
                    matches.extend(q for q in sorted(p.rglob("*.json")) if _looks_like_result(q))
                elif p.suffix == ".json" and _looks_like_result(p):
                    found[p.resolve()] = load_result(p)
            continue
        path = Path(text)
        if path.is_dir():
            for p in sorted(path.rglob("*.json")):
                if _looks_like_result(p):
                    found[p.resolve()] = load_result(p)
        elif path.exists():
            found[path.resolve()] = load_result(path)
        else:
            raise FileNotFoundError(f"results path does not exist: {path}")
    return list(found.values())


def _number(value: Any) -> float | None:
    """The number in a metric slot (None when absent or not a number; NaN and infinities are returned)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, dict):  # {"value": x, "ci95": [lo, hi]} style
        value = value.get("value", value.get("mean"))
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _percentage(value: float | None, result_path: Path, where: str,
                bounds: tuple[float, float] = (0.0, 100.0)) -> float | None:
    """Every table cell is a percentage: refuse NaN, infinities and values outside 0-100 (or the metric's own
    ``bounds``) with file and field."""
    low, high = bounds
    if value is not None and (not math.isfinite(value) or not low <= value <= high):
        span = "a percentage in 0-100" if bounds == (0.0, 100.0) else f"in [{low:g}, {high:g}]"
        raise RecordError(f"{value} is not {span}", path=result_path, field=f"metrics.{where}")
    return value


def _lookup(metrics: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = metrics
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def _chat_pooled(metrics: dict[str, Any], path: Path) -> float | None:
    chat, hard = (_percentage(_number(_lookup(metrics, ("sections", s))), path, f"sections.{s}")
                  for s in ("Chat", "Chat Hard"))
    if chat is None or hard is None:
        return None
    return (chat * REWARDBENCH_CHAT_N + hard * REWARDBENCH_CHAT_HARD_N) / (REWARDBENCH_CHAT_N + REWARDBENCH_CHAT_HARD_N)


DERIVED = {"rewardbench_chat_pooled": _chat_pooled}


def metric_value(result: Result, metric: Metric) -> float | None:
    """The metric's value in ``result`` (None when the results lack it); a value that is not a percentage in
    0-100 (NaN, 950, -5; or outside the metric's ``bounds``) raises RecordError naming the file and field, never
    reaches a table."""
    if metric.derive:
        return DERIVED[metric.derive](result.metrics, result.path)
    return _percentage(_number(_lookup(result.metrics, metric.path)), result.path, ".".join(metric.path), metric.bounds)


def metric_interval(result: Result, metric: Metric) -> tuple[float, float] | None:
    """A 95% interval when the metrics carry one: ``<key>_ci95``, ``ci95: {<key>: [lo, hi]}`` or
    ``<key>: {"value": ..., "ci95": [lo, hi]}``."""
    if metric.derive or not metric.path:
        return None
    *parent, key = metric.path
    node = _lookup(result.metrics, tuple(parent))
    if not isinstance(node, dict):
        return None
    candidates = [node.get(f"{key}_ci95"), node.get(f"{key}_ci"), (node.get("ci95") or {}).get(key)
                  if isinstance(node.get("ci95"), dict) else None]
    if isinstance(node.get(key), dict):
        candidates.append(node[key].get("ci95") or node[key].get("ci"))
    for cand in candidates:
        if isinstance(cand, (list, tuple)) and len(cand) == 2:
            lo, hi = _number(cand[0]), _number(cand[1])
            if lo is not None and hi is not None:
                return lo, hi
    return None
