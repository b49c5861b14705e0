"""Report of the offline experiment at 10x the demo's pairs (experiments/LOG.md, 2026-11-27 protocol).

    .venv/bin/python experiments/offline_report.py runs/offline10x_seed0 runs/offline10x_seed1 runs/offline10x_seed2 \
        --json experiments/plots/offline10x_facts.json

Each argument is one seed's run folder of the demo recipe (``thinkj run configs/recipes/smollm2-cpu.yaml --set
learning=offline ...``). Reads its held-out judgments of ``init`` (``eval/judge_sft``) and ``offline``
(``eval/offline_iter_1_model``) and its DPO pair counts (``train/offline/iterations.json``); prints a markdown table
per arm (accuracy and pair accuracy with Wilson 95 % intervals, "(a)" share, flip rate, unparsed) and the paired
test (thinkj.stats.paired_test) of offline vs init per seed and pooled, judgments clustered by held-out question as
in position_consistent_report.py (pooled, a question in several seeds' held-out sets is one cluster). A seed whose
evaluation is missing, or lacks any judgment of its items in both orders, is an error, not a shorter table (the
recipe evaluates with ``--limit``, which marks every result incomplete by rule, so the check here is that nothing else
is missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from position_consistent_report import arm_metrics, paired, questions_of, read_judgments, test_cell  # noqa: E402

ARMS = {"init": "eval/judge_sft", "offline": "eval/offline_iter_1_model"}


def load_judgments(folder: Path) -> dict[tuple[str, str], dict]:
    """{(item_id, order): judgment} of one finished evaluation folder: only ``--limit`` missing, every item judged in
    both orders, no judgment twice."""
    results, path = folder / "synthetic.results.json", folder / "synthetic.judgments.jsonl"
    if not results.is_file() or not path.is_file():
        raise SystemExit(f"error: {folder}: no finished evaluation (synthetic.results.json missing)")
    document = json.loads(results.read_text())
    missing = [m for m in document["metrics"].get("missing", []) if not str(m).startswith("--limit")]
    if missing:
        raise SystemExit(f"error: {results}: evaluation incomplete: {missing}")
    out = read_judgments(path)
    items = document["provenance"]["n_items"]
    if len(out) != 2 * items or {order for _, order in out} != {"original", "swapped"}:
        raise SystemExit(f"error: {path}: {len(out)} judgments, not {items} items x 2 orders")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="one run folder per seed")
    ap.add_argument("--json", type=Path, help="also write the numbers here")
    args = ap.parse_args(argv)

    judged: dict[str, dict] = {arm: {} for arm in ARMS}
    per_seed, pairs = [], {}
    questions: dict[tuple, str] | None = {}
    for seed, run in enumerate(args.runs):
        seed_rows = {}
        for arm, folder in ARMS.items():
            rows = load_judgments(run / folder / "synthetic")
            for key, row in rows.items():
                judged[arm][(seed, *key)] = {**row, "_seed": seed}
            seed_rows[arm] = {(seed, *key): row for key, row in rows.items()}
            read = questions_of(run / folder / "synthetic" / "synthetic.judgments.jsonl") if questions is not None \
                else None
            questions = None if read is None else {**questions, **{(seed, item): q for item, q in read.items()}}
        per_seed.append({"run": str(run), "seed_rows": seed_rows})
        iterations = run / "train" / "offline" / "iterations.json"
        if iterations.is_file():
            pairs[str(run)] = json.loads(iterations.read_text())[0]["counts"]
    per_seed = [{"run": row["run"], **paired(row["seed_rows"]["offline"], row["seed_rows"]["init"], questions)}
                for row in per_seed]
    pooled = paired(judged["offline"], judged["init"], questions)
    metrics = {arm: arm_metrics(list(rows.values())) for arm, rows in judged.items()}

    print("| arm | judgments | accuracy [95% CI] | pair acc. [95% CI] | \"(a)\" share | flip rate | unparsed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for arm, m in metrics.items():
        print(f"| {arm} | {m['judgments']} | {100 * m['accuracy']:.1f} [{100 * m['ci95'][0]:.1f}, "
              f"{100 * m['ci95'][1]:.1f}] | {100 * m['pair_accuracy']:.1f} [{100 * m['pair_ci95'][0]:.1f}, "
              f"{100 * m['pair_ci95'][1]:.1f}] | {100 * m['a_share']:.1f} | {100 * m['flip_rate']:.1f} | "
              f"{100 * m['unparsed']:.1f} |")
    print("\n| offline vs init | judgments | right only offline | right only init | diff (points) [95% CI] | "
          "p (test, clusters) |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in [*per_seed, {"run": "**pooled**", **pooled}]:
        print(f"| {row['run']} | {row['n']} | {row['only_first']} | {row['only_second']} | {test_cell(row)} |")
    if questions is None:
        print("\nnote: a held-out pairs file named in the results is gone: clustered by comparison, so a comparison "
              "drawn twice or a question asked twice counts twice")
    for run, counts in pairs.items():
        print(f"\n{run}: DPO pairs {counts}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"arms": metrics, "per_seed": per_seed, "pooled": pooled, "pairs": pairs},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
