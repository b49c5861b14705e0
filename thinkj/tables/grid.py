"""Fill a table spec's cells from results JSON: our value, the paper's value, which file it came from.

Our values come only from results; the paper's only from ``paper_results/``. The two are kept in separate
fields of :class:`Cell` so a renderer cannot mix them up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkj.paper_results import load_paper_table
from thinkj.tables.layouts import Column, ColumnGroup, TableSpec
from thinkj.tables.results import Result, metric_interval, metric_value


@dataclass
class Cell:
    ours: float | None = None
    paper: float | None = None
    interval: tuple[float, float] | None = None
    source: Path | None = None
    notes: list[str] = field(default_factory=list)  # why our number is not a full paper-protocol run

    @property
    def diff(self) -> float | None:
        # From our value as displayed (one decimal, like the paper), so the printed numbers add up.
        return None if self.ours is None or self.paper is None else round(round(self.ours, 1) - self.paper, 1)


@dataclass
class Grid:
    spec: TableSpec
    groups: list[ColumnGroup]
    rows: list[tuple[str, ...]]
    cells: list[list[Cell]]                 # [row][column over all groups]
    warnings: list[str] = field(default_factory=list)

    @property
    def columns(self) -> list[tuple[ColumnGroup, Column]]:
        return [(g, c) for g in self.groups for c in g.columns]

    @property
    def used_sources(self) -> list[Path]:
        return sorted({c.source for row in self.cells for c in row if c.source is not None})


def row_label(row: tuple[str, ...]) -> str:
    """A row's labels as one name (empty labels, i.e. absent tags, left out)."""
    return " / ".join(label for label in row if label) or "(no tags)"


def norm(value: Any) -> str:
    """Tag comparison ignores case, spaces, '-' and '_' ('Llama-3-8B-Instruct' == 'llama3 8b instruct')."""
    return re.sub(r"[\s_\-]+", "", str(value)).lower()


def _tag_matches(tags: dict[str, Any], name: str, accepted: tuple[str, ...]) -> bool:
    value = tags.get(name)
    if value is None or str(value).strip() == "":
        return "" in accepted
    candidates = {norm(value)}
    if name == "model":  # hub ids: meta-llama/Meta-Llama-3-8B-Instruct
        candidates.add(norm(str(value).rstrip("/").split("/")[-1]))
    return any(norm(a) in candidates for a in accepted if a != "")


def _as_float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _weight(tags: dict[str, Any], name: str) -> Any:
    if name in tags:
        return tags[name]
    weights = tags.get("weights")
    return weights.get(name) if isinstance(weights, dict) else None


BASE_METHODS = ("base", "baseline")


def _tag_text(tags: dict[str, Any], name: str) -> str:
    value = tags.get(name)
    return "" if value is None else str(value).strip()


def row_matches(spec: TableSpec, group: ColumnGroup, row: tuple[str, ...], tags: dict[str, Any]) -> bool:
    shared = any(label in spec.shared_rows for label in row)
    for name, accepted in spec.fixed_tags.items():
        if not _tag_matches(tags, name, accepted):
            return False
    if spec.rows_from_results:  # the row is these very tag values: equal, so no result fills two rows
        return tuple(norm(_tag_text(tags, spec.row_tags[k])) for k in spec.row_keys) == tuple(norm(r) for r in row)
    for name, accepted in group.tags.items():
        # Rows that train on nothing (e.g. direct prompting) appear under every training set: the tag may be absent.
        if not _tag_matches(tags, name, accepted + (("",) if shared else ())):
            return False
    if spec.ablation:
        parameter, value = row
        if all(_weight(tags, name) is None for name in group.defaults):
            return False  # an ablation run says which weights it used; an untagged run is not one
        for name, default in group.defaults.items():
            given = _weight(tags, name)
            have = default if given is None else _as_float(given)
            want = _as_float(value) if name == parameter else default
            if have is None or want is None or abs(have - want) > 1e-9:
                return False
        return True
    if _keys_match(spec, row, tags):
        return True
    # The untrained model's row also takes a result tagged method=base, whatever the table's own row tags.
    if spec.base_label and spec.base_label in row and _tag_matches(tags, "method", BASE_METHODS):
        return _keys_match(spec, row, tags, skip=spec.base_label)
    return False


def _keys_match(spec: TableSpec, row: tuple[str, ...], tags: dict[str, Any], skip: str | None = None) -> bool:
    for key, label in zip(spec.row_keys, row):
        if skip is not None and label == skip:
            continue
        if not _tag_matches(tags, spec.row_tags[key], (label, *spec.aliases.get(label, ()))):
            return False
    return True


def _result_rows(spec: TableSpec, results: list[Result]) -> list[tuple[str, ...]]:
    """The distinct row-tag values among the results of the spec's benchmarks (and fixed tags), sorted."""
    benchmarks = {column.metric.benchmark for _, column in spec.columns}
    rows: dict[tuple[str, ...], tuple[str, ...]] = {}
    for result in results:
        if result.benchmark in benchmarks and all(_tag_matches(result.tags, n, a) for n, a in spec.fixed_tags.items()):
            row = tuple(_tag_text(result.tags, spec.row_tags[k]) for k in spec.row_keys)
            rows.setdefault(tuple(norm(v) for v in row), row)
    return [rows[key] for key in sorted(rows)]


def _paper_rows(spec: TableSpec, results: list[Result]) -> tuple[list[tuple[str, ...]], list[dict[str, Any]]]:
    if spec.rows_from_results:
        rows = _result_rows(spec, results)
        return rows, [{} for _ in rows]
    if not spec.paper:
        return [tuple(r) for r in spec.rows], [{} for _ in spec.rows]
    table = load_paper_table(int(spec.key), raw=True)
    return [tuple(r[k] for k in spec.row_keys) for r in table], table


def build_grid(spec: TableSpec, results: list[Result]) -> Grid:
    rows, paper_rows = _paper_rows(spec, results)
    grid = Grid(spec, list(spec.groups), rows, [])
    lacking: dict[Path, list[str]] = {}  # results whose tags match a cell whose metric they lack
    for row, paper_row in zip(rows, paper_rows):
        line = []
        for group, column in spec.columns:
            paper_text = paper_row.get(column.csv, "") if column.csv else ""
            cell = Cell(paper=float(paper_text) if paper_text not in ("", "—") else None)
            matches = [r for r in results if r.benchmark == column.metric.benchmark and row_matches(spec, group, row, r.tags)]
            valued = [(r, metric_value(r, column.metric)) for r in matches]
            for r, v in valued:
                if v is None:
                    lacking.setdefault(r.path, []).append(column.header)
            valued = [(r, v) for r, v in valued if v is not None]
            if valued:
                # Several runs for one cell: the newest wins (provenance.time, then path), and we say so.
                valued.sort(key=lambda rv: (rv[0].time, str(rv[0].path)))
                chosen, cell.ours = valued[-1]
                cell.source, cell.interval = chosen.path, metric_interval(chosen, column.metric)
                # Beside a paper's number, and in views that ask for marks; a demo table's slices say so in their
                # headers.
                cell.notes = chosen.notes() if spec.shows_marks else []
                if len(valued) > 1:
                    where = f"{row_label(row)} [{f'{group.label} ' if group.label else ''}{column.header}]"
                    grid.warnings.append(f"{where}: {len(valued)} results match; "
                                         f"using the newest, {chosen.path}")
            line.append(cell)
        grid.cells.append(line)
    benchmarks = {column.metric.benchmark for _, column in spec.columns}
    used = set(grid.used_sources)
    for result in results:
        if result.benchmark in benchmarks and result.path not in used:
            if result.path in lacking:
                why = f"it lacks the metric of {', '.join(dict.fromkeys(lacking[result.path]))} (absent or null)"
            else:
                why = "it has no tags" if not result.tags else f"its tags {result.tags} match no row"
            grid.warnings.append(f"{result.path} ({result.benchmark}) fills no cell: {why}")
    if not spec.paper:
        _drop_empty_groups(grid)
    return grid


def _drop_empty_groups(grid: Grid) -> None:
    """Tables without a paper counterpart show only the column groups some result fills (the first always)."""
    keep, start = [], 0
    for index, group in enumerate(grid.groups):
        span = range(start, start + len(group.columns))
        if index == 0 or any(grid.cells[r][c].ours is not None for r in range(len(grid.rows)) for c in span):
            keep.append((group, span))
        start += len(group.columns)
    grid.groups = [g for g, _ in keep]
    grid.cells = [[row[c] for _, span in keep for c in span] for row in grid.cells]
