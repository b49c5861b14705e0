"""Make TRL 0.24 importable beside transformers 5.x and a newer vLLM, before any trainer is imported.

Two mismatches in the pinned stack (found by importing ``trl.GRPOTrainer`` in it):

* TRL 0.24 keeps flags such as ``_vllm_ascend_available = _is_package_available("vllm_ascend")``. In
  transformers 5 that helper always returns a ``(bool, version)`` tuple, which is truthy, so TRL believes
  every optional package is installed and fails importing ``vllm_ascend``. Each tuple becomes its boolean.
* TRL 0.24 supports vLLM 0.10.2 only and imports ``vllm.sampling_params.GuidedDecodingParams`` whenever
  vLLM is installed; later vLLM releases (the CPU build here is 0.28) removed it. When the installed vLLM
  lacks it, TRL's vLLM integration is switched off and GRPO generates with transformers; a GPU run then
  says so (:mod:`thinkj.online.trl_batching` reads this flag to pick the rollout engine).

Nothing changes where the flags are already right (a TRL release that fixed this, or vLLM 0.10.2).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def _vllm_has_guided_decoding() -> bool:
    spec = importlib.util.find_spec("vllm")  # locates the package without importing it (importing vLLM is slow)
    if spec is None or not spec.submodule_search_locations:
        return False
    source = Path(next(iter(spec.submodule_search_locations))) / "sampling_params.py"
    return source.exists() and "class GuidedDecodingParams" in source.read_text(encoding="utf-8", errors="ignore")


def fix_trl_availability_flags() -> list[str]:
    """Repair TRL's optional-package flags in place; returns the names of the flags that were changed."""
    import trl.import_utils as flags

    fixed = []
    for name, value in vars(flags).copy().items():
        if name.startswith("_") and name.endswith("_available") and isinstance(value, tuple) and value:
            setattr(flags, name, bool(value[0]))
            fixed.append(name)
    if flags._vllm_available and not _vllm_has_guided_decoding():
        flags._vllm_available = False
        fixed.append("_vllm_available")
    return fixed
