"""verl's CPU platform: imported by verl itself in every process of a CPU run, never on GPU nodes.

``thinkj.online.verl_cpu.cpu_environment`` sets ``VERL_USE_EXTERNAL_MODULES=thinkj.online.verl_cpu_platform``
and ``VERL_PLATFORM=cpu``; ``import verl`` (``verl/__init__.py``) then imports this module in the driver, the
Ray workers and vLLM's engine process. It registers a ``cpu`` platform with verl's ``PlatformRegistry``
(``verl/plugin/platform``) and applies four small runtime fixes. Each fix names the upstream line it works
around and first checks that the line is still there: after an upgrade that removes or changes it, the
import fails with :class:`StalePatch` instead of patching something that moved.

Importing it by hand on a GPU machine is refused (it would turn verl's device to ``cpu``).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

PLATFORM_NAME = "cpu"


class StalePatch(RuntimeError):
    """An upstream line that a CPU fix works around has changed: re-check the fix before using it."""


def require_source(func: Callable, needle: str, why: str) -> None:
    """Fail unless ``needle`` still occurs in ``func``'s source (the line the fix works around)."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError) as err:
        raise StalePatch(f"cannot read the source of {func.__module__}.{func.__qualname__}: {err}") from None
    if needle not in source:
        raise StalePatch(f"{func.__module__}.{func.__qualname__} no longer contains {needle!r}; the CPU fix for "
                         f"'{why}' may be unnecessary or wrong now (thinkj/online/verl_cpu_platform.py)")


class _CPUDevice(ModuleType):
    """``torch.cpu`` plus the ``torch.cuda``-style calls verl makes on its device module (memory, rng, ipc)."""

    def __init__(self) -> None:
        super().__init__("thinkj_verl_cpu_device")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        import psutil

        vm = psutil.virtual_memory()
        return vm.available, vm.total

    @staticmethod
    def _noop(*args: Any, **kwargs: Any) -> None:
        return None

    empty_cache = ipc_collect = set_per_process_memory_fraction = reset_peak_memory_stats = _noop

    @staticmethod
    def _zero(*args: Any, **kwargs: Any) -> int:
        return 0

    memory_allocated = memory_reserved = max_memory_allocated = max_memory_reserved = _zero


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """Host CPU as verl's accelerator: gloo collectives; Ray still schedules on the declared ``GPU`` resource."""

    _device = _CPUDevice()

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return self._device

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        return False  # never auto-detected: chosen only by VERL_PLATFORM=cpu

    def current_device(self) -> str:
        # verl passes this straight to .to(device=...) / torch.device(); an int would mean an accelerator index
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for actors holding the declared GPU; a CPU build of torch ignores it
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        # verl's resource-pool check counts "GPU"; the launcher starts Ray with num_gpus=<declared>
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


# --- the fixes -------------------------------------------------------------------------------------------------
# fix -> (module, function, the upstream text it works around). check_upstream() verifies them all.
UPSTREAM = {
    "process_group_backend": ("verl.utils.distributed", "initialize_global_process_group_ray",
                              'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"'),
    "offload_pinning": ("verl.workers.engine.fsdp.transformer_impl", "FSDPEngine._build_fsdp_module",
                        "CPUOffloadPolicy(pin_memory=True)"),
    "value_head_attention": ("verl.utils.model", "load_valuehead_model", 'attn_implementation="flash_attention_2"'),
    "vllm_weight_prepacking": ("vllm.model_executor.layers.utils", "dispatch_cpu_unquantized_gemm",
                               "layer.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)"),
}


def _upstream(name: str) -> Callable:
    import importlib

    module, qualname, _ = UPSTREAM[name]
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return getattr(obj, "_thinkj_original", obj)


def check_upstream(name: str) -> None:
    """Raise :class:`StalePatch` unless the upstream line fix ``name`` works around is still there."""
    require_source(_upstream(name), UPSTREAM[name][2], name.replace("_", " "))


def check_all_upstream() -> list[str]:
    for name in UPSTREAM:
        check_upstream(name)
    return list(UPSTREAM)


def fix_process_group_backend() -> None:
    """verl/utils/distributed.py builds ``f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"``, which on this
    platform is ``cpu:gloo,cpu:gloo``; torch refuses a device type named twice. Pass plain ``cpu:gloo``."""
    from verl.utils import distributed

    original = distributed.initialize_global_process_group_ray
    if hasattr(original, "_thinkj_original"):
        return
    check_upstream("process_group_backend")

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    initialize_global_process_group_ray._thinkj_original = original
    distributed.initialize_global_process_group_ray = initialize_global_process_group_ray


def fix_offload_pinning() -> None:
    """verl/workers/engine/fsdp/transformer_impl.py gives the reference policy ``CPUOffloadPolicy(pin_memory=True)``;
    pinning host memory needs an accelerator. Same offload, unpinned."""
    from verl.utils import fsdp_utils

    policy_cls = fsdp_utils.CPUOffloadPolicy
    if hasattr(policy_cls, "_thinkj_original"):
        return
    # reading the engine's source imports it; it then picks up the patched name only through the line below
    check_upstream("offload_pinning")
    engine = sys.modules["verl.workers.engine.fsdp.transformer_impl"]

    def unpinned_offload_policy(pin_memory: bool = True):
        return policy_cls(pin_memory=False)

    unpinned_offload_policy._thinkj_original = policy_cls
    fsdp_utils.CPUOffloadPolicy = engine.CPUOffloadPolicy = unpinned_offload_policy


def fix_value_head_attention() -> None:
    """verl/utils/model.py ``load_valuehead_model`` (PPO's critic) hard-codes
    ``attn_implementation="flash_attention_2"``, which needs CUDA. Load it with ``sdpa``."""
    from verl.utils import model

    original = model.load_valuehead_model
    if hasattr(original, "_thinkj_original"):
        return
    check_upstream("value_head_attention")

    def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):
        with _attention_forced("sdpa"):
            return original(local_path, torch_dtype, model_config, trust_remote_code)

    load_valuehead_model._thinkj_original = original
    model.load_valuehead_model = load_valuehead_model


@contextmanager
def _attention_forced(implementation: str):
    from transformers import modeling_utils

    cls = modeling_utils.PreTrainedModel
    original = cls.from_pretrained.__func__

    def from_pretrained(klass, *args, **kwargs):
        if kwargs.get("attn_implementation") == "flash_attention_2":
            kwargs["attn_implementation"] = implementation
        return original(klass, *args, **kwargs)

    cls.from_pretrained = classmethod(from_pretrained)
    try:
        yield
    finally:
        cls.from_pretrained = classmethod(original)


def fix_vllm_weight_prepacking() -> None:
    """vllm/model_executor/layers/utils.py ``dispatch_cpu_unquantized_gemm`` prepacks linear weights for
    oneDNN and replaces ``layer.weight`` with an empty tensor, dropping its ``weight_loader``; verl's weight
    sync (``model.load_weights``) then fails. Keep the weight and use plain ``torch.nn.functional.linear``."""
    from vllm.model_executor.layers import utils

    original = utils.dispatch_cpu_unquantized_gemm
    if hasattr(original, "_thinkj_original"):
        return
    check_upstream("vllm_weight_prepacking")

    def dispatch_cpu_unquantized_gemm(layer: torch.nn.Module, remove_weight: bool) -> None:
        if layer.weight.ndim != 2:  # conv / MoE weights: vLLM's own path
            return original(layer, remove_weight)
        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)

    dispatch_cpu_unquantized_gemm._thinkj_original = original
    utils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Run ``callback`` right after module ``name`` is first imported (vLLM loads in only some processes)."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name, self.callback, self.loader = name, callback, None

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self.loader is not None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        sys.meta_path.remove(self)
        self.callback()


def apply_fixes() -> list[str]:
    """Apply every fix (idempotent); the vLLM one when vLLM's layer utilities load, in whichever process."""
    fixes = [fix_process_group_backend, fix_offload_pinning, fix_value_head_attention]
    for fix in fixes:
        fix()
    vllm_utils = "vllm.model_executor.layers.utils"
    if vllm_utils in sys.modules:
        fix_vllm_weight_prepacking()
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(vllm_utils, fix_vllm_weight_prepacking))
    return [fix.__name__ for fix in (*fixes, fix_vllm_weight_prepacking)]


if os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM_NAME:
    if torch.cuda.is_available():
        raise RuntimeError("thinkj.online.verl_cpu_platform: this machine has a GPU; the CPU platform is for "
                           "machines without one (unset VERL_PLATFORM / VERL_USE_EXTERNAL_MODULES)")
    apply_fixes()
