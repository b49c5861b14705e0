"""Benchmark metrics computed from judgment records alone (percentages 0-100).

A judgment record is one (comparison, order): ``item_id``, ``order`` (original | swapped), ``gold`` and
``verdict`` ("a" | "b" | "tie", positions as displayed in that order; ``verdict`` is None when the output
could not be parsed), plus the benchmark's grouping fields. Scoring never needs the model or the data.

Protocols: ``single`` -- every judgment is one trial; ``pair`` -- a comparison is one trial, right only
when both of its orders are right. An unparsable verdict scores 0, or 0.5 with ``unparsed_half``
(RewardBench's convention for generative judges that give no answer).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError, UnknownNameError
from thinkj.evaluation.specs import (
    AUTOJ_GROUP_OF,
    AUTOJ_SCENARIO_GROUPS,
    REWARDBENCH_EXAMPLE_COUNTS,
    REWARDBENCH_SECTIONS,
    RMBENCH_EASY,
    RMBENCH_HARD,
    RMBENCH_NORMAL,
    RMBENCH_REPORT_DOMAIN,
    RMBENCH_REPORT_ORDER,
)
from thinkj.records import RecordError, read_jsonl

ORDERS = ("original", "swapped")
CHOICES = ("a", "b", "tie")
PROTOCOLS = ("single", "pair")
FLIP = {"a": "b", "b": "a", "tie": "tie", None: None}

Record = dict[str, Any]


def pct(x: float) -> float:
    return round(100.0 * x, 2)


def validate_record(row: Any, *, path: str | None = None, line: int | None = None) -> Record:
    """Check the fields scoring relies on; raise RecordError naming the file, row and field."""
    if not isinstance(row, dict):
        raise RecordError(f"expected a JSON object, got {type(row).__name__}", path=path, line=line)
    for name in ("item_id", "order", "gold", "verdict"):
        if name not in row:
            raise RecordError("missing", path=path, line=line, field=name)
    if row["order"] not in ORDERS:
        raise RecordError(f"must be one of {ORDERS}, got {row['order']!r}", path=path, line=line, field="order")
    if row["gold"] not in CHOICES:
        raise RecordError(f"must be one of {CHOICES}, got {row['gold']!r}", path=path, line=line, field="gold")
    if row["verdict"] is not None and row["verdict"] not in CHOICES:
        raise RecordError(f"must be one of {CHOICES} or null, got {row['verdict']!r}", path=path, line=line,
                          field="verdict")
    return row


def load_records(path: str | Path, benchmark: str | None = None) -> list[Record]:
    """Judgment records from JSONL, validated; with ``benchmark``, every row must belong to it."""
    rows = []
    for line, row in read_jsonl(path):
        validate_record(row, path=str(path), line=line)
        if benchmark is not None and row.get("benchmark", benchmark) != benchmark:
            raise RecordError(f"belongs to benchmark {row.get('benchmark')!r}, not {benchmark!r}", path=str(path),
                              line=line, field="benchmark")
        rows.append(row)
    if not rows:
        raise RecordError("no judgment records", path=str(path))
    return rows


def comparison_key(record: Record) -> tuple:
    """One comparison = item, RM-Bench style cell and sample index; its two records differ only in order."""
    return (str(record["item_id"]), record.get("chosen_style"), record.get("rejected_style"), record.get("sample", 0))


def by_comparison(records: Iterable[Record]) -> dict[tuple, dict[str, Record]]:
    groups: dict[tuple, dict[str, Record]] = defaultdict(dict)
    for record in records:
        key = comparison_key(record)
        if record["order"] in groups[key]:
            raise RecordError(f"two {record['order']} records for comparison {key}", field="order")
        groups[key][record["order"]] = record
    return groups


def trial_value(verdict: str | None, gold: str, unparsed_half: bool = False) -> float:
    if verdict is None:
        return 0.5 if unparsed_half else 0.0
    return 1.0 if verdict == gold else 0.0


def trials(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> list[tuple[Record, float]]:
    """(record, value) per trial. Under ``pair`` the value is the worse of the two orders (1 only if both right)."""
    if protocol not in PROTOCOLS:
        raise ThinkJError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if protocol == "single":
        return [(r, trial_value(r["verdict"], r["gold"], unparsed_half)) for r in records]
    out = []
    for key, orders in by_comparison(records).items():
        if len(orders) != 2:
            missing = [o for o in ORDERS if o not in orders]
            raise ThinkJError(f"protocol 'pair' needs both orders; comparison {key} lacks {missing}")
        value = min(trial_value(r["verdict"], r["gold"], unparsed_half) for r in orders.values())
        out.append((orders["original"], value))
    return out


def in_original_positions(record: Record) -> str | None:
    """The verdict mapped back to the original order's positions."""
    return record["verdict"] if record["order"] == "original" else FLIP[record["verdict"]]


def position_consistency(records: list[Record]) -> float | None:
    """Share of comparisons judged in both orders whose two verdicts name the same response (tie/tie counts)."""
    both = [o for o in by_comparison(records).values() if len(o) == 2]
    if not both:
        return None
    same = sum(1 for o in both if o["original"]["verdict"] is not None
               and in_original_positions(o["original"]) == in_original_positions(o["swapped"]))
    return pct(same / len(both))


def common_metrics(records: list[Record], protocol: str, unparsed_half: bool) -> dict[str, Any]:
    return {"position_consistency": position_consistency(records),
            "parse_failure": pct(sum(r["verdict"] is None for r in records) / max(len(records), 1)),
            "n_judgments": len(records), "n_comparisons": len(by_comparison(records)),
            "protocol": protocol, "unparsed": "half" if unparsed_half else "wrong"}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def score_rewardbench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Subset accuracies; sections weighted by RewardBench's example counts; overall = mean of the sections."""
    values: dict[str, list[float]] = defaultdict(list)
    for record, value in trials(records, protocol, unparsed_half):
        values[str(record.get("subset"))].append(value)
    subsets = {s: _mean(v) for s, v in sorted(values.items())}
    sections = {}
    for section, members in REWARDBENCH_SECTIONS.items():
        present = [s for s in members if s in subsets]
        if present:
            weight = sum(REWARDBENCH_EXAMPLE_COUNTS[s] for s in present)
            sections[section] = sum(subsets[s] * REWARDBENCH_EXAMPLE_COUNTS[s] for s in present) / weight
    return {"subsets": {s: pct(v) for s, v in subsets.items()},
            "sections": {s: pct(v) for s, v in sections.items()},
            "overall": pct(_mean(list(sections.values()))) if sections else None,
            "sections_present": list(sections),
            **common_metrics(records, protocol, unparsed_half)}


def score_rmbench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """3x3 style cells per domain; hard/normal/easy = upper/diagonal/lower cells; overall = mean of domains."""
    cells: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for record, value in trials(records, protocol, unparsed_half):
        domain = RMBENCH_REPORT_DOMAIN.get(record.get("domain"), record.get("domain"))
        cells[domain][(int(record["chosen_style"]), int(record["rejected_style"]))].append(value)
    detail = {}
    for domain in [d for d in RMBENCH_REPORT_ORDER if d in cells] + sorted(set(cells) - set(RMBENCH_REPORT_ORDER)):
        acc = {cell: _mean(v) for cell, v in cells[domain].items()}

        def part(which, acc=acc):
            got = [acc[c] for c in which if c in acc]
            return _mean(got) if got else None

        detail[domain] = {"score": _mean(list(acc.values())), "hard": part(RMBENCH_HARD),
                          "normal": part(RMBENCH_NORMAL), "easy": part(RMBENCH_EASY),
                          "cells": [[pct(acc[(i, j)]) if (i, j) in acc else None for j in range(3)] for i in range(3)]}

    def across(key):
        got = [d[key] for d in detail.values() if d[key] is not None]
        return pct(_mean(got)) if got else None

    return {"domains": {d: pct(v["score"]) for d, v in detail.items()},
            "hard": across("hard"), "normal": across("normal"), "easy": across("easy"),
            "overall": across("score"), "domains_present": list(detail),
            "cells": {d: v["cells"] for d, v in detail.items()},
            **common_metrics(records, protocol, unparsed_half)}


def autoj_item_verdicts(records: list[Record]) -> list[dict[str, Any]]:
    """Per item: gold (original positions), each order's verdict in original positions, and the derived verdict.

    Derived verdict: the same response preferred in both orders gives that response; tie in both gives tie;
    any disagreement gives tie (as Auto-J's own evaluation treats inconsistent judges). An unparsable order
    leaves the item unparsed: it never earns a tie-agreement by failing to answer.
    """
    items = []
    for key, orders in by_comparison(records).items():
        if len(orders) != 2:
            raise ThinkJError(f"Auto-J scoring needs both orders; item {key[0]} lacks "
                             f"{[o for o in ORDERS if o not in orders]}")
        first, second = in_original_positions(orders["original"]), in_original_positions(orders["swapped"])
        if first is None or second is None:
            derived = None
        else:
            derived = first if first == second else "tie"
        items.append({"item_id": key[0], "scenario": orders["original"].get("scenario"),
                      "gold": orders["original"]["gold"], "original": first, "swapped": second, "derived": derived})
    return items


def score_autoj(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Agreement of the derived verdict; Auto-J's strict agreement (both orders equal the label); consistency.

    The protocol does not change Auto-J's metrics: agreement is already a per-item verdict over both orders
    and strict_agreement is its both-orders-right counterpart. Scenario groups report agreement.
    """
    items = autoj_item_verdicts(records)
    groups: dict[str, list[float]] = defaultdict(list)
    agree, strict, consistent = [], [], []
    for item in items:
        value = trial_value(item["derived"], item["gold"], unparsed_half)
        agree.append(value)
        strict.append(float(item["original"] == item["gold"] == item["swapped"]))
        consistent.append(float(item["original"] is not None and item["original"] == item["swapped"]))
        groups[AUTOJ_GROUP_OF.get(item["scenario"], str(item["scenario"]))].append(value)
    order = [g for g in AUTOJ_SCENARIO_GROUPS if g in groups] + sorted(set(groups) - set(AUTOJ_SCENARIO_GROUPS))
    return {"agreement": pct(_mean(agree)), "strict_agreement": pct(_mean(strict)),
            "consistency": pct(_mean(consistent)),
            "scenarios": {g: pct(_mean(groups[g])) for g in order},
            "n_items": len(items), **common_metrics(records, protocol, unparsed_half)}


def score_synthetic(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Accuracy (and per-source accuracy) on PreferencePair sets such as the held-out synthetic pairs.

    ``accuracy_ci95`` is Wilson's 95% score interval over the trials (``n_trials``, ``n_correct``), so a demo
    table can say whether a stage's gain is larger than the noise of a small held-out set.
    """
    from thinkj.stats import wilson_interval

    values: dict[str, list[float]] = defaultdict(list)
    every = []
    for record, value in trials(records, protocol, unparsed_half):
        values[str(record.get("subset"))].append(value)
        every.append(value)
    lo, hi = wilson_interval(sum(every), len(every))
    return {"accuracy": pct(_mean(every)), "accuracy_ci95": [pct(lo), pct(hi)], "n_trials": len(every),
            "n_correct": sum(every), "subsets": {s: pct(_mean(v)) for s, v in sorted(values.items())},
            **common_metrics(records, protocol, unparsed_half)}


def _score_judgebench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    from thinkj.evaluation.judgebench import score_judgebench  # its own module (imports this one)

    return score_judgebench(records, protocol, unparsed_half)


def _score_rewardbench2(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    from thinkj.evaluation.rewardbench2 import score_rewardbench2  # its records are not pairs: own rules

    if protocol != "single" or unparsed_half:
        raise ThinkJError("rewardbench2 has its own official rules: --protocol and --unparsed-half do not apply")
    return score_rewardbench2(records)


SCORERS = {"rewardbench": score_rewardbench, "rmbench": score_rmbench, "autoj": score_autoj,
           "synthetic": score_synthetic, "judgebench": _score_judgebench, "rewardbench2": _score_rewardbench2}


def score(benchmark: str, records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    if benchmark not in SCORERS:
        raise UnknownNameError(f"unknown benchmark {benchmark!r}; available: {', '.join(SCORERS)}")
    if not records:
        raise ThinkJError("no judgment records to score")
    return SCORERS[benchmark](records, protocol, unparsed_half)
