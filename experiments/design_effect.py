"""How much a pooled McNemar p overstates the evidence when held-out judgments repeat: design effects from the
held-out pairs files, applied to a report's summary counts (for results whose per-judgment records were not kept).

    for S in 0 1 2; do .venv/bin/thinkj data task facts /tmp/facts-s$S --train 1 --test 150 --seed $S; done
    .venv/bin/python experiments/design_effect.py experiments/plots/online2k_facts.json \
        --pairs /tmp/facts-s0/test.jsonl /tmp/facts-s1/test.jsonl /tmp/facts-s2/test.jsonl

``--pairs``: the held-out pairs file of each seed, in the report's seed order (every pair judged in both orders).
Units: a *comparison* is a question with its two responses, whichever side shows which (both orders of a pair, and
the same comparison drawn again, in this seed or another); a *question* is the question's text. For each unit kind
the design effect with perfectly correlated judgments inside a unit is sum m^2 / sum m (m: judgments per unit),
the largest it can be (Kish's 1 + (m - 1) rho at rho = 1); the truth lies between 1 (independent judgments) and it.
Printed per test of the report (per seed with that seed's units; pooled with units merged across seeds):
McNemar's exact p as reported, the normal approximation at design effect 1, the auditor's rough correction (design
effect = judgments / distinct comparisons, issue 53), and the approximation at the comparison-level and
question-level bounds (thinkj.stats.design_effect_p). These are re-readings of summary numbers, not tests of the
records; the records' own test is experiments/recompute.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from thinkj.records import RecordError, read_jsonl
from thinkj.stats import design_effect_p, mcnemar_exact


def units(path: Path) -> tuple[Counter, Counter]:
    """Judgments per comparison and per question of one held-out pairs file (2 per pair: both orders)."""
    comparisons, questions = Counter(), Counter()
    for line, pair in read_jsonl(path):
        turns = [m.get("content") for m in pair.get("messages") or [] if m.get("role") == "user"]
        if not turns or "response_a" not in pair or "response_b" not in pair:
            raise RecordError("not a pair with a user turn and two responses", path=path, line=line, field="messages")
        comparisons[(turns[-1], frozenset((pair["response_a"], pair["response_b"])))] += 2
        questions[turns[-1]] += 2
    return comparisons, questions


def bound(sizes: Counter) -> float:
    """sum m^2 / sum m: the design effect when every unit's judgments move together."""
    return sum(m * m for m in sizes.values()) / sum(sizes.values())


def tests_of(report: dict) -> list[dict]:
    """(label, seed index or None for pooled, right only first, right only second) of a report's JSON: the
    position-consistent report's ``tests`` or the offline report's ``per_seed`` and ``pooled``."""
    if "tests" in report:
        seeds = report["seeds"]
        return [{"label": f"{t['first']} vs {t['second']}", "seed": None if t["seed"] == "pooled" else
                 seeds.index(t["seed"]), "b": t["only_first"], "c": t["only_second"], "n": t["n"]}
                for t in report["tests"]]
    rows = [{"label": "offline vs init", "seed": i, "b": t["only_first"], "c": t["only_second"], "n": t["n"]}
            for i, t in enumerate(report["per_seed"])]
    pooled = report["pooled"]
    return rows + [{"label": "offline vs init", "seed": None, "b": pooled["only_first"], "c": pooled["only_second"],
                    "n": pooled["n"]}]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="a report's JSON (position_consistent_report / offline_report)")
    ap.add_argument("--pairs", type=Path, nargs="+", required=True, help="each seed's held-out pairs, in order")
    args = ap.parse_args(argv)
    try:
        report = json.loads(args.report.read_text())
        per_seed = [units(p) for p in args.pairs]
        tests = tests_of(report)
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    pooled = (sum((c for c, _ in per_seed), Counter()), sum((q for _, q in per_seed), Counter()))
    print("| held-out set | judgments | distinct comparisons | distinct questions | most judgments of one comparison "
          "| design effect bound: comparison | : question |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (c, q) in [*((f"seed {i}", u) for i, u in enumerate(per_seed)), ("pooled", pooled)]:
        print(f"| {name} | {sum(c.values())} | {len(c)} | {len(q)} | {max(c.values())} | {bound(c):.2f} | "
              f"{bound(q):.2f} |")
    print("\n| test | seed | right only first | right only second | McNemar exact p (as reported) | normal approx., "
          "independent | auditor's rough correction | comparison bound | question bound |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in tests:
        c, q = per_seed[t["seed"]] if t["seed"] is not None else pooled
        if sum(c.values()) != t["n"]:
            print(f"error: {t['label']}, seed {t['seed']}: {t['n']} judgments in the report, {sum(c.values())} in "
                  "the pairs given", file=sys.stderr)
            return 2
        b, cc = t["b"], t["c"]
        print(f"| {t['label']} | {'pooled' if t['seed'] is None else t['seed']} | {b} | {cc} | "
              f"{mcnemar_exact(b, cc):.2g} | {design_effect_p(b, cc, 1.0):.2g} | "
              f"{design_effect_p(b, cc, t['n'] / len(c)):.2g} | {design_effect_p(b, cc, bound(c)):.2g} | "
              f"{design_effect_p(b, cc, bound(q)):.2g} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
