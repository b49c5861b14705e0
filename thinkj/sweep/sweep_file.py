"""Sweep specs (``experiments/*.yaml``): a grid of settings -> named runs -> commands.

A spec that names ``recipe`` (top level, settings, a grid value or a run entry) is a recipe sweep: every other
field is a setting of the run and each run is ``thinkj run RECIPE --set field=value ...`` (no steps, results or
tags: the pipeline's plan gives them; :mod:`thinkj.sweep.recipe_runs`). Otherwise a spec has
  name      the sweep's name (its default folder: runs/sweeps/<name>; letters, digits, ``.``, ``_``, ``-``)
  table     the ``thinkj tables`` key the results fill ("8"), or ``table_spec`` (an inline table for
            tables the paper does not have, e.g. the tiny CPU sweep) -- one of the two at most
  settings  a mapping of values shared by every run; ``--set key=value`` overrides them from the command line
  grid      a mapping of axes, each a list of values, whose cartesian product (with each run entry) gives the runs
            (Table 8: w_fmt x w_str); a value that is a mapping is spread into the settings (e.g. one axis of
            models, each with its profile and SFT checkpoint)
  runs      optional list of settings mappings (one run each, crossed with the grid): Table 4's algorithms
  tags      a mapping of result tags every run's evaluation writes (``{tag_args}`` in a step expands to --tag k=v ...)
  steps     command templates (a list, or one string), formatted with the run's settings plus {name}, {run_dir},
            {sweep_dir}, {tag_args}
  results   results JSON path template(s); a run is finished when all of them exist
  name_keys optional: the settings that make up the readable part of run names [those that vary]

Templates name settings only: ``{lr}``; a positional ``{}`` / ``{0}``, an attribute ``{a.b}`` or a setting no run
has is an error when the spec is read, naming the file and the key. ``{{`` and ``}}`` are literal braces.
Setting values may themselves hold {placeholders} (a per-method ``train`` command); a setting is expanded once,
where a template uses it, and what it expands to is used as it is -- so literal braces stay literal.

A run's name is readable (the settings that vary across the sweep) plus a short hash of everything that makes the
run what it is: all its settings, its commands and results paths as expanded (with its own name and folders left
symbolic) and its tags. Editing a step, a tag, a results path or any setting therefore gives new names, and the
edited runs run again in new folders instead of reusing results made by other commands or labelled otherwise;
the old folders are left as they were. Runs made before names hashed commands and tags (settings only) are not
matched by any name now: a sweep reruns them in new folders.

Every shape error -- a grid that is not a mapping of lists, settings that are not a mapping, a step that YAML read
as a mapping, an unknown table or benchmark -- is a RecordError naming the spec file and the key.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import shlex
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.records import RecordError
from thinkj.rewards.weights import check_value
from thinkj.yaml_strict import read_yaml

SPEC_KEYS = {"name", "description", "table", "table_spec", "settings", "grid", "runs", "tags", "steps", "results", "name_keys",
             "recipe"}
# Values every template gets from the runner; a setting of one of these names would be silently hidden.
RESERVED = ("name", "run_dir", "sweep_dir", "tag_args")
TABLE_SPEC_KEYS = {"title", "rows", "fixed_tags", "group", "columns"}
MAX_RUNS = 10_000  # a sweep is launched run by run; a grid past this is a mistake (an axis pasted as a long list)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # a sweep name is a folder name
_SETTING = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # what a {placeholder} can name


@dataclass(frozen=True)
class Run:
    name: str
    settings: dict[str, Any]
    commands: list[str]
    results: list[Path]
    run_dir: Path
    tags: dict[str, str] = field(default_factory=dict)
    identity: dict[str, Any] = field(default_factory=dict)  # what the name's hash covers (see the module doc)


@dataclass
class SweepSpec:
    name: str
    steps: list[str]
    results: list[str]
    settings: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    runs: list[dict[str, Any]] = field(default_factory=list)
    tags: dict[str, Any] = field(default_factory=dict)
    table: str | None = None
    table_spec: dict[str, Any] | None = None
    description: str = ""
    name_keys: list[str] | None = None
    path: Path | None = None
    recipes: bool = False  # a recipe sweep: each run is `thinkj run RECIPE --set ...` (thinkj.sweep.recipe_runs)


def _read_yaml(path: Path) -> Any:
    if not path.exists():
        raise FileNotFoundError(f"sweep spec {path} does not exist")
    data = read_yaml(path)  # a duplicate key, a runaway alias, an overlong integer: one line naming the file
    if data is None:
        raise RecordError("is empty, expected a sweep spec (name, steps, results, ...)", path=path)
    return data


SCALE_KEYS = {"settings", "table_spec"}


def read_scale(path: str | Path) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A scale file (``experiments/scales/*.yaml``): ``settings`` -- overrides of a spec's settings and grid axes,
    applied like ``--set`` -- and optionally ``table_spec``, an inline table replacing the spec's paper table (whose
    rows name the paper's models). One file runs a paper spec at another scale without copying it."""
    path = Path(path)
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise RecordError(f"a scale file is a YAML mapping (settings, table_spec), got a {_kind(raw)}", path=path)
    unknown = sorted(str(k) for k in raw if k not in SCALE_KEYS)
    if unknown:
        raise RecordError(f"unknown keys {unknown} (known: {sorted(SCALE_KEYS)})", path=path)
    settings = _mapping(raw, "settings", path)
    _check_settings_keys([settings], path, "settings")
    table_spec = raw.get("table_spec")
    if table_spec is not None and not isinstance(table_spec, dict):
        raise RecordError(f"must be a mapping, got a {_kind(table_spec)}", path=path, field="table_spec")
    return settings, table_spec


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None, scale: str | Path | None = None) -> SweepSpec:
    """Read and check a spec; ``overrides`` replace ``settings`` values (and grid axes, given as lists), after the
    ``scale`` file's (:func:`read_scale`), whose table_spec, if any, replaces the spec's table.

    The check is whole: the spec's shape (:func:`check_spec`), the overrides, and every run's expansion, so a
    bad placeholder fails here, naming the file and the key, before anything is launched."""
    path = Path(path)
    spec = check_spec(_read_yaml(path), path)
    if scale is not None:
        scaled, table_spec = read_scale(scale)
        try:
            check_overrides(spec, scaled)
        except ThinkJError as err:
            raise ThinkJError(f"scale {scale}: {err}") from None
        overrides = {**scaled, **(overrides or {})}
        if table_spec is not None:
            spec.table, spec.table_spec = None, table_spec
            for key in scaled:  # the inline table's rows are grid axes: apply the scale's axes before checking it
                if key in spec.grid:
                    spec.grid[key] = scaled[key] if isinstance(scaled[key], list) else [scaled[key]]
            spec.path, where = Path(scale), spec.path
            check_table_spec(spec)
            spec.path = where
    check_overrides(spec, overrides or {})
    for key, value in (overrides or {}).items():
        if key in spec.grid:
            spec.grid[key] = value if isinstance(value, list) else [value]
        else:
            spec.settings[key] = value
    for axis, values in spec.grid.items():
        if not values:
            raise RecordError("a grid axis needs at least one value", path=path, field=f"grid.{axis}")
        _check_settings_keys([v for v in values if isinstance(v, dict)], path, f"grid.{axis}", spec.recipes)
        if spec.recipes:
            _check_settings_keys([{axis: v} for v in values if not isinstance(v, dict)], path, "grid", True)
    if spec.recipes:
        _check_settings_keys([spec.settings], path, "settings", True)
    expand(spec, Path("sweep_dir"))  # every template of every run, with the spec's file and key on failure
    return spec


# --------------------------------------------------------------------------------------------- schema


def _mapping(raw: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError(f"must be a mapping (key: value), got a {_kind(value)}", path=path, field=key)
    return value


def _kind(value: Any) -> str:
    return {list: "list", dict: "mapping", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), type(value).__name__)


def _strings(raw: dict[str, Any], key: str, path: Path, *, required: bool) -> list[str]:
    """A string or a list of strings (steps, results)."""
    value = raw.get(key)
    if value is None or value == [] or value == "":
        if required:
            raise RecordError("missing or empty", path=path, field=key)
        return []
    items = value if isinstance(value, list) else [value]
    for i, item in enumerate(items):
        if isinstance(item, dict):  # `- thinkj ... --tag a: b` is read by YAML as a mapping
            raise RecordError("is a mapping, expected a command string (YAML reads 'key: value' in an unquoted "
                              "line as a mapping: quote the line)", path=path, field=f"{key}[{i}]")
        if not isinstance(item, str) or not item.strip():
            raise RecordError(f"must be a non-empty string, got {item!r}", path=path, field=f"{key}[{i}]")
    return list(items)


def _check_settings_keys(entries: list[dict[str, Any]], path: Path, where: str, recipes: bool = False) -> None:
    """Template settings are words, none of the runner's own names; a recipe sweep's fields are settings of the
    run (:func:`thinkj.sweep.recipe_runs.check_fields`)."""
    if recipes:
        from thinkj.sweep.recipe_runs import check_fields

        for entry in entries:
            check_fields(entry, path, where)
        return
    for entry in entries:
        for key in entry:
            if not isinstance(key, str) or not _SETTING.fullmatch(key):
                raise RecordError(f"setting name {key!r} must be a word (letters, digits, _ or -)", path=path,
                                  field=where)
            if key in RESERVED:
                raise RecordError(f"setting name {key!r} is reserved: every step gets it from the runner "
                                  f"({', '.join(RESERVED)})", path=path, field=f"{where}.{key}")


def check_spec(raw: Any, path: Path) -> SweepSpec:
    """The one schema check of a sweep spec's YAML: every key's shape, or a RecordError naming the file and key."""
    if not isinstance(raw, dict):
        raise RecordError(f"a sweep spec is a YAML mapping, got a {_kind(raw)}", path=path)
    unknown = sorted(str(k) for k in raw if k not in SPEC_KEYS)
    if unknown:
        raise RecordError(f"unknown keys {unknown} (known: {sorted(SPEC_KEYS)})", path=path)
    name = raw.get("name")
    if name is None or name == "":
        raise RecordError("missing or empty", path=path, field="name")
    if isinstance(name, bool) or not isinstance(name, (str, int)) or not _NAME.fullmatch(str(name)):
        raise RecordError(f"must be a plain name (letters, digits, '.', '_', '-'): it names the sweep's folder, got "
                          f"{name!r}", path=path, field="name")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise RecordError(f"must be a string, got a {_kind(description)}", path=path, field="description")
    from thinkj.sweep.recipe_runs import RECIPE, TEMPLATE_KEYS, uses_recipes

    recipes = uses_recipes(raw)
    given = [k for k in TEMPLATE_KEYS if raw.get(k) not in (None, "", [], {})]
    if recipes and given:
        raise RecordError(f"a recipe sweep runs `thinkj run RECIPE --set field=value ...`: its commands, results and "
                          f"tags come from the pipeline, so drop {', '.join(given)} (or drop recipe for shell "
                          "templates)", path=path, field=given[0])
    steps = [" ".join(step.split()) for step in _strings(raw, "steps", path, required=not recipes)]
    results = _strings(raw, "results", path, required=not recipes)

    settings = _mapping(raw, "settings", path)
    if raw.get("recipe") is not None:  # the top-level recipe: every run's, unless a grid value or run gives its own
        settings = {RECIPE: raw["recipe"], **settings}
    _check_settings_keys([settings], path, "settings", recipes)
    grid = _mapping(raw, "grid", path)
    for axis, values in grid.items():
        if not isinstance(axis, str) or not _SETTING.fullmatch(axis):
            raise RecordError(f"axis name {axis!r} must be a word (letters, digits, _ or -)", path=path, field="grid")
        if not isinstance(values, list):
            raise RecordError(f"must be a list of values, got a {_kind(values)} (one value: [{values!r}], or put it "
                              "under settings)", path=path, field=f"grid.{axis}")
        if not values:
            raise RecordError("a grid axis needs at least one value", path=path, field=f"grid.{axis}")
    if recipes:
        _check_settings_keys([{a: v} for a in grid for v in grid[a] if not isinstance(v, dict)], path, "grid", True)
    else:
        _check_settings_keys([{a: None} for a in grid if not all(isinstance(v, dict) for v in grid[a])], path, "grid")
    for axis, values in grid.items():
        _check_settings_keys([v for v in values if isinstance(v, dict)], path, f"grid.{axis}", recipes)
    runs = raw.get("runs")
    if runs is None:
        runs = []
    if not isinstance(runs, list):
        raise RecordError(f"must be a list of settings mappings, got a {_kind(runs)}", path=path, field="runs")
    for i, entry in enumerate(runs):
        if not isinstance(entry, dict):
            raise RecordError(f"must be a mapping of settings, got a {_kind(entry)}", path=path, field=f"runs[{i}]")
        _check_settings_keys([entry], path, f"runs[{i}]", recipes)
    tags = _mapping(raw, "tags", path)
    for key, value in tags.items():
        if not isinstance(key, str) or not key:
            raise RecordError(f"tag name {key!r} must be a string", path=path, field="tags")
        if value is None or isinstance(value, (dict, list)):
            raise RecordError(f"must be a string or number, got {value!r}", path=path, field=f"tags.{key}")
    name_keys = raw.get("name_keys")
    if name_keys is not None and (not isinstance(name_keys, list) or not name_keys
                                  or not all(isinstance(k, str) for k in name_keys)):
        raise RecordError(f"must be a list of setting names, got {name_keys!r}", path=path, field="name_keys")
    table = raw.get("table")
    if table is not None and (isinstance(table, bool) or not isinstance(table, (str, int))):
        raise RecordError(f"must be a table key such as \"8\", got {table!r}", path=path, field="table")
    table_spec = raw.get("table_spec")
    if table is not None and table_spec is not None:
        raise RecordError("give either 'table' (a paper table) or 'table_spec' (an inline table), not both", path=path,
                          field="table_spec")
    spec = SweepSpec(name=str(name), steps=steps, results=results, settings=dict(settings),
                     grid={k: list(v) for k, v in grid.items()}, runs=[dict(r) for r in runs], tags=dict(tags),
                     table=None if table is None else str(table), table_spec=table_spec,
                     description=description or "", name_keys=name_keys, path=path, recipes=recipes)
    if spec.table is not None:
        from thinkj.tables.layouts import SPECS

        if spec.table not in SPECS:
            raise RecordError(f"no results table {spec.table!r} (known: {', '.join(SPECS)})", path=path, field="table")
    if table_spec is not None:
        check_table_spec(spec)
    return spec


def check_table_spec(spec: SweepSpec) -> None:
    """``table_spec``'s shape: rows name grid axes, columns name known benchmarks and a path into the metrics."""
    path, raw = spec.path, spec.table_spec
    if not isinstance(raw, dict):
        raise RecordError(f"must be a mapping, got a {_kind(raw)}", path=path, field="table_spec")
    unknown = sorted(str(k) for k in raw if k not in TABLE_SPEC_KEYS)
    if unknown:
        raise RecordError(f"unknown keys {unknown} (known: {sorted(TABLE_SPEC_KEYS)})", path=path, field="table_spec")
    rows = raw.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, str) for r in rows):
        raise RecordError(f"must be a list of grid axes, got {rows!r}", path=path, field="table_spec.rows")
    missing = [r for r in rows if r not in spec.grid]
    if missing:
        raise RecordError(f"must name grid axes (missing from grid: {missing})", path=path, field="table_spec.rows")
    fixed = raw.get("fixed_tags") or {}
    if not isinstance(fixed, dict) or any(isinstance(v, (dict, list)) or v is None for v in fixed.values()):
        raise RecordError(f"must be a mapping of tag: value, got {fixed!r}", path=path, field="table_spec.fixed_tags")
    for key in ("title", "group"):
        if key in raw and not isinstance(raw[key], (str, int, float)):
            raise RecordError(f"must be a string, got {raw[key]!r}", path=path, field=f"table_spec.{key}")
    columns = raw.get("columns")
    if not isinstance(columns, list) or not columns:
        raise RecordError("needs a list of at least one column", path=path, field="table_spec.columns")
    from thinkj.evaluation.registry import BENCHMARKS

    for i, column in enumerate(columns):
        where = f"table_spec.columns[{i}]"
        if not isinstance(column, dict) or not {"benchmark", "header", "path"} <= set(column):
            raise RecordError(f"must be a mapping with benchmark, header and path, got {column!r}", path=path,
                              field=where)
        if column["benchmark"] not in BENCHMARKS:
            raise RecordError(f"unknown benchmark {column['benchmark']!r}; registered: {', '.join(sorted(BENCHMARKS))}",
                              path=path, field=f"{where}.benchmark")
        keys = column["path"]
        if not isinstance(keys, list) or not keys or not all(isinstance(k, (str, int)) for k in keys):
            raise RecordError(f"must be a list of keys into the results' metrics, got {keys!r}", path=path,
                              field=f"{where}.path")


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``--set key=value`` items; values are read as YAML (``0.5`` -> float, ``[1, 0]`` -> list: a grid axis), by the
    one ``key=value`` parser (:mod:`thinkj.overrides`): a malformed item or a key given twice is one line."""
    from thinkj.overrides import parse_key_values, yaml_value

    return parse_key_values(items, "--set", yaml_value, example="e.g. --set w_str=0.5 or --set 'w_str=[0.5, 0.2]'")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_overrides(spec: SweepSpec, overrides: dict[str, Any]) -> None:
    """An override must name a setting the spec has (a typo would change every run's hash and launch duplicates)
    and keep its kind: a number stays a finite number, a boolean a boolean."""
    existing: dict[str, list[Any]] = {k: [v] for k, v in spec.settings.items()}
    for axis, values in spec.grid.items():
        existing.setdefault(axis, []).extend(v for v in values if not isinstance(v, dict))
        for value in values:
            for k, v in (value.items() if isinstance(value, dict) else ()):
                existing.setdefault(k, []).append(v)
    for entry in spec.runs:
        for k, v in (entry.items() if isinstance(entry, dict) else ()):
            existing.setdefault(k, []).append(v)
    for key, value in overrides.items():
        if key not in existing and spec.recipes:  # any setting of the run, checked by the run settings' parser
            from thinkj.sweep.recipe_runs import check_field

            for item in value if isinstance(value, list) and key in spec.grid else [value]:
                try:
                    check_field(key, item)
                except ThinkJError as err:
                    message = str(err)
                    raise ThinkJError(message if message.startswith("--set") else f"--set {message}") from None
            existing[key] = []
        elif key not in existing:
            import difflib

            close = difflib.get_close_matches(key, existing, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ThinkJError(f"--set {key}: {spec.path} has no setting or grid axis {key!r}{hint}; "
                              f"known: {', '.join(sorted(existing))}")
        new = value if isinstance(value, list) and key in spec.grid else [value]
        old = [v for v in existing[key] if v is not None]
        for item in new:
            if isinstance(item, float) and not math.isfinite(item):
                raise ThinkJError(f"--set {key}={item!r}: must be a finite number")
            if old and all(_is_number(v) for v in old) and not _is_number(item):
                raise ThinkJError(f"--set {key}={item!r}: must be a number, like the spec's {old[0]!r}")
            if old and all(isinstance(v, bool) for v in old) and not isinstance(item, bool):
                raise ThinkJError(f"--set {key}={item!r}: must be true or false, like the spec's {old[0]!r}")
            if key.startswith("w_") and _is_number(item):
                # a reward weight: the rewards' own rule (>= 0, bounded), so a bad cell fails before any launch
                _, problem = check_value(key, item, 0.0)
                if problem:
                    raise ThinkJError(f"--set {key}={item!r}: a reward weight {problem}")


# --------------------------------------------------------------------------------------------- expansion


class _TemplateError(Exception):
    """A template that cannot be expanded; the caller adds the spec file and key."""


class _Values:
    """A run's values for templates: settings expanded on first use (they may name other settings and the
    runner's values), ``tag_args`` built from the tags. A loop between settings is an error, not a hang."""

    def __init__(self, settings: dict[str, Any], fixed: dict[str, str], tags: dict[str, Any]):
        self.settings, self.fixed, self.tags = settings, fixed, tags
        self.done: dict[str, Any] = {}
        self.active: list[str] = []
        self._tags: dict[str, str] | None = None
        self.rendering_tags = False

    def get(self, key: str) -> Any:
        if key in self.fixed:
            return self.fixed[key]
        if key == "tag_args":
            if self._tags is None and self.rendering_tags:
                raise _TemplateError("a tag cannot use {tag_args} (it is made of the tags)")
            return " ".join(f"--tag {shlex.quote(f'{k}={v}')}" for k, v in self.rendered_tags().items())
        if key in self.done:
            return self.done[key]
        if key not in self.settings:
            known = ", ".join([*sorted(self.settings), *RESERVED])
            raise _TemplateError(f"{{{key}}} names no setting of this run (known: {known})")
        if key in self.active:
            raise _TemplateError(f"settings name each other in a loop: {' -> '.join([*self.active, key])}")
        value = self.settings[key]
        if isinstance(value, str):
            self.active.append(key)
            try:
                value = self.render(value)
            except _TemplateError as err:
                raise _TemplateError(f"{err} (in setting {key!r})") from None
            finally:
                self.active.pop()
        self.done[key] = value
        return value

    def rendered_tags(self) -> dict[str, str]:
        if self._tags is None:
            tags = {}
            self.rendering_tags = True
            try:
                for key, value in self.tags.items():
                    try:
                        tags[key] = self.render(str(value))
                    except _TemplateError as err:
                        raise _TemplateError(f"{err} (in tag {key!r})") from None
            finally:
                self.rendering_tags = False
            self._tags = {**tags, "sweep_run": self.fixed["name"]}
        return self._tags

    def render(self, template: str) -> str:
        try:
            return _Formatter(self).vformat(template, (), {})
        except (ValueError, IndexError, TypeError) as err:  # unbalanced braces, a bad format spec or conversion
            raise _TemplateError(f"{template!r}: {err} (a literal brace is written {{{{ or }}}})") from None


class _Formatter(string.Formatter):
    def __init__(self, values: _Values):
        self.values = values

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        if field_name == "" or field_name.isdigit():
            raise _TemplateError(f"positional placeholder {{{field_name}}}: name a setting, e.g. {{lr}} "
                                 "(a literal brace is written {{ or }})")
        if not _SETTING.fullmatch(field_name):
            raise _TemplateError(f"placeholder {{{field_name}}}: a template names a setting only (no attributes, "
                                 "indexes or spaces; a literal brace is written {{ or }})")
        return self.values.get(field_name), field_name


def _hash(identity: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", str(value)).strip("-") or "none"


def run_name(settings: dict[str, Any], varying: list[str], identity: dict[str, Any]) -> str:
    # a recipe by its file's stem: recipe=qwen2.5-32b, not the folders before it
    readable = "_".join(f"{k}={_slug(Path(str(settings.get(k))).stem if k == 'recipe' else settings.get(k))}"
                        for k in varying) or "run"
    return f"{readable}-{_hash(identity)}"


def _expand_one(spec: SweepSpec, settings: dict[str, Any], name: str, run_dir: str, sweep_dir: str
                ) -> tuple[list[str], list[str], dict[str, str]]:
    values = _Values(settings, {"name": name, "run_dir": run_dir, "sweep_dir": sweep_dir}, spec.tags)
    where = "steps"
    try:
        commands = []
        for i, step in enumerate(spec.steps):
            where = f"steps[{i}]"
            commands.append(" ".join(values.render(step).split()))
            if not commands[-1]:  # a step that would run nothing and count as done
                raise _TemplateError(f"{step!r} expands to an empty command (write `true` for a step that does nothing)")
        results = []
        for i, template in enumerate(spec.results):
            where = f"results[{i}]"
            results.append(values.render(template))
        where = "tags"
        tags = values.rendered_tags()
    except _TemplateError as err:
        raise RecordError(str(err), path=spec.path, field=where) from None
    return commands, results, tags


def _check_benchmarks(spec: SweepSpec, commands: list[str]) -> None:
    """``thinkj eval run|score NAME`` in a step must name a registered benchmark: a typo would otherwise fail
    only after the run's training step."""
    from thinkj.evaluation.registry import BENCHMARKS

    for i, command in enumerate(commands):
        try:
            words = shlex.split(command)
        except ValueError:
            continue  # not for us to parse: bash reports it when the step runs
        for k in range(len(words) - 3):
            if words[k:k + 3] in (["thinkj", "eval", "run"], ["thinkj", "eval", "score"]):
                bench = words[k + 3]
                if not bench.startswith("-") and bench not in BENCHMARKS:
                    raise RecordError(f"thinkj eval {words[k + 2]} {bench!r}: unknown benchmark; registered: "
                                      f"{', '.join(sorted(BENCHMARKS))}", path=spec.path, field=f"steps[{i}]")


def expand(spec: SweepSpec, sweep_dir: str | Path) -> list[Run]:
    """Every run of the sweep, in a stable order (explicit runs outer, grid axes inner, as written)."""
    sweep_dir = Path(sweep_dir)
    axes = list(spec.grid)
    count = math.prod(len(spec.grid[a]) for a in axes) * max(1, len(spec.runs))
    if count > MAX_RUNS:
        raise RecordError(f"the grid and runs make {count:,} runs, more than {MAX_RUNS:,}: narrow an axis (--set)",
                          path=spec.path, field="grid")
    points = []
    for combo in itertools.product(*(spec.grid[a] for a in axes)):
        point: dict[str, Any] = {}
        for axis, value in zip(axes, combo):
            point.update(value if isinstance(value, dict) else {axis: value})
        points.append(point)
    # A run entry's own values win over the grid's (Table 3's shared rows set train_data ""); runs that come out
    # identical are run once.
    combos, keys = [], set()
    for entry in spec.runs or [{}]:
        for point in points or [{}]:
            combo = {**spec.settings, **point, **entry}
            key = json.dumps(combo, sort_keys=True, default=str)
            if key not in keys:
                keys.add(key)
                combos.append(combo)
    every_key = list(dict.fromkeys(k for c in combos for k in c))
    if spec.name_keys:
        unknown = [k for k in spec.name_keys if k not in every_key]
        if unknown:
            raise RecordError(f"{unknown} name no setting (settings: {', '.join(every_key)})", path=spec.path,
                              field="name_keys")
    varying = spec.name_keys or [k for k in every_key if len({json.dumps(c.get(k), default=str) for c in combos}) > 1]
    runs, seen = [], set()
    for settings in combos:
        # The identity: what the run does and how its results are labelled, with its own name and folders symbolic
        # (they come from the hash; the sweep folder may move).
        if spec.recipes:  # the command, results and tags of a pipeline run: its name and folders play no part
            from thinkj.sweep.recipe_runs import expand_run

            commands, results, tags = expand_run(settings, spec.path)
        else:
            commands, results, tags = _expand_one(spec, settings, "<name>", "<run_dir>", "<sweep_dir>")
            _check_benchmarks(spec, commands)
        identity = {"settings": settings, "commands": commands, "results": results, "tags": tags}
        name = run_name(settings, varying, identity)
        if name in seen:  # only a hash collision can get here
            raise RecordError(f"two different runs got the same name {name}", path=spec.path)
        seen.add(name)
        run_dir = sweep_dir / "runs" / name  # a recipe run's logs and done marker; its outputs go to its RUN_DIR
        if not spec.recipes:
            commands, results, tags = _expand_one(spec, settings, name, str(run_dir), str(sweep_dir))
        runs.append(Run(name, settings, commands, [Path(r) for r in results], run_dir, tags,
                        {**identity, "hash": _hash(identity)}))
    return runs
