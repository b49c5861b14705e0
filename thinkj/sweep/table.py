"""Fill a sweep's table from its finished runs' results JSON through ``thinkj.tables`` (H4's renderer).

A spec names either a paper table (``table: "8"``: the same as ``thinkj tables 8 --results <files>``) or an
inline ``table_spec`` for a table the paper does not have (the tiny CPU sweep), e.g.

    table_spec:
      title: Tiny reward-weight sweep (synthetic task)
      rows: [w_fmt, w_str]          # tags that name a row; the rows are the grid's values
      fixed_tags: {model: tiny}
      columns:                      # benchmark + path into "metrics"
        - {benchmark: synthetic, header: Accuracy, path: [accuracy]}
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from thinkj.atomic import staged_dir, write_text_atomic
from thinkj.records import RecordError
from thinkj.sweep.sweep_file import Run, SweepSpec


def inline_table(spec: SweepSpec):
    """A ``thinkj.tables`` TableSpec (no paper counterpart) built from ``spec.table_spec``."""
    from thinkj.tables.layouts import Column, ColumnGroup, Metric, TableSpec

    raw = spec.table_spec or {}
    rows_by = list(raw.get("rows") or [])
    missing = [r for r in rows_by if r not in spec.grid]
    if not rows_by or missing:
        raise RecordError(f"table_spec.rows must name grid axes (missing from grid: {missing})", path=spec.path,
                          field="table_spec.rows")
    columns = tuple(Column("", str(c["header"]), Metric(str(c["benchmark"]), tuple(c["path"])))
                    for c in raw.get("columns") or [])
    if not columns:
        raise RecordError("needs at least one column", path=spec.path, field="table_spec.columns")
    rows = tuple(tuple(str(v) for v in combo) for combo in itertools.product(*(spec.grid[r] for r in rows_by)))
    return TableSpec(f"sweep:{spec.name}", str(raw.get("title", spec.name)), row_keys=tuple(rows_by),
                     row_tags={r: r for r in rows_by}, groups=(ColumnGroup(str(raw.get("group", "")), columns),),
                     fixed_tags={k: (str(v),) for k, v in (raw.get("fixed_tags") or {}).items()}, paper=False, rows=rows,
                     notes=f"rows = tags {' / '.join(rows_by)}")


def fill_table(spec: SweepSpec, runs: list[Run], out_dir: Path) -> dict[str, Any]:
    """Render the table from the finished runs' results; writes ``<out_dir>/table*.md``. Returns paths + fill counts."""
    from thinkj.sweep.runner import is_done
    from thinkj.tables import collect_results, render_table
    from thinkj.tables.grid import build_grid
    from thinkj.tables.render import markdown

    files = [p for r in runs if is_done(r) for p in r.results]
    results = collect_results(files) if files else []
    if spec.table_spec:
        grid = build_grid(inline_table(spec), results)
        text = markdown(grid)
        path = write_text_atomic(out_dir / f"table_{spec.name}.md", text)
        command = None
    elif spec.table:
        with staged_dir(out_dir) as stage:  # the table and its charts replace the old ones whole, or not at all
            rendered = render_table(spec.table, results, stage)
        grid, text, path = rendered.grid, rendered.markdown, out_dir / f"table{spec.table}.md"
        command = ["thinkj", "tables", spec.table, "--out", str(out_dir), *(f"--results={p}" for p in files)]
    else:
        return {"table": None, "results": len(files)}
    cells = [c for row in grid.cells for c in row] if grid is not None else []
    return {"table": str(path), "markdown": text, "results": len(files), "cells": len(cells),
            "filled": sum(c.ours is not None for c in cells), "command": command}
