"""Model profiles (``configs/models/<profile>.yaml``): what depends on the base model -- its hub id or catalog name,
chat template, generation budget. Read here for every caller: the LlamaFactory configs (:mod:`thinkj.train.config`),
the pipeline (hub id, fetched folder, budget), evaluation, the difficulty filter and the offline pair builders."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.paths import PROJECT_ROOT
from thinkj.records import RecordError
from thinkj.yaml_strict import read_yaml

CONFIGS = PROJECT_ROOT / "configs"
PROFILE_DIR = CONFIGS / "models"


class ConfigError(ThinkJError):
    """A config file or override that LlamaFactory would reject; the message names the source."""


def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """A flat ``key: value`` YAML file; a file that is not one fails in one line naming the file (and line or key)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such config file")
    try:  # a syntax error, a key written twice, a runaway alias: one line naming the file and line
        data = read_yaml(path) or {}
    except RecordError as err:
        raise ConfigError(str(err)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config must be a mapping of LlamaFactory arguments, got {type(data).__name__}")
    for key, value in data.items():
        if not isinstance(key, str):
            raise ConfigError(f"{path}: key {key!r} is not a name; LlamaFactory arguments are strings")
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{path}: key {key!r} is nested; LlamaFactory configs are flat key: value files "
                              "(a list is written as one comma-separated string)")
    return data


# Profile keys whose value is a name or a path: a number, a boolean or null there is a mistake in the profile.
_PROFILE_STRINGS = ("model_name_or_path", "template", "default_system", "thinkj_model")


def _resolve_named(name_or_path: str | os.PathLike, directory: Path, what: str, path_ok: Callable[[Path], bool]) -> Path:
    path = Path(name_or_path)
    if path_ok(path):
        return path
    candidate = directory / f"{name_or_path}.yaml"
    if candidate.exists():
        return candidate
    known = ", ".join(sorted(p.stem for p in directory.glob("*.yaml")))
    raise ConfigError(f"no {what} {str(name_or_path)!r} (a path, or one of: {known})")


def resolve_profile(name_or_path: str | os.PathLike) -> Path:
    """A path, or a profile name (``qwen2.5-7b-instruct``) looked up in ``configs/models/``."""
    # Only a YAML file counts as a path: a profile name such as "qwen2.5-7b" may also exist as a model folder.
    return _resolve_named(name_or_path, PROFILE_DIR, "model profile",
                          lambda p: p.suffix in (".yaml", ".yml") and p.exists())


DEFAULT_PROFILE = "qwen2.5-7b-instruct"  # the pipeline's MODEL_PROFILE default


def generation_budget(profile: str | os.PathLike | None = None) -> int:
    """``max_new_tokens`` of a model profile (default: the main base model's): the one generation budget of
    evaluation and the difficulty filter."""
    path = resolve_profile(profile or DEFAULT_PROFILE)
    value = load_yaml(path).get("max_new_tokens")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{path}: max_new_tokens must be a positive integer, got {value!r}")
    return value


def profile_settings(path: Path) -> dict[str, Any]:
    """A model profile's LlamaFactory keys; ``thinkj_model: NAME`` becomes the catalog model's converted folder."""
    data = load_yaml(path)
    for key in _PROFILE_STRINGS:
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            raise ConfigError(f"{path}: key {key!r} must be a non-empty string, got {data[key]!r}")
    name = data.pop("thinkj_model", None)
    if name is not None:
        from thinkj.models import MODELS, fetched_model_dir

        if name not in MODELS:
            raise ConfigError(f"{path}: key 'thinkj_model': unknown catalog model {name!r} (known: "
                              f"{', '.join(sorted(MODELS))})")
        data.setdefault("model_name_or_path", str(fetched_model_dir(name)))
    return data




def profile_path(profile: str) -> Path:
    """configs/models/<profile>.yaml, or a profile YAML given by path (a model built for one run: the tiny one)."""
    path = Path(profile) if profile.endswith((".yaml", ".yml")) else CONFIGS / "models" / f"{profile}.yaml"
    if not path.is_file():
        raise ThinkJError(f"MODEL_PROFILE={profile!r}: no {path}")
    return path


def profile_hub_id(profile: str, fetched: bool = True) -> str:
    """The hub id in configs/models/<profile>.yaml (the judge being filtered for, the clip tokenizer). A catalog
    model (``thinkj_model: smollm2``) is its converted folder, which must be fetched unless ``fetched`` is false
    (a dry run prints where it will be)."""
    if not fetched:
        from thinkj.models.catalog import model_dir
        from thinkj.yaml_strict import read_yaml

        data = read_yaml(profile_path(profile))
        if isinstance(data, dict) and isinstance(data.get("thinkj_model"), str) and "model_name_or_path" not in data:
            return str(model_dir(data["thinkj_model"]))
    return str(profile_settings(profile_path(profile))["model_name_or_path"])


def profile_budget(profile: str) -> int:
    """The profile's ``max_new_tokens``: the difficulty filter's budget unless DIFFICULTY_MAX_NEW_TOKENS is set."""
    return generation_budget(profile_path(profile))
