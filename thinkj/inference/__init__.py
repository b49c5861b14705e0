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


LOCAL_ENGINES = ("hf", "vllm")  # backends that load the model here (an HTTP backend names a served model)


def make_backend(name: str, model: str, **kwargs: Any) -> InferenceBackend:
    import importlib

    from thinkj.inference.identity import check_model_source
    from thinkj.models import resolve_model

    module, cls = _BACKENDS.lookup(name).split(":")
    # a catalog name (``smollm2``) means its converted folder for the local engines; an HTTP model name stays as is
    local = name in LOCAL_ENGINES
    if local:
        model = resolve_model(model)
        check_model_source(str(model), kwargs.get("revision"))
    return getattr(importlib.import_module(module), cls)(model, **kwargs)


__all__ = ["InferenceBackend", "Messages", "SamplingParams", "make_backend", "register_backend"]
