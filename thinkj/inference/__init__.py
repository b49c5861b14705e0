"""Inference backends behind one interface (see ``base``); ``make_backend`` builds one by name."""

from __future__ import annotations

from typing import Any

from thinkj.inference.base import InferenceBackend, Messages, SamplingParams
from thinkj.registry import Registry

_BACKENDS: Registry[str] = Registry("backend", {
    "hf": "thinkj.inference.hf:HFBackend",
    "vllm": "thinkj.inference.vllm_backend:VLLMBackend",
    "openai": "thinkj.inference.http_client:OpenAIChatBackend",
})


def register_backend(name: str, target: str) -> None:
    """Register ``"module:Class"`` under ``name`` (imported lazily: vLLM is heavy and optional)."""
    _BACKENDS[name] = target


def make_backend(name: str, model: str, **kwargs: Any) -> InferenceBackend:
    import importlib

    from thinkj.models import resolve_model

    module, cls = _BACKENDS.lookup(name).split(":")
    # a catalog name (``smollm2``) means its converted folder for the local engines; an HTTP model name stays as is
    local = name in ("hf", "vllm")
    return getattr(importlib.import_module(module), cls)(resolve_model(model) if local else model, **kwargs)


__all__ = ["InferenceBackend", "Messages", "SamplingParams", "make_backend", "register_backend"]
