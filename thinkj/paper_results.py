"""The Think-J paper's published numbers (Tables 1-11), as shipped in ``paper_results/``.

    python -c "from thinkj.paper_results import load_paper_table; print(load_paper_table(10)[0])"

These are the paper's numbers, transcribed by hand from its text, never results of this codebase.
``paper_results/README.md`` says what each table and column is and where the transcription had to
interpret the source.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.records import RecordError

TABLE_NUMBERS = tuple(range(1, 12))


def paper_results_dir() -> Path:
    """``$THINKJ_PAPER_RESULTS``, else ``paper_results/`` of the source checkout this module sits in."""
    if os.environ.get("THINKJ_PAPER_RESULTS"):
        path = Path(os.environ["THINKJ_PAPER_RESULTS"])
    else:
        path = Path(__file__).resolve().parent.parent / "paper_results"
    if not path.is_dir():
        raise FileNotFoundError(f"paper_results folder not found at {path}; set THINKJ_PAPER_RESULTS to its location")
    return path


def paper_table_path(n: int) -> Path:
    if int(n) not in TABLE_NUMBERS:
        raise ThinkJError(f"the paper has Tables 1-11; got {n!r}")
    return paper_results_dir() / f"table{int(n)}.csv"


def parse_cell(text: str) -> Any:
    """Empty (the paper's "—") -> None; integers and decimals (also ``5.00E-06``) -> numbers;
    ``true``/``false`` -> bool; anything else stays text."""
    text = text.strip()
    if text in ("", "—"):
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def load_paper_table(n: int, *, raw: bool = False) -> list[dict[str, Any]]:
    """Rows of the paper's Table ``n`` as dicts keyed by the CSV header (cells typed unless ``raw``)."""
    path = paper_table_path(n)
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header:
            raise RecordError("empty table file", path=path)
        rows = []
        for line_no, cells in enumerate(reader, start=2):
            if len(cells) != len(header):
                raise RecordError(f"{len(cells)} cells, header has {len(header)}", path=path, line=line_no)
            rows.append({key: (cell if raw else parse_cell(cell)) for key, cell in zip(header, cells)})
    return rows


def paper_value(n: int, column: str, **row_key: str) -> Any:
    """One cell: ``paper_value(4, "Qwen-2.5-7B-Instruct/RewardBench/Overall", method="online (GRPO)")``."""
    rows = [row for row in load_paper_table(n) if all(str(row.get(k)) == str(v) for k, v in row_key.items())]
    if len(rows) != 1:
        raise KeyError(f"Table {n}: {len(rows)} rows match {row_key}")
    if column not in rows[0]:
        raise KeyError(f"Table {n} has no column {column!r}; columns: {list(rows[0])}")
    return rows[0][column]
