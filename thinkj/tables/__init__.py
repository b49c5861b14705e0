"""The paper's tables regenerated from our results JSON, beside the paper's numbers.

    thinkj tables 4 --results runs/ --out runs/tables
    thinkj tables 2 3 4 --results 'runs/**/results*.json' --format both
    thinkj tables demo --results runs/demo_seed0/eval
    thinkj tables rewardbench2 judgebench --results runs/eval      # our runs only (not in the paper)

Modules: ``specs`` (which tags and metrics fill which cell, declarative), ``results`` (reading results
JSON), ``grid`` (filling cells), ``render`` (Markdown / LaTeX), ``charts`` (PNG), ``cli``, ``report``
(the smoke stage).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from thinkj.tables.grid import Grid, build_grid
from thinkj.tables.layouts import PAPER_ONLY, SPECS, get_spec
from thinkj.tables.render import latex, markdown, paper_only_latex, paper_only_markdown
from thinkj.tables.results import Result, collect_results

__all__ = ["Rendered", "build_grid", "collect_results", "render_table", "SPECS", "PAPER_ONLY"]


@dataclass
class Rendered:
    key: str
    markdown: str
    latex: str
    grid: Grid | None = None
    files: list[Path] = field(default_factory=list)


def render_table(key: str | int, results: list[Result], out_dir: Path | None = None, formats: tuple[str, ...] = ("md",),
                 charts: bool = True) -> Rendered:
    """Render one table; with ``out_dir`` also write ``table<key>.md`` / ``.tex`` and the PNG charts."""
    key = str(key)
    if key in PAPER_ONLY:
        rendered = Rendered(key, paper_only_markdown(int(key)), paper_only_latex(int(key)))
    else:
        grid = build_grid(get_spec(key), results)
        rendered = Rendered(key, markdown(grid), latex(grid), grid)
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        if "md" in formats:
            rendered.files.append(out_dir / f"table{key}.md")
            rendered.files[-1].write_text(rendered.markdown, encoding="utf-8")
        if "latex" in formats:
            rendered.files.append(out_dir / f"table{key}.tex")
            rendered.files[-1].write_text(rendered.latex, encoding="utf-8")
        if charts and rendered.grid is not None:
            from thinkj.tables.charts import charts as make_charts

            rendered.files += make_charts(rendered.grid, out_dir)
    return rendered
