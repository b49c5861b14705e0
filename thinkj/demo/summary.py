"""Demo stage 140: ``summary.json`` (per row: accuracy with its 95% interval, pair accuracy, consistency, parse
failures), the learning checks (init above base; the best trained row above init with separated 95% intervals and
a pair accuracy of at least 60 %), and one held-out item before / after training.

Rows are the Table 4 layout: base, init (SFT), offline (critic-guided DPO + SFT term), online (GRPO). Every number is
computed from the judgment records the evaluation stage wrote (held-out pairs, both orders, greedy).

* accuracy: right verdicts / judgments (both orders), Wilson 95% interval (:func:`thinkj.stats.wilson_interval`);
* pair_accuracy: items judged right in both orders / items -- a position-constant judge scores 0 here;
* consistency: items whose two orders pick the same response (both parsed) / items;
* parse_failure: judgments without a verdict / judgments.

``comparisons`` sets each later row against the one it builds on (init against base, offline and online against
init) on the same judgments: the change in points, how many judgments only one of them got right, McNemar's exact
p-value, and the accuracy the later row would need on this many judgments for its 95% interval to clear the
earlier row's.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

from thinkj.paths import PROJECT_ROOT
from thinkj.records import read_jsonl, write_json
from thinkj.stats import mcnemar_exact, successes_needed_above, wilson_interval

ROWS = ("base", "init", "offline", "online")
COMPARISONS = (("init", "base"), ("offline", "init"), ("online", "init"))  # (later row, the row it builds on)


def row_metrics(records: list[dict[str, Any]]) -> dict[str, Any]:
    by_item: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        if r.get("sample", 0) == 0:
            by_item.setdefault(r["item_id"], {})[r["order"]] = r
    judgments = [r for item in by_item.values() for r in item.values()]
    right = sum(bool(r["correct"]) for r in judgments)
    n, items = len(judgments), len(by_item)
    low, high = wilson_interval(right, n) if n else (0.0, 0.0)
    both = [item for item in by_item.values() if {"original", "swapped"} <= set(item)]
    pair_right = sum(item["original"]["correct"] and item["swapped"]["correct"] for item in both)
    consistent = sum(item["original"]["verdict"] is not None and item["swapped"]["verdict"] is not None
                     and item["original"]["verdict"] != item["swapped"]["verdict"] for item in both)
    pct = lambda k, d: round(100.0 * k / d, 1) if d else 0.0  # noqa: E731
    return {"accuracy": pct(right, n), "accuracy_ci95": [round(100 * low, 1), round(100 * high, 1)],
            "pair_accuracy": pct(pair_right, items), "consistency": pct(consistent, items),
            "parse_failure": pct(sum(r["verdict"] is None for r in judgments), n), "n_items": items, "n_judgments": n}


def _first_samples(records: list[dict[str, Any]]) -> dict[tuple[str, str], bool]:
    return {(r["item_id"], r["order"]): bool(r["correct"]) for r in records if r.get("sample", 0) == 0}


def paired_comparison(later: list[dict[str, Any]], earlier: list[dict[str, Any]],
                      earlier_metrics: dict[str, Any]) -> dict[str, Any]:
    """``later`` against ``earlier`` on the judgments both made (same item, same order)."""
    a, b = _first_samples(later), _first_samples(earlier)
    shared = sorted(a.keys() & b.keys())
    only_later = sum(a[k] and not b[k] for k in shared)
    only_earlier = sum(b[k] and not a[k] for k in shared)
    n = len(shared)
    needed = successes_needed_above(earlier_metrics["accuracy_ci95"][1] / 100.0, n) if n else None
    return {"change_points": round(100.0 * (only_later - only_earlier) / n, 1) if n else 0.0,
            "only_later_right": only_later, "only_earlier_right": only_earlier, "n_judgments": n,
            "mcnemar_p": float(f"{mcnemar_exact(only_later, only_earlier):.3g}"),
            "accuracy_needed_for_separated_ci": round(100.0 * needed / n, 1) if needed is not None else None}


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _above(hi_row: dict[str, Any], lo_row: dict[str, Any]) -> bool:
    """``hi_row`` better than ``lo_row`` with non-overlapping 95% intervals."""
    return hi_row["accuracy_ci95"][0] > lo_row["accuracy_ci95"][1]


def learning_checks(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    checks: dict[str, Any] = {}
    if "base" in rows and "init" in rows:
        checks["init_above_base"] = _above(rows["init"], rows["base"])
    trained = [r for r in ("offline", "online") if r in rows]
    if trained and "init" in rows:
        best = max(trained, key=lambda r: rows[r]["accuracy"])
        checks["best_trained"] = best
        checks["best_above_init"] = _above(rows[best], rows["init"])
        checks["best_pair_accuracy_at_least_60"] = rows[best]["pair_accuracy"] >= 60.0
    return checks


def before_after(judgments: dict[str, Path], after: str) -> dict[str, Any] | None:
    """One held-out item (original order) that the base judge got wrong and ``after`` got right, verbatim."""
    if "base" not in judgments or after not in judgments:
        return None
    base = {(r["item_id"], r["order"]): r for _, r in read_jsonl(judgments["base"])}
    trained = {(r["item_id"], r["order"]): r for _, r in read_jsonl(judgments[after])}
    keys = [k for k in trained if k[1] == "original" and k in base]
    good = [k for k in keys if trained[k]["correct"] and not base[k]["correct"]] or keys
    if not good:
        return None
    key = good[0]
    return {"item_id": key[0], "order": key[1], "gold": trained[key]["gold"], "after_row": after,
            "base_output": base[key]["output"], "base_verdict": base[key]["verdict"],
            "trained_output": trained[key]["output"], "trained_verdict": trained[key]["verdict"]}


def summary(ctx) -> dict[str, Any]:
    judgments = {row: paths["synthetic"] for row, paths in (ctx.artifacts.get("judgments") or {}).items()
                 if "synthetic" in paths}
    if not judgments:  # a rerun of this stage alone: read what the evaluation stage left in the run
        judgments = {row: p for row in ROWS if (p := ctx.run_dir / "evaluation" / row / "synthetic.judgments.jsonl").exists()}
    records = {row: [r for _, r in read_jsonl(judgments[row])] for row in ROWS if row in judgments}
    rows = {row: row_metrics(records[row]) for row in records}
    comparisons = {f"{later}_vs_{earlier}": paired_comparison(records[later], records[earlier], rows[earlier])
                   for later, earlier in COMPARISONS if later in rows and earlier in rows}
    checks = learning_checks(rows)
    after = checks.get("best_trained") or ("init" if "init" in rows else None)
    example = before_after(judgments, after) if after else None
    test_pairs = ctx.artifacts.get("test_pairs") or ctx.run_dir / "synthetic_data" / "test.jsonl"
    if example and Path(test_pairs).exists():
        for _, pair in read_jsonl(test_pairs):
            if pair["id"] == example["item_id"]:
                example["pair"] = {k: pair[k] for k in ("messages", "response_a", "response_b", "label")}
    document = {"model": ctx.plan.model, "task": ctx.plan.task, "seed": ctx.seed, "threads": ctx.plan.threads,
                "rows": rows, "comparisons": comparisons, "checks": checks, "example": example,
                "stage_seconds": dict(ctx.timings), "stage_cpu_seconds": dict(ctx.cpu_seconds),
                "git_commit": git_commit(), "plan": asdict(ctx.plan)}
    # summary.json sits at the run's top: runs/demo/summary.json
    write_json(ctx.run_dir / "summary.json", document)
    ctx.artifacts["summary"] = document
    return {"rows": {r: m["accuracy"] for r, m in rows.items()}, "checks": checks}
