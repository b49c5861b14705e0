"""Markdown and LaTeX for a filled table, and the paper-only tables (1, 10, 11).

Paper tables: each cell reads ``ours / paper (ours - paper)``; "—" for ours means no result of ours fills
the cell (the paper's number is never shown in our place). Tables without a paper counterpart (the demo, the
RewardBench 2 and JudgeBench views) show our value, with its 95% interval when the results carry one.
A number of ours that is not a full default-protocol run is marked ``*`` with a legend line and one note per
marked cell under the table (paper tables and the views that ask for marks).
"""

from __future__ import annotations

from thinkj.paper_results import load_paper_table
from thinkj.tables.grid import Cell, Grid, row_label
from thinkj.tables.layouts import PAPER_ONLY, PAPER_PROTOCOL

DASH = "—"
LEGEND = f"Each cell: ours / paper (ours − paper). {DASH} in our place: not run by us; {DASH} for the paper: not reported."


def fmt(value: float | None) -> str:
    return DASH if value is None else f"{value:.1f}"


MARK = "*"
MARK_LEGEND = (f"Marked ({MARK}): our number is not a full default-protocol run (incomplete, --limit, not official, "
               f"--protocol other than {PAPER_PROTOCOL}, or --unparsed-half); the note for each marked cell says which, "
               "and names the results file.")


def ours_text(cell: Cell) -> str:
    """Our number, marked when it is not a full paper-protocol run (the footnote says why)."""
    return fmt(cell.ours) + (MARK if cell.ours is not None and cell.notes else "")


def cell_text(cell: Cell, paper: bool) -> str:
    if not paper:
        text = ours_text(cell)
        if cell.ours is not None and cell.interval:
            text += f" [{cell.interval[0]:.1f}, {cell.interval[1]:.1f}]"
        return text
    text = f"{ours_text(cell)} / {fmt(cell.paper)}"
    if cell.diff is not None:
        text += f" ({cell.diff:+.1f})"
    return text


def _headers(grid: Grid) -> list[str]:
    keys = list(grid.spec.row_keys)
    return keys + [f"{g.label} {c.header}".strip() if g.label else c.header for g, c in grid.columns]


def _mark_notes(grid: Grid) -> list[str]:
    """One footnote per marked cell: which cell, why, and the results file."""
    lines = []
    for row, cells in zip(grid.rows, grid.cells):
        for (group, column), cell in zip(grid.columns, cells):
            if cell.ours is not None and cell.notes:
                where = f"{row_label(row)} [{f'{group.label} ' if group.label else ''}{column.header}]"
                lines.append(f"{MARK} {where}: {'; '.join(cell.notes)} ({cell.source})")
    return lines


def _footer(grid: Grid) -> list[str]:
    lines = [f"Rows matched by: {grid.spec.notes}.", f"Filled from {len(grid.used_sources)} results file(s)."]
    notes = _mark_notes(grid)
    lines += [MARK_LEGEND] * bool(notes) + notes
    lines += [f"Warning: {w}" for w in grid.warnings]
    return lines


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(grid: Grid) -> str:
    spec = grid.spec
    head = f"Table {spec.key}" if spec.key.isdigit() else f"Table ({spec.key})"
    out = [f"**{head}.** {spec.title}", ""]
    if spec.caption:
        out += [spec.caption, ""]
    if spec.paper:
        out += [LEGEND, ""]
    elif any(c.interval for row in grid.cells for c in row):
        out += ["Brackets: 95% interval.", ""]
    headers = _headers(grid)
    out.append("| " + " | ".join(_md_escape(h) for h in headers) + " |")
    out.append("|" + "|".join("---" if i < len(spec.row_keys) else "---:" for i in range(len(headers))) + "|")
    for row, cells in zip(grid.rows, grid.cells):
        texts = [_md_escape(r) for r in row] + [cell_text(c, spec.paper) for c in cells]
        out.append("| " + " | ".join(texts) + " |")
    out += [""] + _footer(grid)
    return "\n".join(out) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "—": "---",
                  "−": "$-$", "·": r"$\cdot$"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def _latex_cell(cell: Cell, paper: bool) -> str:
    if not paper:
        return latex_escape(cell_text(cell, paper))
    text = f"{latex_escape(ours_text(cell))} / {latex_escape(fmt(cell.paper))}"
    if cell.diff is not None:
        text += rf" {{\scriptsize({cell.diff:+.1f})}}"
    return text


def latex(grid: Grid) -> str:
    spec = grid.spec
    nkeys = len(spec.row_keys)
    lines = [r"% requires \usepackage{booktabs}", r"\begin{table*}[t]", r"\centering", r"\small",
             rf"\begin{{tabular}}{{{'l' * nkeys}{'r' * len(grid.columns)}}}", r"\toprule"]
    if any(g.label for g in grid.groups):
        parts, rules, start = ["" for _ in range(nkeys)], [], nkeys + 1
        for g in grid.groups:
            width = len(g.columns)
            parts.append(rf"\multicolumn{{{width}}}{{c}}{{{latex_escape(g.label)}}}")
            rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
            start += width
        lines.append(" & ".join(parts) + r" \\")
        lines.append(" ".join(rules))
    header = [latex_escape(k) for k in spec.row_keys] + [latex_escape(c.header) for _, c in grid.columns]
    lines += [" & ".join(header) + r" \\", r"\midrule"]
    for row, cells in zip(grid.rows, grid.cells):
        lines.append(" & ".join([latex_escape(r) for r in row] + [_latex_cell(c, spec.paper) for c in cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    notes = _mark_notes(grid)
    lines += [rf"\par{{\footnotesize {latex_escape(note)}}}" for note in [MARK_LEGEND] * bool(notes) + notes]
    caption = latex_escape(spec.title) + (". " + latex_escape(LEGEND) if spec.paper else "")
    caption += (". " + latex_escape(spec.caption)) if spec.caption else ""
    label = spec.key if spec.key.isdigit() else spec.key.replace("_", "-")
    lines += [rf"\caption{{{caption}}}", rf"\label{{tab:thinkj-{label}}}", r"\end{table*}"]
    return "\n".join(lines) + "\n"


def paper_only_markdown(n: int) -> str:
    rows = load_paper_table(n, raw=True)
    headers = list(rows[0])
    out = [f"**Table {n}.** {PAPER_ONLY[str(n)]} — the paper's values only (this table holds no evaluation results).", "",
           "| " + " | ".join(_md_escape(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(_md_escape(v) if v else DASH for v in row.values()) + " |" for row in rows]
    return "\n".join(out) + "\n"


def paper_only_latex(n: int) -> str:
    rows = load_paper_table(n, raw=True)
    headers = list(rows[0])
    lines = [r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{l{'r' * (len(headers) - 1)}}}", r"\toprule",
             " & ".join(latex_escape(h) for h in headers) + r" \\", r"\midrule"]
    lines += [" & ".join(latex_escape(v or DASH) for v in row.values()) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_escape(PAPER_ONLY[str(n)])} (paper's values)}}",
              r"\end{table}"]
    return "\n".join(lines) + "\n"
