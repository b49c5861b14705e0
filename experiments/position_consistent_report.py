"""Report of the position-consistent GRPO experiment (experiments/LOG.md, 2026-11-25): tests, table and curves.

    .venv/bin/python experiments/position_consistent_report.py runs/pcg --task facts --seeds 0 1 2 \
        --plot experiments/plots/pcg_facts.png

Reads what ``experiments/position_consistent.sh`` wrote under the run folder: per seed, the held-out judgments of
each arm (``<task>-s<S>/eval-<arm>/synthetic.judgments.jsonl``) and each RL run's ``trainer_state.json``. Prints a
markdown table per arm (accuracy with Wilson 95 % interval, pair accuracy, "(a)" share, flip rate, unparsed) and the
paired tests (thinkj.stats.paired_test; per seed and pooled over seeds) with the change's cluster bootstrap interval,
writes the same as JSON next to the plot, and plots reward, training accuracy, "(a)" share and twin flip rate per
step. An arm or seed whose evaluation is missing or incomplete is an error, not a silently shorter table.

Clusters: the judgments of one held-out question are one cluster -- both orders of a comparison, a comparison drawn
twice, several comparisons of one question and, pooled, the same question in several seeds' held-out sets (one init
judge judges them all). The question is read from the pairs file each evaluation names in its results
(``meta["question_id"]``, else the question's text); where that file is gone, the cluster is the comparison (its two
orders) and the table says so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from thinkj.evaluation.row_compare import pair_questions, pairs_source
from thinkj.stats import paired_test, wilson_interval

ARMS = ("init", "plain", "consistent")
TESTS = (("consistent", "init", "primary"), ("plain", "init", "secondary"), ("consistent", "plain", "secondary"))
CURVES = (("reward", "reward (Think-J)"), ("rewards/acc/mean", "training accuracy"),
          ("pos/a_share", '"(a)" share of verdicts'), ("pos/flip_rate", "twin flip rate"))


def load_judgments(path: Path) -> dict[tuple[str, str], dict]:
    """{(item_id, order): judgment} of one evaluation; refuses a missing or incomplete one."""
    results = path.parent / "synthetic.results.json"
    if not path.is_file() or not results.is_file():
        raise SystemExit(f"error: {path.parent}: no finished evaluation (synthetic.results.json missing)")
    if not json.loads(results.read_text()).get("complete", False):
        raise SystemExit(f"error: {results}: evaluation marked incomplete")
    return read_judgments(path)


def read_judgments(path: Path) -> dict[tuple[str, str], dict]:
    """{(item_id, order): judgment} of a judgments JSONL; refuses a judgment written twice."""
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        row = json.loads(line)
        key = (row["item_id"], row["order"])
        if key in out:
            raise SystemExit(f"error: {path}:{n}: judgment {key} appears twice")
        out[key] = row
    return out


def arm_metrics(rows: list[dict]) -> dict:
    """Accuracy, pair accuracy (both orders right), "(a)" share, flip rate (same letter in both orders: the
    preference follows the position) and unparsed share of one arm's judgments."""
    n = len(rows)
    right = sum(r["correct"] for r in rows)
    by_item: dict[tuple[int, str], dict[str, dict]] = {}
    for r in rows:
        by_item.setdefault((r["_seed"], r["item_id"]), {})[r["order"]] = r
    pairs = [v for v in by_item.values() if len(v) == 2]
    both = sum(v["original"]["correct"] and v["swapped"]["correct"] for v in pairs)
    flips = sum(v["original"]["verdict"] in ("a", "b") and v["original"]["verdict"] == v["swapped"]["verdict"]
                for v in pairs)
    low, high = wilson_interval(right, n)
    plow, phigh = wilson_interval(both, len(pairs))
    return {"judgments": n, "accuracy": right / n, "ci95": [low, high], "pairs": len(pairs),
            "pair_accuracy": both / max(len(pairs), 1), "pair_ci95": [plow, phigh],
            "a_share": sum(r["verdict"] == "a" for r in rows) / n, "flip_rate": flips / max(len(pairs), 1),
            "unparsed": sum(not r["well_formed"] for r in rows) / n}


def questions_of(judgments: Path) -> dict[str, str] | None:
    """item id -> question of the pairs file an evaluation read (its results' provenance), or None when gone."""
    source = pairs_source(judgments, "synthetic")
    return pair_questions(source) if source else None


def paired(first: dict, second: dict, questions: dict[tuple, str] | None = None) -> dict:
    """Paired test of ``first`` vs ``second`` on the same judgments (keys ``(..., item_id, order)``), clustered by
    question where ``questions`` maps every comparison (the key without its order) to one, else by comparison."""
    if first.keys() != second.keys():
        raise SystemExit("error: the two arms were not scored on the same judgments")
    keys = sorted(first, key=str)
    by_question = questions is not None and all(k[:-1] in questions for k in keys)
    test = paired_test([bool(first[k]["correct"]) for k in keys], [bool(second[k]["correct"]) for k in keys],
                       [questions[k[:-1]] if by_question else k[:-1] for k in keys],
                       cluster_by="question" if by_question else "comparison")
    only_first, only_second = test["only_later_right"], test["only_earlier_right"]
    return {"only_first": only_first, "only_second": only_second, "n": len(first),
            "diff": (only_first - only_second) / len(first), "diff_ci95": test["diff_ci95"], "p": test["p"],
            "test": test["test"], "clusters": test["clusters"], "cluster_by": test["cluster_by"]}


def test_cell(t: dict) -> str:
    """diff [cluster bootstrap 95 % CI] | p (test, n clusters): one table's last two cells."""
    low, high = t["diff_ci95"]
    return (f"{100 * t['diff']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}] | {t['p']:.3g} ({t['test']}, "
            f"{t['clusters']} {t['cluster_by']}s)")


def plot(run_dir: Path, task: str, seeds: list[int], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(4.2 * len(CURVES), 3.4))
    colours = {"plain": "tab:blue", "consistent": "tab:red"}
    for arm in ("plain", "consistent"):
        for s in seeds:
            state = run_dir / f"{task}-s{s}" / arm / "trainer_state.json"
            if not state.is_file():
                raise SystemExit(f"error: {state}: missing (the RL run of {arm}, seed {s}, did not finish)")
            hist = [h for h in json.loads(state.read_text())["log_history"] if "reward" in h]
            for ax, (key, title) in zip(axes, CURVES):
                pts = [(h["step"], h[key]) for h in hist if key in h]
                if pts:
                    ax.plot(*zip(*pts), color=colours[arm], alpha=0.8, lw=1.2,
                            label=f"{arm}" if s == seeds[0] else None)
                ax.set_title(title, fontsize=10)
                ax.set_xlabel("step")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"GRPO on the SmolLM2 demo judge, task {task}, seeds {seeds}", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--task", default="facts")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--plot", type=Path, default=None, help="PNG of the per-step curves")
    ap.add_argument("--primary", nargs="+", choices=("plain", "consistent"), default=["consistent"],
                    help="arms whose test against init is primary (2026-11-25: consistent; the 2,000-rollout "
                         "protocol of 2026-11-27: plain consistent, each at alpha 0.025)")
    args = ap.parse_args(argv)
    tests = [(first, second, "primary" if second == "init" and first in args.primary else "secondary")
             for first, second, _ in TESTS]

    judged: dict[str, dict[int, dict]] = {arm: {} for arm in ARMS}
    questions: dict[tuple, str] | None = {}
    for s in args.seeds:
        for arm in ARMS:
            path = args.run_dir / f"{args.task}-s{s}" / f"eval-{arm}" / "synthetic.judgments.jsonl"
            rows = load_judgments(path)
            judged[arm][s] = {k: {**v, "_seed": s} for k, v in rows.items()}
            read = questions_of(path) if questions is not None else None
            questions = None if read is None else {**questions, **{(s, item): q for item, q in read.items()}}
    report: dict = {"task": args.task, "seeds": args.seeds, "arms": {}, "tests": []}
    print("| arm | judgments | accuracy [95% CI] | pair acc. [95% CI] | \"(a)\" share | flip rate | unparsed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arm in ARMS:
        m = arm_metrics([r for s in args.seeds for r in judged[arm][s].values()])
        report["arms"][arm] = m
        print(f"| {arm} | {m['judgments']} | {100 * m['accuracy']:.1f} [{100 * m['ci95'][0]:.1f}, "
              f"{100 * m['ci95'][1]:.1f}] | {100 * m['pair_accuracy']:.1f} [{100 * m['pair_ci95'][0]:.1f}, "
              f"{100 * m['pair_ci95'][1]:.1f}] | {100 * m['a_share']:.1f} | {100 * m['flip_rate']:.1f} | "
              f"{100 * m['unparsed']:.1f} |")
    print()
    print("| test | kind | seed | right only first | right only second | diff (points) [95% CI] | p (test, clusters) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for first, second, kind in tests:
        for seed in [*args.seeds, *(["pooled"] if len(args.seeds) > 1 else [])]:
            seeds = args.seeds if seed == "pooled" else [seed]
            a = {(s, *k): v for s in seeds for k, v in judged[first][s].items()}
            b = {(s, *k): v for s in seeds for k, v in judged[second][s].items()}
            t = {"first": first, "second": second, "kind": kind, "seed": seed, **paired(a, b, questions)}
            report["tests"].append(t)
            print(f"| {first} vs {second} | {kind} | {seed} | {t['only_first']} | {t['only_second']} | "
                  f"{test_cell(t)} |")
    if questions is None:
        report["clusters_note"] = ("a held-out pairs file named in the results is gone: clustered by comparison, so "
                                   "a comparison drawn twice or a question asked twice counts twice")
        print(f"\nnote: {report['clusters_note']}")
    if sorted(args.seeds) != [0, 1, 2]:
        report["note"] = (f"seeds {args.seeds} only: the pre-registered primary test pools seeds 0, 1 and 2; "
                          "these rows are per-seed results, not that test")
        print(f"\nnote: {report['note']}")
    for arm in ("plain", "consistent"):
        times = [json.loads(p.read_text())["seconds"] for s in args.seeds
                 if (p := args.run_dir / f"{args.task}-s{s}" / arm / "wall_time.json").is_file()]
        report["arms"][arm]["rl_wall_seconds"] = times
    print()
    print("RL wall seconds:", {arm: report["arms"][arm]["rl_wall_seconds"] for arm in ("plain", "consistent")})
    if args.plot:
        plot(args.run_dir, args.task, args.seeds, args.plot)
        args.plot.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
        print(f"plot: {args.plot}; numbers: {args.plot.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
