"""Scorers of the pair benchmarks -- RewardBench, RM-Bench, Auto-J and PreferencePair sets (percentages 0-100).

Each scorer reads judgment records alone (:mod:`thinkj.evaluation.judgment_records`) and returns every number with its
rule (``<metric>_rule``) and whether the run covers the whole benchmark (``complete``, ``missing``): a missing
section or domain counts as 0 in the overall, so a partial run can never pass for a full one. Each scorer is
registered in :mod:`thinkj.evaluation.registry`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation.judgment_records import (
    ORDERS,
    PROTOCOL_RULES,
    Record,
    by_comparison,
    common_metrics,
    completeness,
    in_original_positions,
    items_per,
    mean,
    pct,
    trials,
)
from thinkj.evaluation.scoring_rules import (
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
from thinkj.records import RecordError


def _group_text(row: Record, name: str, path: str | None, line: int | None) -> str:
    """A grouping field every record of its benchmark carries: a non-empty string (a missing one would be scored as
    the group "None")."""
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise RecordError("missing" if value is None else f"must be a non-empty string, got {value!r}", path=path,
                          line=line, field=name)
    return value


def check_rewardbench_record(row: Record, path: str | None = None, line: int | None = None) -> None:
    """RewardBench records need their subset (a subset outside the four sections, e.g. a prior set, is reported on
    its own, as upstream)."""
    _group_text(row, "subset", path, line)


def check_autoj_record(row: Record, path: str | None = None, line: int | None = None) -> None:
    """Auto-J records need their scenario (the per-group agreement is read from it)."""
    _group_text(row, "scenario", path, line)


def check_rmbench_record(row: Record, path: str | None = None, line: int | None = None) -> None:
    """RM-Bench records also need a known domain and the two style indexes of their 3x3 cell."""
    if row.get("domain") not in RMBENCH_DOMAINS:
        raise RecordError(f"must be one of {RMBENCH_DOMAINS}, got {row.get('domain')!r}", path=path, line=line,
                          field="domain")
    for name in ("chosen_style", "rejected_style"):
        value = row.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < len(RMBENCH_STYLES):
            raise RecordError(f"must be an integer 0-{len(RMBENCH_STYLES) - 1}, got {value!r}", path=path,
                              line=line, field=name)


def score_rewardbench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """Subset accuracies; sections weighted by RewardBench's example counts; overall = mean of the 4 sections
    with a missing section counted as 0 (rewardbench/utils.py calculate_scores_per_section)."""
    values: dict[str, list[float]] = defaultdict(list)
    for record, value in trials(records, protocol, unparsed_half):
        values[str(record.get("subset"))].append(value)
    subsets = {s: mean(v) for s, v in sorted(values.items())}
    sections, missing = {}, []
    for section, members in REWARDBENCH_SECTIONS.items():
        present = [s for s in members if s in subsets]
        if present:
            weight = sum(REWARDBENCH_EXAMPLE_COUNTS[s] for s in present)
            sections[section] = sum(subsets[s] * REWARDBENCH_EXAMPLE_COUNTS[s] for s in present) / weight
        else:
            missing.append(f"section {section}")
    counts = items_per(records, "subset")
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
            "sections_present": list(sections), **completeness(missing, records),
            **common_metrics(records, protocol, unparsed_half)}


def score_rmbench(records: list[Record], protocol: str = "single", unparsed_half: bool = False) -> dict[str, Any]:
    """3x3 style cells per domain; hard/normal/easy = upper/diagonal/lower cells; overall = mean of the 4 domains
    (chat, math, code, safety) as in THU-KEG/RM-Bench scripts/utils.py ``compute_accuracy``. A missing domain
    counts as 0 -- an assumption of ours: the official script has no such case (it fails on an empty domain)."""
    cells: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for record, value in trials(records, protocol, unparsed_half):
        domain = RMBENCH_REPORT_DOMAIN.get(record.get("domain"))
        if domain is None:
            raise RecordError(f"unknown RM-Bench domain {record.get('domain')!r} (expected one of {RMBENCH_DOMAINS})",
                              field="domain")
        cells[domain][(int(record["chosen_style"]), int(record["rejected_style"]))].append(value)
    detail = {}
    for domain in [d for d in RMBENCH_REPORT_ORDER if d in cells]:
        acc = {cell: mean(v) for cell, v in cells[domain].items()}

        def part(which, acc=acc):
            got = [acc[c] for c in which if c in acc]
            return mean(got) if got else 0.0

        detail[domain] = {"score": mean(list(acc.values())), "hard": part(RMBENCH_HARD),
                          "normal": part(RMBENCH_NORMAL), "easy": part(RMBENCH_EASY),
                          "cells": [[pct(acc[(i, j)]) if (i, j) in acc else None for j in range(3)] for i in range(3)]}

    def across(key):  # over the four reported domains; a missing one counts as 0 (our rule, see the docstring)
        return pct(sum(d[key] for d in detail.values()) / len(RMBENCH_REPORT_ORDER))

    missing = [f"domain {d}" for d in RMBENCH_REPORT_ORDER if d not in detail]
    counts = items_per(records, "domain", RMBENCH_REPORT_DOMAIN)
    missing += [f"{d}: {counts[d]} of {RMBENCH_ITEMS[d]} items" for d in detail if counts.get(d) != RMBENCH_ITEMS[d]]
    for domain, got in cells.items():
        if len(got) != 9:
            missing.append(f"{domain}: {len(got)} of 9 style cells")
    return {"domains": {d: pct(v["score"]) for d, v in detail.items()},
            "domains_rule": "per domain the mean of the 9 style cells (chosen style i vs rejected style j); safety pools "
                            "safety-refuse and safety-response (RM-Bench README)",
            "hard": across("hard"), "normal": across("normal"), "easy": across("easy"),
            "hard_rule": "cells i < j (chosen plainer than rejected), mean over the 4 domains, a missing one as 0 (assumption)",
            "normal_rule": "diagonal cells i = j, mean over the 4 domains, a missing one as 0 (assumption)",
            "easy_rule": "cells i > j, mean over the 4 domains, a missing one as 0 (assumption)",
            "overall": across("score"),
            "overall_rule": "mean of chat, math, code, safety domain scores (scripts/utils.py compute_accuracy); a "
                            "missing domain counts as 0 (assumption: the official script fails on a missing domain)",
            "domains_present": list(detail), "cells": {d: v["cells"] for d, v in detail.items()},
            "cells_rule": "cells[domain][i][j]: accuracy of chosen style i vs rejected style j (0 concise, 1 detailed "
                          "plain, 2 detailed markdown)",
            **completeness(missing, records), **common_metrics(records, protocol, unparsed_half)}


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
    return {"agreement": pct(mean(agree)),
            "agreement_rule": "auto-j pairwise: both orders equal the label (pairwise_eval.py correct_both)",
            "agreement_tie_on_flip": pct(mean(tie_on_flip)),
            "agreement_tie_on_flip_rule": "not official: an order-inconsistent pair counts as a tie, then must equal "
                                          "the label",
            "consistency": pct(mean(consistent)),
            "consistency_rule": "auto-j pairwise: both orders give the same verdict (unparsed never)",
            "scenarios": {g: pct(mean(groups[g])) for g in order},
            "scenarios_rule": "agreement per Auto-J scenario group (codes/leaderboard/utils_constants.py)",
            "n_items": len(items), **completeness(missing, records),
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
    return {"accuracy": pct(mean(every)), "accuracy_rule": f"mean over trials ({PROTOCOL_RULES[protocol]})",
            "accuracy_ci95": [pct(lo), pct(hi)], "n_trials": len(every),
            "n_correct": sum(every), "subsets": {s: pct(mean(v)) for s, v in sorted(values.items())},
            "subsets_rule": "accuracy per pair source", "accuracy_ci95_rule": "Wilson 95% score interval over the trials",
            **completeness([], records), **common_metrics(records, protocol, unparsed_half)}
