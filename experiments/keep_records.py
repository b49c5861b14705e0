"""Keep a finished comparison's judgment records as a records folder, so its table recomputes later.

    .venv/bin/python experiments/keep_records.py runs/demo_seed0/compare/online_trl_grpo_thinkj_qwen/compare.json \
        experiments/results/demo_seed0_xeon_bf16
    .venv/bin/python experiments/recompute.py experiments/results/demo_seed0_xeon_bf16 --check

``compare.json`` is what ``thinkj eval compare`` wrote (the demo's ``compare`` stage): it names each row's judgment
file. Written to the folder (the layout experiments/recompute.py reads):

    <row>.judgments.jsonl    each row's judgment records as the evaluation wrote them, one compact line each
    pairs.jsonl              the held-out pairs the rows judged (the file the evaluations' provenance names)
    provenance.json          per row, the evaluation's provenance (model path and content identity, backend,
                             template, sampling, versions, commit, time); the comparison's commit
    table.md                 experiments/recompute.py's table of the copied records

Refused, with nothing written: an evaluation whose results record is not complete (a cut evaluation would shrink the
paired test), rows that read different pairs files, a judgment whose item is not in the pairs, and copied records
whose recomputed rows differ from what compare.json says (the copy would not be the run).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.evaluation.row_compare import row_metrics
from thinkj.records import RecordError, read_json, read_jsonl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recompute  # noqa: E402  (the sibling script: the table is its output, byte for byte)


def _resolve(name: str, compare_json: Path) -> Path:
    """A path as compare.json or a results record wrote it: absolute, or relative to the folder the run ran in,
    which is one of compare.json's parents."""
    path = Path(name)
    if path.is_absolute():
        return path
    for root in compare_json.resolve().parents:
        if (root / path).exists():
            return root / path
    raise RecordError(f"{name}: not found under any parent folder", path=compare_json)


def _compact(rows: list[Any], path: Path) -> None:
    path.write_text("".join(json.dumps(r, separators=(",", ":"), ensure_ascii=False) + "\n" for r in rows))


def _document(path: Path, *fields: str) -> dict[str, Any]:
    """A JSON object that has ``fields``; a missing file or field is a RecordError naming it."""
    if not path.is_file():
        raise RecordError("no such file", path=path)
    document = read_json(path)
    for field in fields:
        if not isinstance(document, dict) or field not in document:
            raise RecordError("missing", path=path, field=field)
    return document


def collect(compare_json: Path) -> tuple[dict[str, list[dict]], Path, dict[str, Any]]:
    """Each row's records, the one pairs file they judged, and the provenance to keep; raises on any refusal."""
    document = _document(compare_json, "benchmark", "judgments", "rows")
    benchmark, rows, pairs, provenance = document["benchmark"], {}, set(), {}
    for row, name in document["judgments"].items():
        judgments = _resolve(name, compare_json)
        results_path = judgments.with_name(f"{benchmark}.results.json")
        results = _document(results_path, "complete", "provenance")
        if results["complete"] is not True:
            missing = (results.get("metrics") or {}).get("missing")
            raise RecordError(f"row {row}: the evaluation is incomplete (missing {missing})", path=results_path,
                              field="complete")
        source = ((results.get("provenance") or {}).get("data") or {}).get("source")
        if not source:
            raise RecordError(f"row {row}: no pairs file in the provenance", path=results_path,
                              field="provenance.data.source")
        pairs.add(_resolve(source, compare_json))
        rows[row] = [r for _, r in read_jsonl(judgments)]
        provenance[row] = results["provenance"]
        if row not in document["rows"]:
            raise RecordError(f"row {row} has judgments but no metrics", path=compare_json, field="rows")
    if len(pairs) != 1:
        raise RecordError(f"the rows judged {len(pairs)} different pairs files: {sorted(map(str, pairs))}",
                          path=compare_json, field="judgments")
    return rows, pairs.pop(), {"compare_git_commit": document.get("git_commit"), "benchmark": benchmark,
                               "rows": provenance}


def keep(compare_json: Path, folder: Path) -> str:
    """Write the records folder (module docstring) and return its table."""
    rows, pairs, provenance = collect(compare_json)
    expected = read_json(compare_json)["rows"]  # collect checked every row is there
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        shutil.copyfile(pairs, staging / "pairs.jsonl")
        for row, records in rows.items():
            _compact(records, staging / f"{row}{recompute.SUFFIX}")
        seeds, names = recompute.read_folder(staging)  # validates every record and its item against pairs.jsonl
        for row in names:
            got = row_metrics(seeds["-"][0][row])
            if got != expected[row]:
                raise ThinkJError(f"row {row}: the copied records give {got}, compare.json says {expected[row]}")
        table = recompute.report(folder, seeds, names)
        (staging / "table.md").write_text(table)
        (staging / "provenance.json").write_text(json.dumps(provenance, indent=1, ensure_ascii=False) + "\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if folder.exists():
        shutil.rmtree(folder)
    staging.replace(folder)  # whole or not at all
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_json", type=Path, help="a compare.json written by `thinkj eval compare`")
    ap.add_argument("folder", type=Path, help="the records folder to write (replaced when it exists)")
    args = ap.parse_args(argv)
    try:
        table = keep(args.compare_json, args.folder)
    except ThinkJError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(table, end="")
    print(f"kept: {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
