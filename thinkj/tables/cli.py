"""``thinkj tables``: the paper's tables from our results JSON, with the paper's numbers beside ours.

    thinkj tables 4 --results runs/ --out runs/tables                       # Table 4, Markdown + PNG
    thinkj tables 2 3 4 8 --results 'runs/**/*.json' --format both          # several, Markdown and LaTeX
    thinkj tables demo --results runs/demo_seed0/eval --out runs/demo_seed0/tables
    thinkj tables rewardbench2 judgebench --results runs/eval               # our runs only: not in the paper
    thinkj tables --list                                                    # what each table matches on

Tables 1, 10 and 11 hold no evaluation results and are printed as the paper has them.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(add_completion=False, context_settings={"allow_interspersed_args": True})

FORMATS = {"md": ("md",), "latex": ("latex",), "both": ("md", "latex")}


@app.callback(invoke_without_command=True)
def tables(
    tables: list[str] = typer.Argument(None, help="table numbers (2-9; 1, 10, 11 print the paper's), 'demo', or the "
                                                  "views of our runs only 'rewardbench2', 'judgebench'; "
                                                  "other arguments are taken as results paths (shell-expanded globs)"),
    results: list[str] = typer.Option(None, "--results", "-r", help="results JSON file, directory or glob (repeatable)"),
    out: Path = typer.Option(None, "--out", "-o", help="write table<N>.md/.tex and table<N>_<benchmark>.png here"),
    fmt: str = typer.Option("md", "--format", "-f", help="md | latex | both (stdout and files)"),
    list_specs: bool = typer.Option(False, "--list", help="list the tables and how rows are matched, then exit"),
) -> None:
    """Render paper tables from results JSON (ours / paper / difference per cell)."""
    from thinkj.tables import PAPER_ONLY, SPECS, collect_results, render_table

    if list_specs:
        for key, spec in SPECS.items():
            typer.echo(f"{key:5s} {spec.title}\n      {spec.notes}")
        for key, title in PAPER_ONLY.items():
            typer.echo(f"{key:5s} {title} (paper values only)")
        raise typer.Exit()
    if fmt not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {sorted(FORMATS)}", param_hint="--format")
    keys = [t for t in tables or [] if t in SPECS or t in PAPER_ONLY]
    sources = list(results or []) + [t for t in tables or [] if t not in keys]
    unknown = [t for t in sources if t.isdigit()]
    if unknown:
        raise typer.BadParameter(f"no table {', '.join(unknown)}; the paper has Tables 1-11", param_hint="TABLES")
    if not keys:
        raise typer.BadParameter("name at least one table (e.g. 4) or use --list", param_hint="TABLES")
    if out is not None:
        from thinkj.checks import check_output_dir

        check_output_dir("--out", out)  # before any results are read
    found = collect_results(sources) if sources else []
    typer.echo(f"{len(found)} results file(s) read", err=True)
    for key in keys:
        if out is None:
            rendered, written = render_table(key, found, None, FORMATS[fmt]), []
        else:
            from thinkj.atomic import staged_dir

            # written beside --out first: a full disk leaves the previous table, never an empty or half one
            with staged_dir(out) as stage:
                rendered = render_table(key, found, stage, FORMATS[fmt])
            written = [out / path.name for path in rendered.files]
        if "md" in FORMATS[fmt]:
            typer.echo(rendered.markdown)
        if "latex" in FORMATS[fmt]:
            typer.echo(rendered.latex)
        for path in written:
            typer.echo(f"wrote {path}", err=True)
