"""Benchmark metrics computed from judgment records alone (percentages 0-100).

A judgment record is one (comparison, order): ``item_id``, ``order`` (original | swapped), ``gold`` and
``verdict`` ("a" | "b" | "tie", positions as displayed in that order; ``verdict`` is None when the output
could not be parsed), plus the benchmark's grouping fields. Scoring never needs the model or the data.
``too_long`` marks a judgment that was never generated because prompt + budget exceed the model's context;
``truncated`` one whose thinking the budget cut off (no ``</think>``).

Protocols: ``single`` -- every judgment is one trial; ``pair`` -- a comparison is one trial, right only
when both of its orders are right. A verdict that is neither of the two responses (unparsable, tie, too long)
scores 0, or 0.5 with ``unparsed_half`` (RewardBench's ``scripts/run_generative.py``: every answer that is
neither A nor B is "effectively a tie", 0.5).

Every number comes with its rule (``<metric>_rule``) and the result says whether it covers the whole
benchmark (``complete``, ``missing``): a missing section or domain counts as 0 in the overall, as in the
official scorers, so a partial run can never pass for a full one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError, UnknownNameError
from thinkj.evaluation.specs import (
    AUTOJ_GROUP_OF,
    AUTOJ_ITEMS,
    AUTOJ_SCENARIO_GROUPS,
    REWARDBENCH_EXAMPLE_COUNTS,
    REWARDBENCH_ROWS,
    REWARDBENCH_SECTION_OF,
    REWARDBENCH_SECTIONS,
    RMBENCH_DOMAINS,
    RMBENCH_EASY,
    RMBENCH_HARD,
    RMBENCH_ITEMS,
    RMBENCH_NORMAL,
    RMBENCH_REPORT_DOMAIN,
    RMBENCH_REPORT_ORDER,
    RMBENCH_STYLES,
)
from thinkj.records import RecordError, read_jsonl

ORDERS = ("original", "swapped")
CHOICES = ("a", "b", "tie")
PROTOCOLS = ("single", "pair")
FLIP = {"a": "b", "b": "a", "tie": "tie", None: None}
PROTOCOL_RULES = {"single": "single: every judgment (comparison x order) is one trial",
                  "pair": "pair: a comparison is one trial, right only when both orders are right"}

Record = dict[str, Any]


def pct(x: float) -> float:
    return round(100.0 * x, 2)


def validate_record(row: Any, *, path: str | None = None, line: int | None = None,
                    benchmark: str | None = None) -> Record:
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
    if benchmark == "rmbench":
        if row.get("domain") not in RMBENCH_DOMAINS:
            raise RecordError(f"must be one of {RMBENCH_DOMAINS}, got {row.get('domain')!r}", path=path, line=line,
                              field="domain")
        for name in ("chosen_style", "rejected_style"):
            value = row.get(name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(RMBENCH_STYLES):
                raise RecordError(f"must be an integer 0-{len(RMBENCH_STYLES) - 1}, got {value!r}", path=path,
                                  line=line, field=name)
    return row


def check_both_orders(records: list[Record], *, path: str | None = None, lines: list[int] | None = None) -> None:
    """Every comparison must have exactly its two orders: a lone order would be scored as if it were complete."""
    seen: dict[tuple, dict[str, int]] = defaultdict(dict)
    for index, record in enumerate(records):
        key, order = comparison_key(record), record["order"]
        line = lines[index] if lines else None
        if order in seen[key]:
            raise RecordError(f"a second {order} record for comparison {key}", path=path, line=line, field="order")
        seen[key][order] = line if line is not None else index + 1
    for key, orders in seen.items():
        if len(orders) != 2:
            (order, line), = orders.items()
            missing = "swapped" if order == "original" else "original"
            raise RecordError(f"comparison {key} has only its {order} order (no {missing} record); every comparison "
                              "is judged in both orders", path=path, line=line if lines else None, field="order")


def load_records(path: str | Path, benchmark: str | None = None) -> list[Record]:
    """Judgment records from JSONL, validated; with ``benchmark``, every row must belong to it."""
    rows, lines = [], []
    for line, row in read_jsonl(path):
        validate_record(row, path=str(path), line=line, benchmark=benchmark)
        if benchmark is not None and row.get("benchmark", benchmark) != benchmark:
            raise RecordError(f"belongs to benchmark {row.get('benchmark')!r}, not {benchmark!r}", path=str(path),
                              line=line, field="benchmark")
        rows.append(row)
        lines.append(line)
    if not rows:
        raise RecordError("no judgment records", path=str(path))
    check_both_orders(rows, path=str(path), lines=lines)
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
    """1 right, 0 wrong; with ``unparsed_half`` a verdict that names neither response of an a/b gold is 0.5."""
    if unparsed_half and gold in ("a", "b") and verdict not in ("a", "b"):
        return 0.5
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
    n = max(len(records), 1)
    too_long = sum(bool(r.get("too_long")) for r in records)
    truncated = sum(bool(r.get("truncated")) and not r.get("too_long") for r in records)
    other = sum(r["verdict"] is None and not r.get("too_long") and not r.get("truncated") for r in records)
    return {"position_consistency": position_consistency(records),
            "position_consistency_rule": "both orders name the same response (tie/tie counts; unparsed never)",
            "parse_failure": pct(other / n),
            "parse_failure_rule": "share of judgments without a readable verdict, not counting truncated or too_long",
            "truncated": pct(truncated / n),
            "truncated_rule": "share of judgments whose <think> the generation budget cut off (no </think>)",
            "n_too_long": too_long, "n_judgments": len(records), "n_comparisons": len(by_comparison(records)),
            "protocol": protocol, "protocol_rule": PROTOCOL_RULES[protocol],
            "unparsed": "half" if unparsed_half else "wrong",
            "unparsed_rule": ("a verdict naming neither response (unparsed, tie, too long) scores 0.5 "
                              "(RewardBench run_generative.py)") if unparsed_half
            else "a verdict naming neither response (unparsed, too long) scores 0; a tie is right only on a tie gold"}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _items_per(records: list[Record], field: str, rename: dict[str, str] | None = None) -> dict[str, int]:
    items: dict[str, set] = defaultdict(set)
    for r in records:
        group = str(r.get(field))
        items[(rename or {}).get(group, group)].add(str(r["item_id"]))
    return {g: len(v) for g, v in items.items()}


def _completeness(missing: list[str], records: list[Record]) -> dict[str, Any]:
    too_long = len({str(r["item_id"]) for r in records if r.get("too_long")})
    if too_long:
        missing = missing + [f"{too_long} item(s) too long for the model's context (not judged)"]
    return {"complete": not missing, "missing": missing}


def score_rewardbench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Subset accuracies; sections weighted by RewardBench's example counts; overall = mean of the 4 sections
    with a missing section counted as 0 (rewardbench/utils.py calculate_scores_per_section)."""
    values: dict[str, list[float]] = defaultdict(list)
    for record, value in trials(records, protocol, unparsed_half):
        values[str(record.get("subset"))].append(value)
    subsets = {s: _mean(v) for s, v in sorted(values.items())}
    sections, missing = {}, []
    for section, members in REWARDBENCH_SECTIONS.items():
        present = [s for s in members if s in subsets]
        if present:
            weight = sum(REWARDBENCH_EXAMPLE_COUNTS[s] for s in present)
            sections[section] = sum(subsets[s] * REWARDBENCH_EXAMPLE_COUNTS[s] for s in present) / weight
        else:
            missing.append(f"section {section}")
    counts = _items_per(records, "subset")
    for subset, rows in REWARDBENCH_ROWS.items():
        have = counts.get(subset, 0)
        if have != rows and f"section {REWARDBENCH_SECTION_OF[subset]}" not in missing:
            missing.append(f"{subset}: {have} of {rows} items")
    return {"subsets": {s: pct(v) for s, v in subsets.items()},
            "subsets_rule": "accuracy per subset: chosen judged better (protocol below)",
            "sections": {s: pct(v) for s, v in sections.items()},
            "sections_rule": "example-weighted mean of the section's subsets present, weights = rewardbench/constants.py "
                             "EXAMPLE_COUNTS (math-prm 984)",
            "overall": pct(sum(sections.values()) / len(REWARDBENCH_SECTIONS)),
            "overall_rule": "mean of Chat, Chat Hard, Safety, Reasoning; a missing section counts as 0",
            "sections_present": list(sections), **_completeness(missing, records),
            **common_metrics(records, protocol, unparsed_half)}


def score_rmbench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """3x3 style cells per domain; hard/normal/easy = upper/diagonal/lower cells; overall = mean of the 4 domains
    (chat, math, code, safety) with a missing domain counted as 0."""
    cells: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for record, value in trials(records, protocol, unparsed_half):
        domain = RMBENCH_REPORT_DOMAIN.get(record.get("domain"))
        if domain is None:
            raise RecordError(f"unknown RM-Bench domain {record.get('domain')!r} (expected one of {RMBENCH_DOMAINS})",
                              field="domain")
        cells[domain][(int(record["chosen_style"]), int(record["rejected_style"]))].append(value)
    detail = {}
    for domain in [d for d in RMBENCH_REPORT_ORDER if d in cells]:
        acc = {cell: _mean(v) for cell, v in cells[domain].items()}

        def part(which, acc=acc):
            got = [acc[c] for c in which if c in acc]
            return _mean(got) if got else 0.0

        detail[domain] = {"score": _mean(list(acc.values())), "hard": part(RMBENCH_HARD),
                          "normal": part(RMBENCH_NORMAL), "easy": part(RMBENCH_EASY),
                          "cells": [[pct(acc[(i, j)]) if (i, j) in acc else None for j in range(3)] for i in range(3)]}

    def across(key):  # over the four reported domains: a missing one counts as 0
        return pct(sum(d[key] for d in detail.values()) / len(RMBENCH_REPORT_ORDER))

    missing = [f"domain {d}" for d in RMBENCH_REPORT_ORDER if d not in detail]
    counts = _items_per(records, "domain", RMBENCH_REPORT_DOMAIN)
    missing += [f"{d}: {counts[d]} of {RMBENCH_ITEMS[d]} items" for d in detail if counts.get(d) != RMBENCH_ITEMS[d]]
    for domain, got in cells.items():
        if len(got) != 9:
            missing.append(f"{domain}: {len(got)} of 9 style cells")
    return {"domains": {d: pct(v["score"]) for d, v in detail.items()},
            "domains_rule": "per domain the mean of the 9 style cells (chosen style i vs rejected style j); safety pools "
                            "safety-refuse and safety-response (RM-Bench README)",
            "hard": across("hard"), "normal": across("normal"), "easy": across("easy"),
            "hard_rule": "cells i < j (chosen plainer than rejected), mean over the 4 domains, a missing one as 0",
            "normal_rule": "diagonal cells i = j, mean over the 4 domains, a missing one as 0",
            "easy_rule": "cells i > j, mean over the 4 domains, a missing one as 0",
            "overall": across("score"),
            "overall_rule": "mean of chat, math, code, safety domain scores; a missing domain counts as 0",
            "domains_present": list(detail), "cells": {d: v["cells"] for d, v in detail.items()},
            "cells_rule": "cells[domain][i][j]: accuracy of chosen style i vs rejected style j (0 concise, 1 detailed "
                          "plain, 2 detailed markdown)",
            **_completeness(missing, records), **common_metrics(records, protocol, unparsed_half)}


def autoj_item_verdicts(records: list[Record]) -> list[dict[str, Any]]:
    """Per item: gold (original positions), each order's verdict in original positions, and the tie-on-flip
    verdict (the same response in both orders gives it; tie in both or a disagreement gives tie; an unparsable
    order gives None, so failing to answer never earns a tie)."""
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
    """Auto-J's own pairwise scorer (codes/leaderboard/pairwise_eval.py, --type pairwise): agreement = both orders'
    verdicts equal the label (its ``correct_both``); consistency = both orders give the same verdict. The
    tie-on-flip reading (an order-inconsistent pair counts as a tie) is kept as ``agreement_tie_on_flip``.

    The protocol and ``unparsed_half`` do not change these: they are per-item rules over both orders already.
    """
    items = autoj_item_verdicts(records)
    groups: dict[str, list[float]] = defaultdict(list)
    agree, tie_on_flip, consistent = [], [], []
    for item in items:
        value = float(item["original"] is not None and item["original"] == item["gold"] == item["swapped"])
        agree.append(value)
        tie_on_flip.append(float(item["derived"] is not None and item["derived"] == item["gold"]))
        consistent.append(float(item["original"] is not None and item["original"] == item["swapped"]))
        groups[AUTOJ_GROUP_OF.get(item["scenario"], str(item["scenario"]))].append(value)
    order = [g for g in AUTOJ_SCENARIO_GROUPS if g in groups] + sorted(set(groups) - set(AUTOJ_SCENARIO_GROUPS))
    missing = [] if len(items) == AUTOJ_ITEMS else [f"{len(items)} of {AUTOJ_ITEMS} items"]
    return {"agreement": pct(_mean(agree)),
            "agreement_rule": "auto-j pairwise: both orders equal the label (pairwise_eval.py correct_both)",
            "agreement_tie_on_flip": pct(_mean(tie_on_flip)),
            "agreement_tie_on_flip_rule": "not official: an order-inconsistent pair counts as a tie, then must equal "
                                          "the label",
            "consistency": pct(_mean(consistent)),
            "consistency_rule": "auto-j pairwise: both orders give the same verdict (unparsed never)",
            "scenarios": {g: pct(_mean(groups[g])) for g in order},
            "scenarios_rule": "agreement per Auto-J scenario group (codes/leaderboard/utils_constants.py)",
            "n_items": len(items), **_completeness(missing, records),
            **common_metrics(records, protocol, unparsed_half)}


def score_synthetic(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Accuracy (and per-source accuracy) on PreferencePair sets such as the held-out synthetic pairs.

    ``accuracy_ci95`` is Wilson's 95% score interval over the trials (``n_trials``, ``n_correct``), so a demo
    table can say whether a stage's gain is larger than the noise of a small held-out set. A PreferencePair
    set has no official size: it is complete when no item was skipped.
    """
    from thinkj.stats import wilson_interval

    values: dict[str, list[float]] = defaultdict(list)
    every = []
    for record, value in trials(records, protocol, unparsed_half):
        values[str(record.get("subset"))].append(value)
        every.append(value)
    lo, hi = wilson_interval(sum(every), len(every))
    return {"accuracy": pct(_mean(every)), "accuracy_rule": f"mean over trials ({PROTOCOL_RULES[protocol]})",
            "accuracy_ci95": [pct(lo), pct(hi)], "n_trials": len(every),
            "n_correct": sum(every), "subsets": {s: pct(_mean(v)) for s, v in sorted(values.items())},
            "subsets_rule": "accuracy per pair source", "accuracy_ci95_rule": "Wilson 95% score interval over the trials",
            **_completeness([], records), **common_metrics(records, protocol, unparsed_half)}


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
    if benchmark == "rewardbench2":  # best-of-4 / ratings records, checked by rewardbench2.validate_record
        return SCORERS[benchmark](records, protocol, unparsed_half)
    for record in records:
        validate_record(record, benchmark=benchmark)
    check_both_orders(records)
    return SCORERS[benchmark](records, protocol, unparsed_half)
