"""Inference backends behind one interface (see ``base``); ``make_backend`` builds one by name."""

from __future__ import annotations

import inspect
from typing import Any

from thinkj.errors import ThinkJError, UnknownNameError
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


# the annotations a --backend-arg value is checked against (it arrives parsed as JSON, else as text)
_ARG_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "a whole number"), "float": ((int, float), "a number"), "bool": ((bool,), "true or false"),
    "dict[str,Any]": ((dict,), "a JSON object")}


def check_backend_args(backend: str, kwargs: dict[str, Any]) -> None:
    """``--backend-arg`` items must be ones the backend takes, of the type its constructor declares, and pass the
    backend's own ``check_settings`` (its ranges): one line naming the item before any data or model loads, not a
    TypeError at the first cache miss or a value silently clamped."""
    import importlib

    try:
        target = _BACKENDS.lookup(backend)
    except UnknownNameError:
        return  # reported by the command itself, with the list of backends
    module, name = target.split(":")
    check_constructor_args(backend, getattr(importlib.import_module(module), name), kwargs)


def check_constructor_args(backend: str, cls: type, kwargs: dict[str, Any]) -> None:
    """:func:`check_backend_args` for a class outside the registry (the classifier scorer): names, declared types,
    then ``cls.check_settings`` when it has one."""
    params = inspect.signature(cls.__init__).parameters
    passes_on = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())  # vLLM reports its own
    known = [n for n, p in params.items() if n != "self" and p.kind is inspect.Parameter.KEYWORD_ONLY
             or n not in ("self", "model", "model_path") and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    for key, value in kwargs.items():
        if key not in known:
            if passes_on:
                continue
            raise ThinkJError(f"--backend-arg {key}: the {backend} backend takes no such argument; "
                              f"it takes: {', '.join(known)}")
        annotation = str(params[key].annotation).replace(" ", "")  # a string: the modules use postponed annotations
        optional = annotation.endswith("|None")
        types, words = _ARG_TYPES.get(annotation.removesuffix("|None"), ((object,), ""))
        if value is None and optional:
            continue
        if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
            raise ThinkJError(f"--backend-arg {key}={value!r}: the {backend} backend takes {words} here")
    check_settings = getattr(cls, "check_settings", None)
    if check_settings is not None:
        check_settings(**{key: value for key, value in kwargs.items() if key in known})


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


__all__ = ["InferenceBackend", "Messages", "SamplingParams", "check_backend_args", "check_constructor_args", "make_backend",
           "register_backend"]
