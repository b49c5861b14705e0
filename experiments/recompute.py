"""Recompute a learning result's table and paired tests from its kept judgment records.

    .venv/bin/python experiments/recompute.py experiments/results/tiny_fruit             # print the table
    .venv/bin/python experiments/recompute.py experiments/results/tiny_fruit --check     # ... and diff table.md
    .venv/bin/python experiments/recompute.py experiments/results/confirmatory_seed3 --compare plain:init --sides

A records folder is what an experiment keeps so that its numbers can be recomputed and re-analysed later:

    pairs.jsonl              the held-out pairs the rows judged (PreferencePair JSONL: id, messages, meta, ...)
    <row>.judgments.jsonl    one per row (base, init, offline, online, plain, consistent, ...): the judgment
                             records of ``thinkj eval run`` (item_id, order, gold, verdict, correct), both orders
    table.md                 this script's output when the records were committed (``--check`` compares)

or, for several seeds, one such folder per seed inside it (``s0/``, ``s1/``, ...; table.md at the top), pooled.

Printed: per row, judgments, accuracy with its Wilson 95 % interval, pair accuracy (both orders right) and the
unparsed share; then each comparison (``--compare LATER:EARLIER``, default every row against init and init against
base), per seed and pooled: the change in points with its cluster bootstrap 95 % interval and the paired test
clustered by held-out question (thinkj.stats.paired_test: the cluster sign-flip test when judgments share a question,
McNemar's exact test only when each judgment is its own question) with the number of distinct questions. Pooled, one
question in several seeds' held-out sets is one cluster. For contrast the last column gives McNemar's p as if every
judgment were independent: not a valid test when the clusters are fewer than the judgments.

``--sides`` adds what a change of position bias looks like (not in table.md): per row the consistency of the two
orders, the share of "(a)" verdicts and the accuracy when the gold is (a) and when it is (b)
(thinkj.rewards.designs.twins.position_stats, as the online runs log them); per comparison how many questions gained,
did not move and lost (their net change in right judgments).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from thinkj.errors import ThinkJError
from thinkj.evaluation.judgment_records import load_records
from thinkj.evaluation.row_compare import pair_questions, row_metrics
from thinkj.records import RecordError
from thinkj.rewards.designs.twins import position_stats
from thinkj.stats import mcnemar_exact, paired_test

ORDER = ("base", "init", "offline", "online", "plain", "consistent")  # rows in this order, then others by name
SUFFIX = ".judgments.jsonl"
Seeds = dict[str, tuple[dict[str, list[dict]], dict[str, str]]]  # seed name -> (row -> records, item id -> question)


def seed_folders(folder: Path) -> list[Path]:
    """The folder itself when it holds pairs.jsonl, else its subfolders that do (one per seed), in name order."""
    if (folder / "pairs.jsonl").is_file():
        return [folder]
    seeds = sorted(p for p in folder.iterdir() if (p / "pairs.jsonl").is_file()) if folder.is_dir() else []
    if not seeds:
        raise RecordError("no pairs.jsonl here nor in a subfolder (see experiments/recompute.py)", path=folder)
    return seeds


def read_seed(folder: Path) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Rows' validated judgment records and item id -> question of one seed's records folder."""
    questions = pair_questions(folder / "pairs.jsonl")
    rows = {}
    for path in sorted(folder.glob(f"*{SUFFIX}")):
        records = load_records(path)
        for line, r in enumerate(records, 1):
            if not isinstance(r.get("correct"), bool):
                raise RecordError("missing or not true/false", path=path, line=line, field="correct")
            if str(r["item_id"]) not in questions:
                raise RecordError(f"item {r['item_id']!r} is not in {folder / 'pairs.jsonl'}", path=path, line=line,
                                  field="item_id")
        rows[path.name[:-len(SUFFIX)]] = records
    if not rows:
        raise RecordError(f"no <row>{SUFFIX} files", path=folder)
    return rows, questions


def ordered(names: set[str]) -> list[str]:
    return [r for r in ORDER if r in names] + sorted(names - set(ORDER))


def default_comparisons(names: list[str]) -> list[tuple[str, str]]:
    pairs = [("init", "base")] if {"init", "base"} <= set(names) else []
    return pairs + [(r, "init") for r in names if "init" in names and r not in ("init", "base")]


def compare(seeds: Seeds, later: str, earlier: str) -> dict:
    """``later`` against ``earlier`` on the greedy judgments both made, over the given seeds, clustered by question."""
    a, b, cluster = {}, {}, {}
    for seed, (rows, questions) in seeds.items():
        for name, side in ((later, a), (earlier, b)):
            for r in rows[name]:
                if r.get("sample", 0) == 0:
                    side[(seed, str(r["item_id"]), r["order"])] = bool(r["correct"])
        cluster.update({(seed, item): q for item, q in questions.items()})
    shared = sorted(a.keys() & b.keys())
    if not shared:
        raise ThinkJError(f"rows {later} and {earlier} share no judgment")
    test = paired_test([a[k] for k in shared], [b[k] for k in shared], [cluster[k[:2]] for k in shared],
                       cluster_by="question")
    return {**test, "naive_mcnemar_p": mcnemar_exact(test["only_later_right"], test["only_earlier_right"])}


def read_folder(folder: Path) -> tuple[Seeds, list[str]]:
    """Every seed's rows and questions ("-" when the folder is one seed), and the rows all seeds have, in order."""
    seeds = {p.name if p != folder else "-": read_seed(p) for p in seed_folders(folder)}
    return seeds, ordered(set.intersection(*(set(rows) for rows, _ in seeds.values())))


def report(folder: Path, seeds: Seeds, names: list[str], comparisons: list[tuple[str, str]] | None = None) -> str:
    """The records folder's table and tests, as printed (markdown)."""
    comparisons = comparisons or default_comparisons(names)
    for pair in comparisons:
        for name in pair:
            if name not in names:
                raise RecordError(f"no row {name!r} in every seed; rows: {', '.join(names)}", path=folder,
                                  field="--compare")
    lines = [f"Records: {folder.resolve().name} ({len(seeds)} seed{'s' if len(seeds) > 1 else ''})", "",
             "| row | judgments | accuracy [95% CI] | pair accuracy | unparsed |", "|---|---:|---:|---:|---:|"]
    for name in names:
        m = row_metrics([r for rows, _ in seeds.values() for r in rows[name]])
        lines.append(f"| {name} | {m['n_judgments']} | {m['accuracy']:.1f} [{m['accuracy_ci95'][0]:.1f}, "
                     f"{m['accuracy_ci95'][1]:.1f}] | {m['pair_accuracy']:.1f} | {m['parse_failure']:.1f} |")
    lines += ["", "| comparison | seed | judgments | right only later | right only earlier | change (points) [95% CI] "
              "| p (test, distinct questions) | McNemar p as if independent |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for later, earlier in comparisons:
        groups = [[s] for s in seeds] + ([list(seeds)] if len(seeds) > 1 else [])
        for group in groups:
            t = compare({s: seeds[s] for s in group}, later, earlier)
            n, low, high = t["n_judgments"], *t["diff_ci95"]
            change = 100.0 * (t["only_later_right"] - t["only_earlier_right"]) / n
            lines.append(f"| {later} vs {earlier} | {group[0] if len(group) == 1 else 'pooled'} | {n} | "
                         f"{t['only_later_right']} | {t['only_earlier_right']} | {change:+.1f} [{100 * low:+.1f}, "
                         f"{100 * high:+.1f}] | {t['p']:.3g} ({t['test']}, {t['clusters']}) | "
                         f"{t['naive_mcnemar_p']:.3g} |")
    return "\n".join(lines) + "\n"


def sides(seeds: Seeds, names: list[str], comparisons: list[tuple[str, str]] | None = None) -> str:
    """The ``--sides`` tables (module docstring), pooled over the seeds (markdown); ``report`` checks the names."""
    lines = ["", "| row | consistency | \"(a)\" share | accuracy, gold (a) | accuracy, gold (b) |",
             "|---|---:|---:|---:|---:|"]
    for name in names:
        records = [r for rows, _ in seeds.values() for r in rows[name] if r.get("sample", 0) == 0]
        pos = position_stats([r["verdict"] for r in records], [r["gold"] for r in records])
        cells = [f"{100 * pos[k]:.1f}" if k in pos else "-" for k in ("pos/a_share", "pos/acc_gold_a", "pos/acc_gold_b")]
        lines.append(f"| {name} | {row_metrics(records)['consistency']:.1f} | {' | '.join(cells)} |")
    lines += ["", "| comparison | questions | gained | unchanged | lost |", "|---|---:|---:|---:|---:|"]
    for later, earlier in comparisons or default_comparisons(names):
        t = compare(seeds, later, earlier)
        moves = t["cluster_moves"]
        lines.append(f"| {later} vs {earlier} | {t['clusters']} | {moves['gained']} | {moves['unchanged']} | "
                     f"{moves['lost']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a records folder (see above)")
    ap.add_argument("--compare", action="append", default=None, metavar="LATER:EARLIER",
                    help="rows to test, repeatable [every row against init, init against base]")
    ap.add_argument("--check", action="store_true", help="exit 1 when the output differs from <folder>/table.md")
    ap.add_argument("--sides", action="store_true",
                    help="also print each row's position bias and how many questions each comparison moved")
    args = ap.parse_args(argv)
    try:
        comparisons = None
        if args.compare:
            bad = [c for c in args.compare if c.count(":") != 1 or "" in c.split(":")]
            if bad:
                raise ThinkJError(f"--compare takes LATER:EARLIER (two row names), got {bad[0]!r}")
            comparisons = [tuple(c.split(":")) for c in args.compare]
        seeds, names = read_folder(args.folder)
        text = report(args.folder, seeds, names, comparisons)
        extra = sides(seeds, names, comparisons) if args.sides else ""
    except ThinkJError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(text, end="")
    if args.check:
        table = args.folder / "table.md"
        if not table.is_file() or table.read_text() != text:
            print(f"error: {table}: differs from the recomputed table above (or is missing)", file=sys.stderr)
            return 1
        print(f"{table}: recomputed, identical")
    print(extra, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
