"""A backend that loads its engine on the first generate call: a rerun served wholly from the cache loads no model."""

from __future__ import annotations

from typing import Any

from thinkj.errors import UnknownNameError
from thinkj.inference.base import InferenceBackend, SamplingParams


class LazyBackend:
    """Builds the real backend on the first generate call, so a rerun served wholly from the cache loads no model.

    Its ``name`` (part of every cache key) is the model string as given, like the HF and vLLM backends' names.
    ``also`` names the caller's other choices for the error message of an unknown backend.
    """

    def __init__(self, backend: str, model: str, kwargs: dict[str, Any], also: tuple[str, ...] = ()):
        from thinkj.inference import _BACKENDS, LOCAL_ENGINES
        from thinkj.inference.identity import check_model_source

        if backend not in _BACKENDS:  # fail before any work, not at the first cache miss
            raise UnknownNameError(f"unknown backend {backend!r}; available: {', '.join(sorted(_BACKENDS))}"
                                   + "".join(f", {name}" for name in also))
        self.backend, self.name, self.kwargs = backend, str(model), kwargs
        if backend == "openai":  # a served model is keyed on its endpoint too (docs/runs.md, "Cache")
            from thinkj.inference.http_client import DEFAULT_BASE_URL, served_identity

            self.identity = served_identity(self.name, str(kwargs.get("base_url") or DEFAULT_BASE_URL))
        self.revision = kwargs.get("revision")
        self.precision: str | None = None
        if backend in LOCAL_ENGINES:  # a missing model folder fails now, even when the cache could answer
            check_model_source(self.name, self.revision)
            # the cache key names the precision the engine will run in, known here without loading the model
            import torch

            from thinkj.inference.precision import expected_precision
            from thinkj.models import resolve_model

            self.precision = expected_precision(backend, resolve_model(self.name), str(kwargs.get("dtype", "auto")),
                                                on_cpu=not torch.cuda.is_available(), revision=self.revision)
        self._inner: InferenceBackend | None = None

    def generate(self, conversations, params: SamplingParams) -> list[list[str]]:
        if self._inner is None:
            from thinkj.inference import LOCAL_ENGINES, make_backend
            from thinkj.inference.precision import check_precision

            inner = make_backend(self.backend, self.name, **self.kwargs)
            if self.backend in LOCAL_ENGINES:  # nothing generated yet, so a wrong key has stored nothing
                check_precision(self.precision, getattr(inner, "precision", None), self.name)
            self._inner = inner
        return self._inner.generate(conversations, params)
