"""Runs of a recipe sweep: a recipe plus recipe fields -> ``thinkj run RECIPE --set key=value ...``.

A sweep spec that names ``recipe`` (at the top, in ``settings``, in a grid value or a run entry) describes each run
as a pipeline run instead of shell templates: every other field of its ``settings``, grid and runs is a setting of
the run (:mod:`thinkj.pipeline.settings`: ``w_fmt``, ``w_str``, ``rl_algo``, ``learning``, ``benchmarks``, ...), passed
as ``--set``. The fields are checked when the spec is read, through the run settings' own parser
(:func:`thinkj.pipeline.settings.parse_set`: an unknown name gets its "did you mean", a value of the wrong kind is
refused) and each run as a whole through the pipeline's ``validate``, as ``thinkj run --dry-run`` would, so a bad
cell fails before anything is launched, naming the spec file and the key. The pipeline's plan gives what the sweep
needs to know of a run: where its results JSON go (its eval stages' outputs) and the tags they carry
(model / method / train_data, and w_fmt / w_str / w_con when set): the tables read those.

Runs of one recipe share its ``RUN_DIR``: the data and SFT stages run once, and each run adds its own online
folder (named by algorithm and weight overrides, :func:`thinkj.pipeline.learn.online_folder`) and eval folder.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.paths import PROJECT_ROOT
from thinkj.records import RecordError

RECIPE = "recipe"
# Fields a recipe sweep cannot set: how a run is launched is the sweep's to say (--dry-run prints the commands).
NOT_FIELDS = {"dry_run": "the sweep's own --dry-run prints the commands without running them"}
TEMPLATE_KEYS = ("steps", "results", "tags")


def uses_recipes(raw: dict[str, Any]) -> bool:
    """Whether a spec's YAML names a recipe anywhere a run's fields are given."""
    entries: list[Any] = [raw, raw.get("settings")]
    grid = raw.get("grid")
    if isinstance(grid, dict):
        if RECIPE in grid:
            return True
        entries += [v for values in grid.values() if isinstance(values, list) for v in values]
    if isinstance(raw.get("runs"), list):
        entries += raw["runs"]
    return any(isinstance(e, dict) and RECIPE in e for e in entries)


def set_text(value: Any) -> str:
    """A field's YAML value as the text of ``--set key=TEXT`` (a list: its items, space separated)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return shlex.join(str(item) for item in value)
    return str(value)


def check_field(key: Any, value: Any) -> None:
    """One field: ``recipe`` naming a recipe file, or a setting of the run with a value of its kind, refused with
    the run settings' own message (``--set w_sttr: not a setting of the run (did you mean w_str?)``)."""
    from thinkj.pipeline.settings import parse_set

    if key == RECIPE:
        if not isinstance(value, str) or not value.strip():
            raise ThinkJError(f"recipe={value!r}: must be a recipe file (configs/recipes/<model>.yaml)")
        recipe_path(value)
        return
    if not isinstance(key, str):
        raise ThinkJError(f"{key!r}: a field name is a setting of the run")
    if key in NOT_FIELDS:
        raise ThinkJError(f"{key}: not a field of a sweep's run: {NOT_FIELDS[key]}")
    if isinstance(value, dict):
        raise ThinkJError(f"{key}: must be a setting's value, got a mapping {value!r}")
    parse_set([f"{key}={set_text(value)}"])


def check_fields(entry: dict[str, Any], path: Path | None, where: str) -> None:
    """Each key of ``entry`` a field (:func:`check_field`); else a RecordError naming the spec file and
    ``where.key``."""
    for key, value in entry.items():
        try:
            check_field(key, value)
        except ThinkJError as err:
            raise RecordError(str(err).removeprefix("--set "), path=path, field=f"{where}.{key}") from None


def recipe_path(recipe: str, spec: Path | None = None, field: str = RECIPE) -> str:
    """The recipe as the command names it: as written when it exists from here, else under the project root (the
    spec says ``configs/recipes/x.yaml`` whatever the folder the sweep runs from); a missing one is an error."""
    if Path(recipe).is_file():
        return recipe
    rooted = PROJECT_ROOT / recipe
    if not Path(recipe).is_absolute() and rooted.is_file():
        return str(rooted)
    message = f"{recipe}: no such recipe file (the recipes: configs/recipes/*.yaml)"
    raise RecordError(message, path=spec, field=field) if spec is not None else ThinkJError(message)


def set_items(settings: dict[str, Any]) -> list[str]:
    """A run's fields as ``--set`` items, in the spec's order (settings, then grid axes, then the run entry)."""
    return [f"{key}={set_text(value)}" for key, value in settings.items() if key != RECIPE]


def run_command(recipe: str, items: list[str]) -> str:
    return shlex.join(["thinkj", "run", recipe, *(x for item in items for x in ("--set", item))])


def _readable(settings: dict[str, Any]) -> str:
    return " ".join(f"{k}={set_text(v)}" for k, v in settings.items())


def expand_run(settings: dict[str, Any], spec: Path | None) -> tuple[list[str], list[str], dict[str, str]]:
    """One run: its command, its results JSON paths and the tags its evaluation writes, from the pipeline's own
    settings resolution, checks and plan; a run the pipeline refuses is a RecordError naming the spec and run."""
    from thinkj.pipeline.plan import plan, validate
    from thinkj.pipeline.settings import resolve

    if not settings.get(RECIPE):
        raise RecordError("names no recipe: give `recipe:` at the top, in settings, or per grid value / run",
                          path=spec, field=_readable(settings) or RECIPE)
    recipe = recipe_path(str(settings[RECIPE]), spec)
    items = set_items(settings)
    try:
        # the environment too: the command runs in it, and what it sets (RUN_DIR, ...) is where the results go
        values = resolve(recipe, sets=[*items, "dry_run=1"]).values
        validate(values)
        stages = plan(values)
    except ThinkJError as err:
        raise RecordError(f"{err} (in the run {_readable(settings)})", path=spec, field="grid/runs") from None
    evals = [stage for stage in stages if stage.name.startswith("eval_")]
    tags: dict[str, str] = {}
    for stage in evals[:1]:  # every eval stage of a run writes the same tags
        argv = stage.argv
        tags = dict(argv[i + 1].split("=", 1) for i, word in enumerate(argv[:-1]) if word == "--tag")
    return [run_command(recipe, items)], [str(stage.output) for stage in evals], tags
