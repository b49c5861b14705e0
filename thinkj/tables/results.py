"""Read results JSON files and pull one metric out of each.

A results JSON (the contract shared with ``thinkj eval``) is one evaluation of one model on one benchmark:
``{"benchmark": "rewardbench" | "rmbench" | "autoj" | "synthetic" | "rewardbench2" | "judgebench", "unit":
"percent", "complete", "metrics": {...}, "tags": {...}, "provenance": {...}}``; metrics are percentages 0-100 as
``thinkj eval score`` prints them (RewardBench 2's Ties score and overall may pass 100 or 0 by up to one point, as
upstream).

A results file is refused -- one line naming the file and the field -- when its benchmark is not a registered one
(it would fill no table, silently), when it declares another ``unit``, when it declares none and every metric the
tables read is within 0-1 (fractions, 0.83 for 83%: files written before ``unit`` existed are read when they hold
any value above 1, or only zeros), and when a metric a cell reads is present but not a number (``"n/a"``, a list).
A metric that is absent or ``null`` leaves its cell empty.
"""

from __future__ import annotations

import glob
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thinkj.evaluation.results import UNIT
from thinkj.records import RecordError
from thinkj.tables.layouts import (
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


def _known_benchmark(name: str, path: Path) -> str:
    from thinkj.evaluation.registry import BENCHMARKS

    if name.lower() not in BENCHMARKS:
        raise RecordError(f"unknown benchmark {name!r}; the known ones: {', '.join(BENCHMARKS)}", path=path,
                          field="benchmark")
    return name.lower()


def _read_paths(benchmark: str) -> dict[tuple[str, ...], tuple[float, float]]:
    """Every metric path a registered table reads for ``benchmark``, with the widest bounds any column gives it."""
    from thinkj.tables.layouts import SPECS

    paths: dict[tuple[str, ...], tuple[float, float]] = {}
    for spec in SPECS.values():
        for _, column in spec.columns:
            metric = column.metric
            if metric.benchmark == benchmark and metric.path:
                low, high = paths.get(metric.path, metric.bounds)
                paths[metric.path] = (min(low, metric.bounds[0]), max(high, metric.bounds[1]))
    return dict(sorted(paths.items()))


def _check_metrics(data: dict[str, Any], benchmark: str, path: Path) -> None:
    """The metrics the tables read, checked when the file is read (not only when a cell happens to need them): each
    a number in its bounds, or absent / null, and its interval, if any, finite numbers. Then the unit: a declared
    one must be ``percent``; without one, values that are all within 0-1 (and not all 0) are fractions by every
    likelihood -- 0.83 would print as 0.8 -- so the file is refused, not guessed at."""
    found = []
    for keys, bounds in _read_paths(benchmark).items():
        where = ".".join(keys)
        value = _percentage(_number(_lookup(data["metrics"], keys), path, where), path, where, bounds)
        _interval(data["metrics"], keys, path)
        if value is not None:
            found.append((where, value))
    if "unit" in data:
        if data["unit"] != UNIT:
            raise RecordError(f"{data['unit']!r} is not {UNIT!r}: tables read percentages 0-100 (what thinkj eval "
                              "writes); rescore the judgments with thinkj eval score", path=path, field="unit")
        return
    if found and all(0 <= v <= 1 for _, v in found) and any(v for _, v in found):
        name, value = next((n, v) for n, v in found if v)
        raise RecordError(f"no unit and every metric the tables read is within 0-1 (metrics.{name} = {value:g}): "
                          f"fractions, not percentages 0-100; rescore with thinkj eval score, or add \"unit\": "
                          f"\"{UNIT}\" if they are percentages", path=path, field="unit")


def parse_result(data: Any, path: Path) -> Result:
    if not isinstance(data, dict):
        raise RecordError("a results JSON must be an object", path=path)
    for key, kind in (("benchmark", str), ("metrics", dict)):
        if not isinstance(data.get(key), kind):
            raise RecordError(f"missing or not a {kind.__name__}", path=path, field=key)
    for key in ("tags", "provenance"):
        if data.get(key) is not None and not isinstance(data[key], dict):
            raise RecordError("must be an object", path=path, field=key)
    benchmark = _known_benchmark(data["benchmark"], path)
    _check_metrics(data, benchmark, path)
    complete = data.get("complete", data["metrics"].get("complete"))
    if complete is not None and not isinstance(complete, bool):
        raise RecordError(f"must be true or false, got {complete!r}", path=path, field="complete")
    return Result(path, benchmark, data["metrics"], dict(data.get("tags") or {}),
                  dict(data.get("provenance") or {}), complete)


def _read_json(path: Path) -> Any:
    """The document, or RecordError: invalid JSON, an integer too long to convert, or nesting too deep to parse."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise RecordError(f"not valid JSON ({err.msg} at line {err.lineno})", path=path) from None
    except ValueError as err:  # Python's limit on digits in an integer literal
        raise RecordError(f"not valid JSON ({err})", path=path) from None
    except RecursionError:
        raise RecordError("not valid JSON (nested too deeply)", path=path) from None


def load_result(path: str | Path) -> Result:
    path = Path(path)
    return parse_result(_read_json(path), path)


def _looks_like_result(path: Path) -> bool:
    """A JSON with benchmark and metrics; a ``*.results.json`` (what ``thinkj eval`` writes) always counts, so a
    broken one is reported by ``load_result`` instead of being skipped."""
    if path.name.endswith(".results.json"):
        return True
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # ValueError: undecodable bytes, invalid JSON, overlong integers
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


def _number(value: Any, result_path: Path, where: str) -> float | None:
    """The number in a metric slot: None when absent or null; a value that is not a number (a string, a list, a
    boolean) raises RecordError naming the file and field, never becomes an empty cell. NaN and infinities are
    returned (:func:`_percentage` refuses them)."""
    if isinstance(value, dict):  # {"value": x, "ci95": [lo, hi]} style
        value = value.get("value", value.get("mean"))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value) if isinstance(value, str) and len(value) <= 40 else f"a {type(value).__name__}"
        raise RecordError(f"must be a number, got {shown}", path=result_path, field=f"metrics.{where}")
    try:
        return float(value)
    except OverflowError:  # an integer with hundreds of digits
        return math.inf


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
    chat, hard = (_percentage(_number(_lookup(metrics, ("sections", s)), path, f"sections.{s}"), path, f"sections.{s}")
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
    where = ".".join(metric.path)
    return _percentage(_number(_lookup(result.metrics, metric.path), result.path, where), result.path, where,
                       metric.bounds)


def _interval(metrics: dict[str, Any], keys: tuple[str, ...], path: Path) -> tuple[float, float] | None:
    *parent, key = keys
    node = _lookup(metrics, tuple(parent))
    if not isinstance(node, dict):
        return None
    candidates = [node.get(f"{key}_ci95"), node.get(f"{key}_ci"), (node.get("ci95") or {}).get(key)
                  if isinstance(node.get("ci95"), dict) else None]
    if isinstance(node.get(key), dict):
        candidates.append(node[key].get("ci95") or node[key].get("ci"))
    where = f"{'.'.join(keys)} interval"
    for cand in candidates:
        if isinstance(cand, (list, tuple)) and len(cand) == 2:
            lo, hi = (_number(v, path, where) for v in cand)
            if lo is not None and hi is not None:
                if not (math.isfinite(lo) and math.isfinite(hi)):
                    raise RecordError(f"[{lo}, {hi}] is not a finite interval", path=path, field=f"metrics.{where}")
                return lo, hi
    return None


def metric_interval(result: Result, metric: Metric) -> tuple[float, float] | None:
    """A 95% interval when the metrics carry one: ``<key>_ci95``, ``ci95: {<key>: [lo, hi]}`` or
    ``<key>: {"value": ..., "ci95": [lo, hi]}``; bounds that are not finite numbers raise RecordError."""
    if metric.derive or not metric.path:
        return None
    return _interval(result.metrics, metric.path, result.path)
