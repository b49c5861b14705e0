"""LlamaFactory run configs: model profile + stage YAML + ``key=value`` overrides -> one flat dict.

A stage YAML (``configs/llamafactory/*.yaml``) holds the paper's hyper-parameters for one stage; a
model profile (``configs/models/*.yaml``) holds what depends on the base model (path, chat template). A profile
may name a model of the ``thinkj models`` catalog (``thinkj_model: smollm2``) instead of a path.
Later sources win: profile, then stage, then overrides. Override values are parsed as YAML scalars, so
``learning_rate=1e-6`` is a float and ``max_steps=3`` an int.

    cfg = build_config("configs/llamafactory/judge_sft.yaml", profile="qwen2.5-7b-instruct",
                       overrides=["dataset_dir=runs/x/seed_set/lf", "num_train_epochs=1"])

Every key is checked against LlamaFactory's own argument dataclasses (``llamafactory.hparams``), so a
misspelt key fails here, with the file it came from, instead of deep inside a cluster job.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from thinkj.atomic import write_text_atomic
from thinkj.errors import ThinkJError
from thinkj.paths import PROJECT_ROOT
from thinkj.records import RecordError
from thinkj.yaml_strict import read_yaml

CONFIG_DIR = PROJECT_ROOT / "configs"
STAGE_DIR = CONFIG_DIR / "llamafactory"
PROFILE_DIR = CONFIG_DIR / "models"

# Keys holding paths that are written relative to the checkout (the DeepSpeed JSONs), resolved so runs work from
# any working directory.
_REPO_RELATIVE_KEYS = ("deepspeed",)


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


def resolve_stage_config(name_or_path: str | os.PathLike) -> Path:
    """A path, or a bare stage name (``judge_sft``) looked up in ``configs/llamafactory/``."""
    return _resolve_named(name_or_path, STAGE_DIR, "stage config", Path.exists)


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


def parse_overrides(items: Iterable[str]) -> dict[str, Any]:
    """``["lr=1e-6", "dataset=a,b"]`` -> dict; values are YAML scalars (numbers, booleans, null, strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        # YAML 1.1 reads no/yes/on/off as booleans; LlamaFactory has string options with those values
        # (save_strategy=no), and real booleans are written true/false.
        if isinstance(value, bool) and raw.strip().lower() not in ("true", "false"):
            value = raw.strip()
        # 1e-6 is a string to YAML 1.1; a learning rate written that way must still be a number.
        if isinstance(value, str):
            try:
                value = float(value) if any(c in value.lower() for c in ".e") else value
            except ValueError:
                pass
        out[key] = value
    return out


def llamafactory_keys() -> dict[str, str]:
    """Every argument LlamaFactory's training parser accepts -> the dataclass that defines it."""
    from dataclasses import fields

    from llamafactory.hparams import (
        DataArguments,
        FinetuningArguments,
        GeneratingArguments,
        ModelArguments,
        TrainingArguments,
    )

    keys: dict[str, str] = {}
    for cls in (ModelArguments, DataArguments, TrainingArguments, FinetuningArguments, GeneratingArguments):
        for f in fields(cls):
            keys.setdefault(f.name, cls.__name__)
    return keys


def check_keys(config: dict[str, Any], sources: dict[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` naming the file for any key LlamaFactory does not define."""
    known = llamafactory_keys()
    bad = [k for k in config if k not in known]
    if bad:
        where = "; ".join(f"{k!r} (from {(sources or {}).get(k, 'config')})" for k in bad)
        raise ConfigError(f"not LlamaFactory arguments: {where}")


def build_config(stage: str | os.PathLike, profile: str | os.PathLike | None = None,
                 overrides: Iterable[str] | dict[str, Any] = ()) -> dict[str, Any]:
    """Merge profile, stage YAML and overrides (later wins); check keys; resolve repo-relative paths."""
    sources: dict[str, str] = {}
    merged: dict[str, Any] = {}
    layers: list[tuple[str, dict[str, Any]]] = []
    if profile is not None:
        path = resolve_profile(profile)
        layers.append((str(path), profile_settings(path)))
    stage_path = resolve_stage_config(stage)
    layers.append((str(stage_path), load_yaml(stage_path)))
    extra = dict(overrides) if isinstance(overrides, dict) else parse_overrides(overrides)
    layers.append(("overrides", extra))
    for source, layer in layers:
        for key, value in layer.items():
            merged[key] = value
            sources[key] = source
    check_keys(merged, sources)
    for key in _REPO_RELATIVE_KEYS:
        value = merged.get(key)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            for candidate in (Path(value), PROJECT_ROOT / value):
                if candidate.exists():
                    merged[key] = str(candidate.resolve())
                    break
            else:
                raise ConfigError(f"{sources[key]}: {key} file {value!r} not found (relative to . or {PROJECT_ROOT})")
    if "model_name_or_path" not in merged:
        raise ConfigError(f"{stage_path}: no model_name_or_path -- pass --model PROFILE or model_name_or_path=PATH")
    return merged


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX), where mixed precision pays off."""
    import torch

    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def for_cpu(config: dict[str, Any], *, bf16: bool = False) -> dict[str, Any]:
    """The same run made CPU-safe: fp32 (or bf16 autocast), no DeepSpeed, no FlashAttention, single process.

    ``bf16=True`` keeps fp32 master weights and autocasts matmuls to bf16 (LlamaFactory's ``bf16: true``). It is
    honoured only where the CPU has native bf16: measured on a 2-core AVX512-BF16 EPYC, SmolLM2-135M SFT took 8.0 s
    per step of 4 x ~270 tokens against 12.9 s in fp32; without hardware support bf16 is emulated and slower.
    ``pure_bf16`` (bf16 master weights) stays off: small updates round away. DeepSpeed and flash-attn need CUDA.
    """
    cfg = dict(config)
    for key in ("fp16", "pure_bf16"):
        if cfg.get(key):
            cfg[key] = False
    cfg["bf16"] = bool(bf16 and cpu_has_bf16())
    cfg.pop("deepspeed", None)
    if cfg.get("flash_attn") in ("fa2", "fa3"):
        cfg["flash_attn"] = "sdpa"
    cfg["use_cpu"] = True
    cfg.setdefault("report_to", "none")
    return cfg


def global_batch(config: dict[str, Any], world_size: int) -> int:
    """Sequences per optimizer step: per-device batch x gradient accumulation x number of GPUs."""
    return int(config.get("per_device_train_batch_size", 8)) * int(config.get("gradient_accumulation_steps", 1)) * world_size


def set_global_batch(config: dict[str, Any], target: int, world_size: int) -> dict[str, Any]:
    """Choose ``gradient_accumulation_steps`` so the global batch equals ``target`` on ``world_size`` GPUs."""
    per_step = int(config.get("per_device_train_batch_size", 8)) * world_size
    if target % per_step:
        raise ConfigError(f"global batch {target} is not a multiple of per_device_train_batch_size x GPUs = {per_step}")
    return {**config, "gradient_accumulation_steps": target // per_step}


def save_config(config: dict[str, Any], path: str | os.PathLike) -> Path:
    return write_text_atomic(path, yaml.safe_dump(config, sort_keys=False))
