"""Load a preference source into PreferencePair JSONL (positions shuffled with a seed, balanced a/b).

    # hub (normal use)
    python -m data_prep.load_source skywork --out runs/limj/source/skywork.jsonl --limit 10000
    python -m data_prep.load_source helpsteer2 --out runs/hs2/source/helpsteer2.jsonl
    python -m data_prep.load_source hh_rlhf --out runs/hh/source/hh.jsonl --location Anthropic/hh-rlhf --data-dir harmless-base
    # local files (offline): .jsonl / .json / .parquet, optionally .gz
    python -m data_prep.load_source hh_rlhf --location ../shared/data/hh-rlhf/harmless-base-test.jsonl.gz \
        --out runs/hh/source/hh_test.jsonl --skip-invalid
    # HH-RLHF with strength from a classifier's scores ({"row": N, "chosen": s1, "rejected": s2} per line)
    python -m data_prep.load_source hh_rlhf --location hh.jsonl.gz --scores-file bt_scores.jsonl --out hh.jsonl
    # this project's PreferencePair JSONL (e.g. `thinkj data task facts runs/cpu/task`)
    python -m data_prep.load_source pairs --location runs/cpu/task/train.jsonl --out runs/cpu/data/source.jsonl
    # any JSONL/parquet with a column mapping
    python -m data_prep.load_source generic --location my.parquet --out my.jsonl \
        --column-map '{"prompt": "question", "chosen": "good", "rejected": "bad"}'

Writes the pairs and ``<out>.summary.json`` (rows read, pairs written, rows skipped with their errors,
label balance). Without ``--skip-invalid`` the first malformed row stops the run with file, row and field.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from thinkj.checks import OneLineParser, check_distinct_paths, check_range
from thinkj.data.loaders import STRENGTH_THRESHOLDS, load_source, parse_column_map, parse_thresholds
from thinkj.errors import ThinkJError, exit_on_user_error
from thinkj.records import write_json, write_jsonl


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["skywork", "helpsteer2", "hh_rlhf", "pairs", "generic"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--location", default=None, help="hub dataset name or local file (default: the source's hub name)")
    parser.add_argument("--split", default=None)
    parser.add_argument("--data-dir", default=None, help="hub data_dir (HelpSteer2: 'preference'; HH-RLHF: e.g. 'harmless-base')")
    parser.add_argument("--seed", type=int, default=0, help="position shuffle seed")
    parser.add_argument("--limit", type=int, default=None, help="keep the first N valid pairs")
    parser.add_argument("--skip-invalid", action="store_true", help="skip malformed rows (counted in the summary)")
    parser.add_argument("--column-map", default=None, help="JSON column mapping for the generic loader")
    parser.add_argument("--strength-column", default=None)
    parser.add_argument("--scores-file", default=None)
    parser.add_argument("--strength-thresholds", default=",".join(map(str, STRENGTH_THRESHOLDS)),
                        help="score-gap bin edges t1,t2 for strength 1|2|3 (finite, t1 < t2)")
    parser.add_argument("--source-name", default=None, help="value of the pairs' 'source' field (default: kind)")
    args = parser.parse_args(argv)
    from thinkj.paths import setup_caches

    setup_caches()
    if args.location and Path(args.location).exists():
        check_distinct_paths("--location", args.location, "--out", args.out)
    # every option is checked before anything is read or written
    thresholds = parse_thresholds(args.strength_thresholds, "--strength-thresholds")
    column_map = parse_column_map(args.column_map, "--column-map") if args.column_map else None
    if args.column_map and args.kind != "generic":
        raise ThinkJError(f"--column-map is for the generic loader; {args.kind} has its own schema")
    if args.kind == "generic" and not column_map:
        raise ThinkJError("the generic loader needs --column-map (a JSON object naming the columns)")
    if args.strength_column and args.scores_file:
        raise ThinkJError("--strength-column and --scores-file both set the strength: give one")
    check_range("--limit", args.limit, low=1)
    pairs, summary = load_source(args.kind, args.location, split=args.split, data_dir=args.data_dir, seed=args.seed,
                                 limit=args.limit, skip_invalid=args.skip_invalid, column_map=column_map,
                                 strength_column=args.strength_column, scores_file=args.scores_file,
                                 strength_thresholds=thresholds, source_name=args.source_name)
    if not pairs:  # a source that yields nothing is a mistake (wrong file, wrong kind), not an empty stage done
        first = f"; the first: {summary.errors[0]}" if summary.errors else ""
        raise ThinkJError(f"{summary.location}: no valid pairs ({summary.rows} rows read, {summary.skipped} "
                          f"skipped{first}); nothing written")
    out = Path(args.out)
    write_jsonl(out, pairs)
    report = {"stage": "source", "output": str(out), **summary.to_dict()}
    write_json(out.with_suffix(".summary.json"), report)
    print(json.dumps({k: v for k, v in report.items() if k != "errors"}, indent=1))
    return report


if __name__ == "__main__":
    exit_on_user_error(main)
