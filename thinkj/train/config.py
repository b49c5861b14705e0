"""LlamaFactory run configs: model profile + stage YAML + ``key=value`` overrides -> one flat dict.

A stage YAML (``configs/llamafactory/*.yaml``) holds the paper's hyper-parameters for one stage; a
model profile (``configs/models/*.yaml``) holds what depends on the base model (path, chat template). A profile
may name a model of the ``thinkj models`` catalog (``thinkj_model: smollm2``) instead of a path.
Later sources win: profile, then stage, then overrides. Override values are parsed as YAML scalars, so
``learning_rate=1e-6`` is a float and ``max_steps=3`` an int.

    cfg = build_config("configs/llamafactory/judge_sft.yaml", profile="qwen2.5-7b-instruct",
                       overrides=["dataset_dir=runs/x/seed_set/lf", "num_train_epochs=1"])

Every key is checked against LlamaFactory's own argument dataclasses (``llamafactory.hparams``), so a
misspelt key fails here, with the file it came from, instead of deep inside a cluster job; so is every value of a
number or true/false argument (``bf16=no`` would be the string "no", which LlamaFactory reads as true), and the
numbers that have a meaningful range are kept to it (``learning_rate`` > 0, ``max_steps`` >= 1 or -1, …).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import math
import os
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from thinkj.atomic import write_text_atomic
from thinkj.models.profiles import (  # noqa: F401  (re-exported: the LlamaFactory config rules use them)
    DEFAULT_PROFILE,
    PROFILE_DIR,
    ConfigError,
    _resolve_named,
    generation_budget,
    load_yaml,
    profile_settings,
    resolve_profile,
)
from thinkj.paths import PROJECT_ROOT

CONFIG_DIR = PROJECT_ROOT / "configs"
STAGE_DIR = CONFIG_DIR / "llamafactory"

# Keys holding paths that are written relative to the checkout (the DeepSpeed JSONs), resolved so runs work from
# any working directory.
_REPO_RELATIVE_KEYS = ("deepspeed",)


def resolve_stage_config(name_or_path: str | os.PathLike) -> Path:
    """A path, or a bare stage name (``judge_sft``) looked up in ``configs/llamafactory/``."""
    return _resolve_named(name_or_path, STAGE_DIR, "stage config", Path.exists)


def parse_overrides(items: Iterable[str], where: str = "override") -> dict[str, Any]:
    """``["lr=1e-6", "dataset=a,b"]`` -> dict; values are YAML scalars as LlamaFactory's arguments want them
    (:func:`thinkj.overrides.yaml_scalar`); a malformed item or a key given twice is a :class:`ConfigError`
    naming ``where`` (the one ``key=value`` parser: :mod:`thinkj.overrides`)."""
    from thinkj.overrides import parse_key_values, yaml_scalar

    return parse_key_values(items, where, yaml_scalar, error=ConfigError)


_ARGUMENT_CLASSES = ("ModelArguments", "DataArguments", "TrainingArguments", "FinetuningArguments",
                     "GeneratingArguments")
_KINDS = {"int": int, "float": float, "bool": bool}


def _schema_key() -> str:
    """What LlamaFactory's argument schema depends on: its version, transformers' (TrainingArguments builds on
    Seq2SeqTrainingArguments) and Python's (how annotations resolve). Read from package metadata, no import."""
    import sys
    from importlib.metadata import PackageNotFoundError, version

    try:
        versions = [version("llamafactory"), version("transformers")]
    except PackageNotFoundError as exc:
        raise ConfigError(f"LlamaFactory's argument check needs {exc.name} installed (pip install -e '.[gpu]' on a "
                          "cluster; scripts/setup_cpu_env.sh here)") from None
    return "-".join(["lf" + versions[0], "tf" + versions[1], f"py{sys.version_info[0]}.{sys.version_info[1]}"])


def _read_schema() -> dict[str, Any]:
    """LlamaFactory's argument dataclasses and chat templates, read by importing it (about 10 s: torch,
    transformers, datasets): every key -> its dataclass, the plain number/boolean keys -> (kind, nullable), the
    template names."""
    from dataclasses import fields

    import llamafactory.hparams as hparams
    from llamafactory.data.template import TEMPLATES

    keys: dict[str, str] = {}
    kinds: dict[str, list] = {}
    for cls in (getattr(hparams, name) for name in _ARGUMENT_CLASSES):
        for f in fields(cls):
            keys.setdefault(f.name, cls.__name__)
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an annotation this Python cannot resolve: its keys keep only the name check
            continue
        for f in fields(cls):
            hint = hints.get(f.name)
            args = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
                else (hint,)
            plain = [a for a in args if a is not type(None)]
            if len(plain) == 1 and plain[0] in (int, float, bool):
                kinds.setdefault(f.name, [plain[0].__name__, len(plain) < len(args)])
    return {"keys": keys, "kinds": kinds, "templates": sorted(TEMPLATES)}


@functools.cache
def llamafactory_schema() -> dict[str, Any]:
    """:func:`_read_schema`, cached on disk under the cache root keyed by :func:`_schema_key`, so a dry run or a
    config check does not import LlamaFactory's whole stack each time (the key changes with any version that could
    change the schema; delete ``<cache>/llamafactory_schema`` to force a re-read)."""
    import json

    from thinkj.paths import cache_root

    path = cache_root() / "llamafactory_schema" / f"{_schema_key()}.json"
    with contextlib.suppress(OSError, ValueError):  # absent or unreadable: read from LlamaFactory, write again
        schema = json.loads(path.read_text())
        if isinstance(schema, dict) and set(schema) == {"keys", "kinds", "templates"}:
            return schema
    schema = _read_schema()
    with contextlib.suppress(OSError):  # a read-only cache costs time, not correctness
        write_text_atomic(path, json.dumps(schema, sort_keys=True))
    return schema


def llamafactory_keys() -> dict[str, str]:
    """Every argument LlamaFactory's training parser accepts -> the dataclass that defines it."""
    return dict(llamafactory_schema()["keys"])


def check_keys(config: dict[str, Any], sources: dict[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` naming the file for any key LlamaFactory does not define."""
    known = llamafactory_keys()
    bad = [k for k in config if k not in known]
    if bad:
        where = "; ".join(f"{k!r} (from {(sources or {}).get(k, 'config')})" for k in bad)
        raise ConfigError(f"not LlamaFactory arguments: {where}")


def llamafactory_kinds() -> dict[str, tuple[type, bool]]:
    """LlamaFactory arguments typed a plain number or boolean -> (int | float | bool, whether null is allowed)."""
    return {key: (_KINDS[kind], nullable) for key, (kind, nullable) in llamafactory_schema()["kinds"].items()}


# key -> (low, low_open, high, high_open): the range a value must lie in; None leaves that side open.
VALUE_RANGES: dict[str, tuple[float | None, bool, float | None, bool]] = {
    "learning_rate": (0, True, None, False),
    "num_train_epochs": (0, True, None, False),
    "per_device_train_batch_size": (1, False, None, False),
    "per_device_eval_batch_size": (1, False, None, False),
    "gradient_accumulation_steps": (1, False, None, False),
    "warmup_ratio": (0, False, 1, False),
    "warmup_steps": (0, False, None, False),
    "weight_decay": (0, False, None, False),
    "max_grad_norm": (0, False, None, False),
    "adam_beta1": (0, False, 1, True),
    "adam_beta2": (0, False, 1, True),
    "adam_epsilon": (0, True, None, False),
    "logging_steps": (0, True, None, False),
    "save_steps": (0, True, None, False),
    "eval_steps": (0, True, None, False),
    "seed": (0, False, None, False),
    "data_seed": (0, False, None, False),
    "cutoff_len": (1, False, None, False),
    "max_samples": (1, False, None, False),
    "val_size": (0, False, None, False),
    "preprocessing_num_workers": (1, False, None, False),
    "dataloader_num_workers": (0, False, None, False),
    "label_smoothing_factor": (0, False, 1, True),
    "pref_beta": (0, True, None, False),
    "pref_ftx": (0, False, None, False),
    "lora_rank": (1, False, None, False),
    "lora_alpha": (0, True, None, False),
    "lora_dropout": (0, False, 1, True),
    "temperature": (0, False, None, False),
    "top_p": (0, True, 1, False),
    "max_new_tokens": (1, False, None, False),
}


def check_values(config: dict[str, Any], sources: dict[str, str] | None = None) -> dict[str, Any]:
    """Refuse, naming the key and where it came from, a value LlamaFactory would misread or train nonsense with: not
    a number (or true/false) where the argument is one, not finite, or outside :data:`VALUE_RANGES`. Returns the
    config with whole floats given for integer arguments (``max_steps=1e3``) made ints."""
    kinds = llamafactory_kinds()
    out = dict(config)
    for key, value in config.items():
        where = f"{key}={value!r} (from {(sources or {}).get(key, 'config')})"
        kind, nullable = kinds.get(key, (None, True))
        if value is None:
            if kind is not None and not nullable:
                raise ConfigError(f"{where}: must be {'true or false' if kind is bool else 'a number'}, not null")
            continue
        if kind is bool:
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: must be true or false")
            continue
        if kind in (int, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(f"{where}: must be a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: must be a finite number")
        if kind is int and isinstance(value, float):
            if not value.is_integer():
                raise ConfigError(f"{where}: must be an integer")
            out[key] = value = int(value)
        if key == "max_steps" and isinstance(value, int) and value != -1 and value < 1:
            raise ConfigError(f"{where}: must be >= 1 (or -1: train for num_train_epochs)")
        limits = VALUE_RANGES.get(key)
        if limits is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        low, low_open, high, high_open = limits
        if low is not None and (value <= low if low_open else value < low):
            raise ConfigError(f"{where}: must be {'>' if low_open else '>='} {low:g}")
        if high is not None and (value >= high if high_open else value > high):
            raise ConfigError(f"{where}: must be {'<' if high_open else '<='} {high:g}")
    return out


def llamafactory_templates() -> list[str]:
    """The chat template names this LlamaFactory registers (``llamafactory.data.template.TEMPLATES``)."""
    return list(llamafactory_schema()["templates"])


def check_template(config: dict[str, Any], sources: dict[str, str] | None = None) -> None:
    """A ``template`` LlamaFactory does not register fails here, naming where it came from, not at the trainer's
    start (LlamaFactory raises only when it builds the dataset, after loading the model)."""
    name = config.get("template")
    if name is None:
        return
    known = llamafactory_templates()
    if name not in known:
        close = difflib.get_close_matches(str(name), known, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(known)}"
        raise ConfigError(f"template={name!r} (from {(sources or {}).get('template', 'config')}): not a chat template "
                          f"of this LlamaFactory ({hint})")


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
    merged = check_values(merged, sources)
    check_template(merged, sources)
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


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX on x86, BF16 on Arm), where mixed precision pays.

    oneDNN's own check is not enough: on an Intel Xeon with AVX-512 but no ``avx512_bf16`` it reports bf16 support,
    and the demo then trained in emulated bf16, several times slower than fp32. So on Linux the CPU's flags decide
    (``cpuinfo``: the text of /proc/cpuinfo, read when not given); where there is no such file, oneDNN's check.
    """
    import torch

    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return True
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 / Arm: the first processor's list speaks for all
            flags = set(value.split())
            return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})
    return True


def for_cpu(config: dict[str, Any], *, bf16: bool = False, processes: int = 1) -> dict[str, Any]:
    """The same run made CPU-safe: fp32 (or bf16 autocast), no FlashAttention; in-process without DeepSpeed, or, with
    ``processes`` > 1, as on a GPU node: torchrun on gloo, the config's DeepSpeed ZeRO stage kept (DeepSpeed runs on
    its CPU accelerator).

    ``bf16=True`` keeps fp32 master weights and autocasts matmuls to bf16 (LlamaFactory's ``bf16: true``). It is
    honoured only where the CPU has native bf16: measured on a 2-core AVX512-BF16 EPYC, SmolLM2-135M SFT took 8.0 s
    per step of 4 x ~270 tokens against 12.9 s in fp32; without hardware support bf16 is emulated and slower.
    ``pure_bf16`` (bf16 master weights) stays off: small updates round away. flash-attn needs CUDA.
    Several processes get no ``use_cpu`` (the launcher hides the GPUs instead): with it transformers builds a ZeRO-3
    model before the process group is up, and DeepSpeed's batch check then counts one process
    ("train_batch_size ... 4 != 2 * 1 * 1", seen with 2 processes).
    """
    cfg = dict(config)
    for key in ("fp16", "pure_bf16"):
        if cfg.get(key):
            cfg[key] = False
    cfg["bf16"] = bool(bf16 and cpu_has_bf16())
    if cfg.get("flash_attn") in ("fa2", "fa3"):
        cfg["flash_attn"] = "sdpa"
    if processes == 1:
        cfg.pop("deepspeed", None)
        cfg["use_cpu"] = True
    else:
        cfg.pop("use_cpu", None)
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


def split_batch(config: dict[str, Any], processes: int) -> dict[str, Any]:
    """The one-process run's global batch on ``processes`` processes: its accumulation steps divided among them
    where they divide, else its per-device batch."""
    per = int(config.get("per_device_train_batch_size", 8))
    steps = int(config.get("gradient_accumulation_steps", 1))
    if steps % processes == 0:
        return {**config, "gradient_accumulation_steps": steps // processes}
    if per % processes == 0:
        return {**config, "per_device_train_batch_size": per // processes}
    raise ConfigError(f"--processes {processes}: divides neither per_device_train_batch_size {per} nor "
                      f"gradient_accumulation_steps {steps} (the one-process run's global batch, {per * steps}, is "
                      "kept)")


def save_config(config: dict[str, Any], path: str | os.PathLike) -> Path:
    return write_text_atomic(path, yaml.safe_dump(config, sort_keys=False))
