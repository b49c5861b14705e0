"""``thinkj sweep SPEC``: expand an experiment spec into named runs, launch the unfinished ones, fill the table.

    thinkj sweep experiments/tiny_table8.yaml --launcher inprocess          # CPU: tiny 2 x 2 reward-weight sweep
    thinkj sweep experiments/table8.yaml --dry-run                          # the 18 runs' `thinkj run` commands
    thinkj sweep experiments/table8.yaml --launcher ray --ray-address http://head:8265
    thinkj sweep experiments/table8.yaml --set 'w_str=[0.5]'                # narrow one grid axis
    thinkj sweep experiments/table8.yaml --set eval_limit=100               # any setting of a recipe sweep's runs
    thinkj sweep experiments/table4_baselines.yaml --set sft_model=runs/x/judge_sft   # a template setting
    thinkj sweep experiments/table8.yaml --table-only                       # just refill the table
    thinkj sweep experiments/table8.yaml --scale experiments/scales/cpu.yaml  # 2 cells, verl on this CPU
    thinkj sweep ... --launcher ray --ray-address http://127.0.0.1:8265 --wait  # submit, wait, fill the table

Finished runs (done marker + results JSON) are skipped; an interrupted sweep resumes at the first unfinished
step of the first unfinished run (``<sweep-dir>/state.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, context_settings={"allow_interspersed_args": True})


@app.callback(invoke_without_command=True)
def sweep(spec_path: Path = typer.Argument(..., metavar="SPEC", help="experiments/<table>.yaml"),
          launcher: str = typer.Option("local", help="local | inprocess | print | ray"),
          dry_run: bool = typer.Option(False, "--dry-run", help="print the runs' commands (same as --launcher print)"),
          sweep_dir: Path = typer.Option(None, help="where runs, state and table go [runs/sweeps/<spec name>]"),
          set_: list[str] = typer.Option(None, "--set", help="override a setting or grid axis: key=value (YAML value)"),
          scale: Path = typer.Option(None, help="a scale file (experiments/scales/): settings applied before --set, "
                                                "and the table for that scale"),
          wait: bool = typer.Option(False, help="ray: wait for each submitted run's job to end (one at a time), so "
                                                "the table is filled when the sweep returns"),
          only: list[str] = typer.Option(None, help="only these runs (full name or its readable part), repeatable"),
          ray_address: str = typer.Option(None, help="Ray dashboard address for `ray job submit` [$RAY_ADDRESS]"),
          table_only: bool = typer.Option(False, help="do not launch anything; fill the table from finished runs")) -> None:
    """Expand SPEC into runs, launch the unfinished ones, collect results JSON and fill the table."""
    from thinkj.checks import check_output_dir
    from thinkj.sweep.runner import run_sweep
    from thinkj.sweep.sweep_file import expand, load_spec, parse_overrides
    from thinkj.sweep.table import fill_table

    spec = load_spec(spec_path, parse_overrides(set_), scale=scale)
    sweep_dir = sweep_dir or Path("runs/sweeps") / spec.name
    check_output_dir("--sweep-dir", sweep_dir)
    mode = "print" if dry_run else launcher
    summary = {"runs": [r.name for r in expand(spec, sweep_dir)]} if table_only else \
        run_sweep(spec, sweep_dir, mode, only=only, ray_address=ray_address, wait=wait)
    if mode != "print":
        filled = fill_table(spec, expand(spec, sweep_dir), sweep_dir / "tables")
        summary["table"] = {k: v for k, v in filled.items() if k != "markdown"}
        if filled.get("markdown"):
            typer.echo(filled["markdown"])
    typer.echo(json.dumps(summary, indent=1), err=True)
    if summary.get("failed"):
        raise typer.Exit(1)
