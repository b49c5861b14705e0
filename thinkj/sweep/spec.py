"""Sweep specs (``experiments/*.yaml``): a grid of settings -> named runs -> shell commands.

A spec has
  name      the sweep's name (its default folder: runs/sweeps/<name>)
  table     the ``thinkj tables`` key the results fill ("8"), or ``table_spec`` (an inline table for
            tables the paper does not have, e.g. the tiny CPU sweep)
  settings  values shared by every run; ``--set key=value`` overrides them from the command line
  grid      axes whose cartesian product (with each run entry) gives the runs (Table 8: w_fmt x w_str); a value that is a mapping
            is spread into the settings (e.g. one axis of models, each with its profile and SFT checkpoint)
  runs      optional list of settings dicts (one run each, crossed with the grid): Table 4's algorithms
  tags      result tags every run's evaluation writes (``{tag_args}`` in a step expands to --tag k=v ...)
  steps     command templates, formatted with the run's settings plus {name}, {run_dir}, {sweep_dir}, {tag_args}
  results   results JSON path template(s); a run is finished when all of them exist
  name_keys optional: the settings that make up the readable part of run names [those that vary]
Setting values may themselves hold {placeholders} (a per-method ``train`` command); they are expanded too.
A run's name is readable (the settings that vary across the sweep) plus a short hash of ALL its settings, so
changing anything else (a learning rate through --set) gives new names instead of reusing old results.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from thinkj.errors import ThinkJError
from thinkj.records import RecordError

SPEC_KEYS = {"name", "description", "table", "table_spec", "settings", "grid", "runs", "tags", "steps", "results", "name_keys"}


@dataclass(frozen=True)
class Run:
    name: str
    settings: dict[str, Any]
    commands: list[str]
    results: list[Path]
    run_dir: Path
    tags: dict[str, str] = field(default_factory=dict)


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


def load_spec(path: str | Path, overrides: dict[str, Any] | None = None) -> SweepSpec:
    """Read and check a spec; ``overrides`` replace ``settings`` values (and grid axes, given as lists)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"sweep spec {path} does not exist")
    if path.is_dir():
        raise RecordError("is a folder, expected a sweep spec YAML file", path=path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError as err:
        raise RecordError(f"not UTF-8 text (byte {err.start}); a binary file?", path=path) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = " ".join(str(getattr(err, "problem", None) or err).split())
        raise RecordError(f"not valid YAML: {problem}", path=path, line=None if mark is None else mark.line + 1) from None
    if not isinstance(raw, dict):
        raise RecordError("a sweep spec is a YAML mapping", path=path)
    unknown = set(raw) - SPEC_KEYS
    if unknown:
        raise RecordError(f"unknown keys {sorted(unknown)} (known: {sorted(SPEC_KEYS)})", path=path)
    for key in ("name", "steps", "results"):
        if not raw.get(key):
            raise RecordError("missing or empty", path=path, field=key)
    results = raw["results"] if isinstance(raw["results"], list) else [raw["results"]]
    spec = SweepSpec(name=str(raw["name"]), steps=[str(s).strip() for s in raw["steps"]], results=[str(r) for r in results],
                     settings=dict(raw.get("settings") or {}), grid={k: list(v) for k, v in (raw.get("grid") or {}).items()},
                     runs=list(raw.get("runs") or []), tags=dict(raw.get("tags") or {}),
                     table=None if raw.get("table") is None else str(raw["table"]), table_spec=raw.get("table_spec"),
                     description=str(raw.get("description", "")), name_keys=raw.get("name_keys"), path=path)
    check_overrides(spec, overrides or {})
    for key, value in (overrides or {}).items():
        if key in spec.grid:
            spec.grid[key] = value if isinstance(value, list) else [value]
        else:
            spec.settings[key] = value
    for axis, values in spec.grid.items():
        if not values:
            raise RecordError("a grid axis needs at least one value", path=path, field=f"grid.{axis}")
    return spec


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` strings; values are read as YAML (``0.5`` -> float, ``[1, 0]`` -> list)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ThinkJError(f"--set {item!r}: expected key=value")
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            problem = " ".join(str(getattr(err, "problem", None) or err).split())
            raise ThinkJError(f"--set {item!r}: the value is not valid YAML ({problem})") from None
    return out


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
        if key not in existing:
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


def settings_hash(settings: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:8]


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "-", str(value)).strip("-") or "none"


def run_name(settings: dict[str, Any], varying: list[str]) -> str:
    readable = "_".join(f"{k}={_slug(settings.get(k))}" for k in varying) or "run"
    return f"{readable}-{settings_hash(settings)}"


class _Missing(dict):
    def __missing__(self, key: str) -> str:
        raise KeyError(f"template uses {{{key}}} but no setting of that name exists (settings: {sorted(self)})")


def _format(template: str, values: dict[str, Any]) -> str:
    # Settings may hold templates themselves (a method's train command names {run_dir}): expand until stable.
    text = str(template)
    for _ in range(5):
        expanded = text.format_map(_Missing(values))
        if expanded == text or "{" not in expanded:
            return expanded
        text = expanded
    return expanded


def expand(spec: SweepSpec, sweep_dir: str | Path) -> list[Run]:
    """Every run of the sweep, in a stable order (explicit runs outer, grid axes inner, as written)."""
    sweep_dir = Path(sweep_dir)
    axes = list(spec.grid)
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
    varying = spec.name_keys or [k for k in dict.fromkeys(k for c in combos for k in c)
                                 if len({json.dumps(c.get(k), default=str) for c in combos}) > 1]
    runs, seen = [], set()
    for settings in combos:
        name = run_name(settings, varying)
        if name in seen:  # only a hash collision can get here
            raise RecordError(f"two different runs got the same name {name}", path=spec.path)
        seen.add(name)
        run_dir = sweep_dir / "runs" / name
        values = {**settings, "name": name, "run_dir": str(run_dir), "sweep_dir": str(sweep_dir)}
        tags = {k: _format(str(v), values) for k, v in spec.tags.items()}
        tags["sweep_run"] = name
        values["tag_args"] = " ".join(f"--tag {shlex.quote(f'{k}={v}')}" for k, v in tags.items())
        commands = [" ".join(_format(step, values).split()) for step in spec.steps]
        runs.append(Run(name, settings, commands, [Path(_format(r, values)) for r in spec.results], run_dir, tags))
    return runs
