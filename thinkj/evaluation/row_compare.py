"""Rows of Table 4's layout set against each other on the same held-out judgments: ``thinkj eval compare``.

    thinkj eval compare base=runs/demo_seed0/eval/base init=runs/demo_seed0/eval/judge_sft \
        offline=runs/demo_seed0/eval/offline_iter_1_model online=runs/demo_seed0/eval/online_trl_grpo_thinkj_qwen_model \
        --out runs/demo_seed0/compare

Each ``ROW=FOLDER`` is an evaluation folder (``thinkj eval run ... --out FOLDER/<benchmark>``); rows are base, init
(SFT), offline (critic-guided DPO + SFT term) and online (RL). From the judgment records of one benchmark
(``--benchmark``, default the generated task's held-out pairs), per row:

* accuracy: right verdicts / judgments (both orders), Wilson 95% interval (:func:`thinkj.stats.wilson_interval`);
* pair_accuracy: items judged right in both orders / items -- a position-constant judge scores 0 here;
* consistency: items whose two orders pick different letters, i.e. the same response (both parsed) / items;
* parse_failure: judgments without a verdict / judgments.

``comparisons`` sets each later row against the one it builds on (init against base, offline and online against
init) on the judgments both made: the change in points with its cluster bootstrap 95% interval
(:func:`thinkj.stats.cluster_bootstrap_ci`), how many only one of them got right, a paired test
(:func:`thinkj.stats.paired_test`: judgments that share a question -- both orders of a comparison, a comparison
drawn twice, several comparisons of one question -- form one cluster and the cluster sign-flip test runs; McNemar's
exact test only when every judgment is its own cluster) with its p-value, the test's name and the number of distinct
clusters, and the accuracy the later row would need on this many judgments for its 95% interval to clear the
earlier row's. ``checks``: init above base, and the best trained row above init, each with separated intervals.
``example``: one held-out item the base judge got wrong and the best trained row got right, verbatim.
Written to ``<out>/compare.json`` and printed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from thinkj.paths import PROJECT_ROOT
from thinkj.records import RecordError, read_json, read_jsonl, write_json
from thinkj.stats import paired_test, successes_needed_above, wilson_interval

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


def pair_questions(source: str | os.PathLike) -> dict[str, str]:
    """item id -> its question, from a pairs file: the pair's ``meta["question_id"]`` where the generator sets one,
    else the text of its last user turn (a comparison drawn twice and several comparisons of one question share it).
    Pairs without an id or a user turn are left out."""
    keys = {}
    for _, pair in read_jsonl(source):
        question = (pair.get("meta") or {}).get("question_id")
        if question is None:
            turns = [m.get("content", "") for m in pair.get("messages") or [] if m.get("role") == "user"]
            question = turns[-1] if turns else None
        if pair.get("id") is not None and question is not None:
            keys[str(pair["id"])] = str(question)
    return keys


def question_keys(records: list[dict[str, Any]], source: str | os.PathLike | None = None) -> tuple[dict[str, str], str]:
    """item id -> the cluster its judgments belong to, and what the cluster is: the record's ``question_id`` where
    the records carry one; else the question from the pairs file ``source`` (:func:`pair_questions`); else the item
    (its two orders)."""
    if records and all(r.get("question_id") for r in records):
        return {r["item_id"]: str(r["question_id"]) for r in records}, "question"
    if source and Path(source).is_file():
        keys = pair_questions(source)
        if keys and all(r["item_id"] in keys for r in records):
            return {r["item_id"]: keys[r["item_id"]] for r in records}, "question"
    return {r["item_id"]: r["item_id"] for r in records}, "comparison"


def paired_comparison(later: list[dict[str, Any]], earlier: list[dict[str, Any]],
                      earlier_metrics: dict[str, Any], clusters: dict[str, str] | None = None,
                      cluster_by: str = "comparison") -> dict[str, Any]:
    """``later`` against ``earlier`` on the judgments both made (same item, same order); ``clusters`` maps an item
    id to its cluster (default: the item, i.e. its two orders), see :func:`question_keys`."""
    a, b = _first_samples(later), _first_samples(earlier)
    shared = sorted(a.keys() & b.keys())
    test = paired_test([a[k] for k in shared], [b[k] for k in shared],
                       [(clusters or {}).get(k[0], k[0]) for k in shared], cluster_by=cluster_by)
    only_later, only_earlier = test["only_later_right"], test["only_earlier_right"]
    n = len(shared)
    needed = successes_needed_above(earlier_metrics["accuracy_ci95"][1] / 100.0, n) if n else None
    return {"change_points": round(100.0 * (only_later - only_earlier) / n, 1) if n else 0.0,
            "only_later_right": only_later, "only_earlier_right": only_earlier, "n_judgments": n,
            "test": test["test"], "p": float(f"{test['p']:.3g}"), "clusters": test["clusters"],
            "cluster_by": cluster_by, "why": test["why"],
            "change_ci95": [round(100.0 * x, 1) for x in test["diff_ci95"]],
            "accuracy_needed_for_separated_ci": round(100.0 * needed / n, 1) if needed is not None else None}


def pairs_source(judgments: Path, benchmark: str) -> str | None:
    """The pairs file a row's evaluation read (its results' provenance), if recorded and present."""
    path = judgments.with_name(f"{benchmark}.results.json")
    results = read_json(path) if path.is_file() else None
    source = (((results.get("provenance") or {}).get("data") or {}).get("source")
              if isinstance(results, dict) else None)
    return source if source and Path(source).is_file() else None


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


def git_commit() -> str:
    """The checkout's commit (``-dirty`` with uncommitted changes): provenance of the comparison."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def compare_rows(folders: dict[str, Path], out: str | os.PathLike, benchmark: str = "synthetic",
                 pairs: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read each row's judgments of ``benchmark``, write ``<out>/compare.json``, and return it. ``pairs``: the
    held-out pairs file (each item's question); default, the one the earlier row's results name."""
    unknown = [row for row in folders if row not in ROWS]
    if unknown:
        raise RecordError(f"unknown row {unknown[0]!r}; rows: {', '.join(ROWS)}", field="ROW")
    judgments = {row: Path(folder) / benchmark / f"{benchmark}.judgments.jsonl" for row, folder in folders.items()}
    for row, path in judgments.items():
        if not path.is_file():
            raise RecordError(f"row {row}: no {benchmark} judgments (run `thinkj eval run {benchmark} ...` first)",
                              path=path)
    records = {row: [r for _, r in read_jsonl(judgments[row])] for row in ROWS if row in judgments}
    rows = {row: row_metrics(records[row]) for row in records}
    comparisons = {}
    for later, earlier in COMPARISONS:
        if later in rows and earlier in rows:
            clusters, cluster_by = question_keys(records[earlier] + records[later],
                                                 pairs or pairs_source(judgments[earlier], benchmark))
            comparisons[f"{later}_vs_{earlier}"] = paired_comparison(records[later], records[earlier],
                                                                     rows[earlier], clusters, cluster_by)
    checks = learning_checks(rows)
    after = checks.get("best_trained") or ("init" if "init" in rows else None)
    example = before_after(judgments, after) if after else None
    if example:
        source = pairs or pairs_source(judgments[after], benchmark)
        if source:
            for _, pair in read_jsonl(source):
                if pair.get("id") == example["item_id"]:
                    example["pair"] = {k: pair[k] for k in ("messages", "response_a", "response_b", "label")}
    document = {"benchmark": benchmark, "rows": rows, "comparisons": comparisons, "checks": checks,
                "example": example, "judgments": {row: str(p) for row, p in judgments.items()},
                "git_commit": git_commit()}
    write_json(Path(out) / "compare.json", document)
    return document


def _test_name(comparison: dict[str, Any]) -> str:
    return {"mcnemar_exact": "McNemar exact", "cluster_sign_flip": "cluster sign-flip"}.get(comparison["test"],
                                                                                          comparison["test"])


def print_results(document: dict[str, Any]) -> None:
    rows = document["rows"]
    print("\nHeld-out pairs, judged in both orders (greedy); accuracy with Wilson 95% interval over judgments, %")
    print(f"{'row':9s} {'accuracy':>8s} {'95% CI':>14s} {'pair acc':>9s} {'consistent':>10s} {'unparsed':>9s} {'items':>6s}")
    for row, m in rows.items():
        ci = f"[{m['accuracy_ci95'][0]:.1f}, {m['accuracy_ci95'][1]:.1f}]"
        print(f"{row:9s} {m['accuracy']:8.1f} {ci:>14s} {m['pair_accuracy']:9.1f} {m['consistency']:10.1f} "
              f"{m['parse_failure']:9.1f} {m['n_items']:6d}")
    for name, c in (document.get("comparisons") or {}).items():
        needed = c["accuracy_needed_for_separated_ci"]
        ci = c.get("change_ci95")
        print(f"{name.replace('_vs_', ' vs '):17s} {c['change_points']:+6.1f} points"
              f"{f' [{ci[0]:+.1f}, {ci[1]:+.1f}] (cluster bootstrap)' if ci else ''}; right only in one: "
              f"{c['only_later_right']} vs {c['only_earlier_right']} ({_test_name(c)} p = {c['p']:.2g}, "
              f"{c['clusters']} {c['cluster_by']}s: {c['why']}); "
              f"separated intervals need {'an unreachable' if needed is None else f'{needed:.1f} %'}")
    checks = document.get("checks") or {}
    if checks:
        print("checks: " + ", ".join(f"{k}={v}" for k, v in checks.items()))
    ex = document.get("example")
    if ex:
        pair = ex.get("pair") or {}
        question = (pair.get("messages") or [{}])[-1].get("content", "")
        print(f"\nOne held-out item ({ex['item_id']}, gold ({ex['gold']})):")
        if pair:
            print(f"  Q: {question}\n  (a) {pair['response_a']}\n  (b) {pair['response_b']}")
        print(f"--- base model, verbatim (verdict: {ex['base_verdict']}):\n{ex['base_output'].strip()}")
        print(f"--- trained judge ({ex['after_row']}), verbatim (verdict: {ex['trained_verdict']}):\n"
              f"{ex['trained_output'].strip()}")
