"""Bar charts: per table and benchmark, our value beside the paper's for every row (matplotlib, Agg).

For each column group the chart uses the benchmark's headline column in that group (its last column:
Overall, or Agreement for Auto-J). Tables without a paper counterpart (the demo, the RewardBench 2 and
JudgeBench views) chart every column of the benchmark, ours only, with 95% intervals as error bars when the
results carry them. A bar whose cell the table marks (not a full default-protocol run) is labelled ``62.5*``
and the chart says what the mark means.
"""

from __future__ import annotations

from pathlib import Path

from thinkj.tables.grid import Cell, Grid
from thinkj.tables.render import MARK

BENCH_NAMES = {"rewardbench": "RewardBench", "rmbench": "RM-Bench", "autoj": "Auto-J", "synthetic": "synthetic task",
               "rewardbench2": "RewardBench 2", "judgebench": "JudgeBench"}
MARK_NOTE = f"{MARK} not a full default-protocol run: see the notes under the table"
# distinct up to 8 series of ours (RewardBench 2: six subsets + overall)
OURS_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#d62728", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
PAPER_COLORS = ("#aec7e8", "#98df8a", "#c5b0d5", "#ff9896")


def _marked(cell: Cell) -> bool:
    return cell.ours is not None and bool(cell.notes)


def value_label(value: float | None, ours: bool, marked: bool = False) -> str:
    """The text beside a bar: the value (marked like the table's cell), or why there is none."""
    if value is None:
        return "not run" if ours else "n/a"
    return f"{value:.1f}" + (MARK if marked else "")


def series(grid: Grid, benchmark: str) -> list[tuple[str, list[float | None], bool, list | None, list[bool]]]:
    """(legend label, value per row, is ours, intervals, marked per row) for every series of one benchmark."""
    found, start = [], 0
    for group in grid.groups:
        idx = [start + i for i, c in enumerate(group.columns) if c.metric.benchmark == benchmark]
        start += len(group.columns)
        if not idx:
            continue
        prefix = f"{group.label} " if group.label and len(grid.groups) > 1 and group.label != BENCH_NAMES.get(benchmark) else ""
        chosen = idx if not grid.spec.paper else idx[-1:]
        for ci in chosen:
            header = grid.columns[ci][1].header
            ours = [row[ci].ours for row in grid.cells]
            intervals = [row[ci].interval for row in grid.cells]
            marked = [_marked(row[ci]) for row in grid.cells]
            if grid.spec.paper:
                found.append((f"{prefix}{header} (paper)", [row[ci].paper for row in grid.cells], False, None,
                              [False] * len(grid.cells)))
            found.append((f"{prefix}{header}" + (" (ours)" if grid.spec.paper else ""), ours, True, intervals, marked))
    return found


def benchmarks_of(grid: Grid) -> list[str]:
    seen: list[str] = []
    for _, column in grid.columns:
        if column.metric.benchmark not in seen:
            seen.append(column.metric.benchmark)
    return seen


def bar_chart(grid: Grid, benchmark: str, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = series(grid, benchmark)
    labels = [" / ".join(x for x in row if x) or "(base)" for row in grid.rows]
    n_rows, n_series = len(labels), max(len(drawn), 1)
    height = 0.8 / n_series
    fig, ax = plt.subplots(figsize=(8.5, 1.6 + 0.28 * n_rows * n_series + 0.15 * n_series))
    ours_i = paper_i = 0
    for s, (name, values, ours, intervals, marked) in enumerate(drawn):
        if ours:
            color, ours_i = OURS_COLORS[ours_i % len(OURS_COLORS)], ours_i + 1
        else:
            color, paper_i = PAPER_COLORS[paper_i % len(PAPER_COLORS)], paper_i + 1
        ys = [r + (s - (n_series - 1) / 2) * height for r in range(n_rows)]
        widths = [v if v is not None else 0.0 for v in values]
        err = None
        if ours and intervals and any(intervals):
            err = [[max(v - iv[0], 0) if iv and v is not None else 0 for v, iv in zip(values, intervals)],
                   [max(iv[1] - v, 0) if iv and v is not None else 0 for v, iv in zip(values, intervals)]]
        ax.barh(ys, widths, height=height * 0.95, color=color, label=name, hatch=None if ours else "//",
                edgecolor="white" if ours else "#555555", xerr=err, capsize=2 if err else 0)
        for y, v, iv, mark in zip(ys, values, intervals or [None] * n_rows, marked):
            text = value_label(v, ours, mark)
            ax.text(max(v if v is not None else 0, iv[1] if iv and err else 0) + 0.8, y, text,
                    va="center", fontsize=7, color="#333333" if v is not None else "#aa0000")
    ax.set_yticks(range(n_rows), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 110)
    any_marked = any(any(marked) for *_, marked in drawn)
    ax.set_xlabel("score (%)" + (f"; {MARK_NOTE}" if any_marked else ""), fontsize=8)
    which = "ours vs paper" if grid.spec.paper else "ours"
    head = "" if grid.spec.rows_from_results else f"Table {grid.spec.key}: "
    title = f"{head}{BENCH_NAMES.get(benchmark, benchmark)} ({which})"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.6 / fig.get_figheight() - 0.04), ncol=2, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def charts(grid: Grid, out_dir: Path) -> list[Path]:
    if not grid.rows:  # a results-driven view with no results: nothing to draw
        return []
    return [bar_chart(grid, bench, Path(out_dir) / f"table{grid.spec.key}_{bench}.png") for bench in benchmarks_of(grid)]
