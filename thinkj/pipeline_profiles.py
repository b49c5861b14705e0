"""What the pipeline reads of a model profile (``configs/models/<profile>.yaml``): its hub id or fetched folder, and
its generation budget. The profile's own rules live in :mod:`thinkj.train.config`."""

from __future__ import annotations

from pathlib import Path

from thinkj.errors import ThinkJError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


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
    from thinkj.train.config import profile_settings

    if not fetched:
        from thinkj.models.catalog import model_dir
        from thinkj.yaml_strict import read_yaml

        data = read_yaml(profile_path(profile))
        if isinstance(data, dict) and isinstance(data.get("thinkj_model"), str) and "model_name_or_path" not in data:
            return str(model_dir(data["thinkj_model"]))
    return str(profile_settings(profile_path(profile))["model_name_or_path"])


def profile_budget(profile: str) -> int:
    """The profile's ``max_new_tokens``: the difficulty filter's budget unless DIFFICULTY_MAX_NEW_TOKENS is set."""
    from thinkj.train.config import generation_budget

    return generation_budget(profile_path(profile))
