"""Demo stage 130, "report": the demo table from the evaluation stage's results, plus the run's charts.

    thinkj smoke --model smollm2                      # runs every stage, this one near the end
    thinkj smoke --model smollm2 --only report        # re-render from results already in runs/demo

Reads ``ctx.artifacts["results"]`` ({row name: results JSON path, or a list / {benchmark: path} of them},
written by the evaluation stage); when only this stage is rerun (``--only report``) it falls back to the
results JSON found under ``run_dir/evaluation``.
Writes ``report/demo_table.md`` (+ ``.tex`` and bar charts) and ``report/report.md`` listing the training
curves (PNG) other stages left in the run directory. Without results it says so and writes no table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from thinkj.tables import render_table
from thinkj.tables.results import Result, collect_results, load_result


def _results_for(ctx) -> list[Result]:
    mapping = ctx.artifacts.get("results") or {}
    results = []
    for row_name, entry in mapping.items():
        # One path per row, or several (a list, or {benchmark: path}) when benchmark slices were judged too.
        paths = entry.values() if isinstance(entry, dict) else entry if isinstance(entry, (list, tuple)) else [entry]
        for path in paths:
            result = load_result(path)
            if "method" not in result.tags:  # the row name the evaluation stage filed it under
                result.tags["method"] = row_name
            result.tags.setdefault("model", "tiny")
            results.append(result)
    if not results and (ctx.run_dir / "evaluation").is_dir():
        results = collect_results([ctx.run_dir / "evaluation"])
    return results


def _pngs(run_dir: Path) -> list[Path]:
    return sorted(run_dir.rglob("*.png"))


def report(ctx) -> dict[str, Any]:
    out = ctx.stage("report")
    results = _results_for(ctx)
    lines = [f"# Demo run report ({ctx.run_dir})", ""]
    summary: dict[str, Any] = {"results": len(results)}
    if results:
        rendered = render_table("demo", results, out, formats=("latex",))
        (out / "demo_table.md").write_text(rendered.markdown, encoding="utf-8")
        lines += [rendered.markdown, ""]
        summary["table"] = str(out / "demo_table.md")
        filled = {row[0]: cells[0].ours for row, cells in zip(rendered.grid.rows, rendered.grid.cells)}
        summary["accuracy"] = {k: (round(v, 1) if v is not None else None) for k, v in filled.items()}
        print(rendered.markdown)
    else:
        message = ("No evaluation results in this run (the evaluation stage did not run or wrote none), "
                   "so there is no results table.")
        lines += [message, ""]
        summary["table"] = None
        print(message, file=sys.stderr)
    pngs = _pngs(ctx.run_dir)
    summary["pngs"] = len(pngs)
    lines.append("## Training curves and charts")
    lines += [f"- {p.relative_to(ctx.run_dir)}" for p in pngs] or ["(none in this run)"]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    summary["report"] = str(out / "report.md")
    return summary
