"""The precision a local engine computes in, as the generation cache keys it.

Greedy answers in bf16 differ from fp32 ones, so :class:`thinkj.inference.cache.CachedBackend` adds a backend's
``precision`` to its model identity. That must be the dtype that *ran*, not the one asked for: ``dtype=auto`` means the
checkpoint's dtype to transformers, float32 to our vLLM backend on CPU, and on GPU vLLM's own choice (float32
checkpoints are downcast to the platform's preferred dtype; ``vllm/config/model.py::_resolve_auto_dtype``).

float32 adds nothing to the key, so fp32 runs keep the keys they always had.
"""

from __future__ import annotations

import json
from pathlib import Path

from thinkj.errors import ThinkJError

DTYPES = ("auto", "float32", "bfloat16", "float16")


def precision_key(dtype: object) -> str | None:
    """The cache suffix for a resolved dtype (``torch.bfloat16`` or ``"bfloat16"``); None for float32."""
    name = str(dtype).removeprefix("torch.")
    return None if name == "float32" else name


def _config_file(model: str | Path, revision: str | None) -> Path | None:
    local = Path(model) / "config.json"
    if local.is_file():
        return local
    if Path(model).exists():
        return None
    from thinkj.inference.identity import cached_hub_file

    cached = cached_hub_file(str(model), "config.json", revision)
    if cached is not None:
        return cached
    try:  # a hub id not cached yet: its config alone from the hub, where reachable, as loading would fetch it
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(str(model), "config.json", revision=revision))
    except Exception:  # noqa: BLE001 -- any failure means "unknown", which the caller reports in one line
        return None


def checkpoint_dtype(model: str | Path, revision: str | None = None) -> str | None:
    """The dtype a checkpoint's ``config.json`` declares (``dtype``, or ``torch_dtype`` before transformers 5);
    float32 when it declares none (transformers' default); None when no config can be read."""
    config = _config_file(model, revision)
    if config is None:
        return None
    try:
        document = json.loads(config.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ThinkJError(f"{config}: unreadable model config ({exc})") from exc
    declared = document.get("dtype") or document.get("torch_dtype") or "float32"
    return str(declared).removeprefix("torch.")


def expected_precision(engine: str, model: str | Path, dtype: str, *, on_cpu: bool,
                       revision: str | None = None) -> str | None:
    """The precision key ``engine`` ("hf" or "vllm") will run ``model`` in with ``dtype``, known before it loads.

    Raises when it cannot be known without loading (``auto`` and no readable config): pass an explicit dtype then, so
    the cache key says what will run. The engine's backend compares this with what it loaded (:func:`check_precision`).
    """
    if dtype not in DTYPES:
        raise ThinkJError(f"{engine} backend: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype != "auto":
        return precision_key(dtype)
    if engine == "vllm" and on_cpu:
        return None  # our vLLM backend runs float32 on CPU (bf16 kernels need AVX512-BF16)
    declared = checkpoint_dtype(model, revision)
    if declared is None:
        raise ThinkJError(f"{engine} backend: dtype=auto for {model!s}, whose config.json cannot be read, so the "
                          "precision it runs in is unknown before loading; pass dtype=float32 or dtype=bfloat16")
    if engine == "vllm" and declared == "float32":
        # vLLM downcasts float32 checkpoints to the platform's first supported dtype: bfloat16 from Ampere on
        # (vllm/platforms/cuda.py::supported_dtypes); older GPUs get float16, which check_precision reports
        return "bfloat16"
    return precision_key(declared)


def check_precision(expected: str | None, ran: str | None, model: str | Path) -> None:
    """Fail before anything is stored under a key that names another precision than the one that ran."""
    if expected != ran:
        raise ThinkJError(f"{model!s}: expected to run in {expected or 'float32'} (the generation cache key) but the "
                          f"engine runs {ran or 'float32'}; pass dtype={ran or 'float32'} explicitly")
