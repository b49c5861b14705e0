"""Files the GPU kit drops from its wheels before cutting them into parts (``python -m thinkj.gpu_kit build``).

Each device call carries one 50 MB part, and each call costs device time (a warm call about 6 s, plus the idle gap
before the next). A few wheels hold large files that the device run never loads: a Java archive, a static library
for C++ linking, kernels for other GPU generations or other model families. Dropping them (197 MB of 537 MB at the
pins of ``requirements/constraints-gpu.txt``) took the kit from eleven parts to seven (storing the wheels
uncompressed under one xz stream, :func:`thinkj.gpu_kit.build.store_wheels`, then took it to five). Each dropped file
is named with its reason in :data:`PRUNED`, the wheel's ``RECORD`` loses its line, and the kit's manifest lists what
was dropped. The kit targets the device tool's Hopper GPUs (compute capability 9.0, H100 / H200) and dense Qwen2 / Llama
models: a cluster install (``scripts/setup_gpu_env.sh``) keeps every file.
"""

from __future__ import annotations

import csv
import io
import shutil
import zipfile
from pathlib import Path

from thinkj.gpu_kit.device import KitError, wheel_package

# package -> {file inside its wheel: why the device run never loads it}
PRUNED: dict[str, dict[str, str]] = {
    "vllm": {
        "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so":
            "FlashAttention 2 (81 MB): on compute capability 9.x vLLM picks FlashAttention 3 "
            "(vllm/v1/attention/backends/fa_utils.py, get_flash_attn_version); FA2 serves ALiBi and sparse attention, "
            "and asking for it then fails naming this module; the env step of scripts/gpu_device_run.sh prints whether "
            "FA3 is usable",
        "vllm/_moe_C_stable_libtorch.abi3.so":
            "mixture-of-experts kernels (40 MB): dense Qwen2 / Llama never call torch.ops._moe_C; vllm/platforms/"
            "cuda.py imports it under try and logs 'Failed to import from vllm._moe_C_stable_libtorch'",
        "vllm/vllm-rs":
            "the Rust frontend binary (12 MB): used only with VLLM_USE_RUST_FRONTEND=1 (vllm/envs.py)",
    },
    "ray": {
        "ray/jars/ray_dist.jar": "Ray's Java workers (32 MB): cross-language jobs only; Python drivers never load it",
    },
    "xgrammar": {
        "xgrammar/lib/libxgrammar.a":
            "a static library (31 MB) for linking C++ against xgrammar; Python loads libxgrammar_bindings.so",
    },
}


def prune_wheel(wheel: Path, dest: Path, drop: dict[str, str]) -> Path:
    """A copy of ``wheel`` in ``dest`` without the files in ``drop``, its ``RECORD`` without their lines. Every file
    named must be in the wheel: a pin that moved a file leaves the list stale, and that is an error, not a no-op."""
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / wheel.name
    with zipfile.ZipFile(wheel) as source:
        names = {info.filename for info in source.infolist()}
        stale = sorted(set(drop) - names)
        if stale:
            raise KitError(f"{wheel.name}: no {', '.join(stale)} to drop (thinkj/gpu_kit/prune.py PRUNED is stale "
                           "for this version)")
        records = [n for n in names if n.endswith(".dist-info/RECORD") and n.count("/") == 1]
        if len(records) != 1:
            raise KitError(f"{wheel.name}: expected one .dist-info/RECORD, found {records}")
        partial = out.with_suffix(".whl.partial")
        with zipfile.ZipFile(partial, "w") as target:
            for info in source.infolist():
                if info.filename in drop:
                    continue
                copy = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                copy.external_attr = info.external_attr  # keeps executables executable
                copy.compress_type = zipfile.ZIP_DEFLATED
                if info.filename == records[0]:
                    target.writestr(copy, _record_without(source.read(info).decode(), drop))
                    continue
                copy.file_size = info.file_size  # lets zipfile choose zip64 before streaming
                with source.open(info) as read, target.open(copy, "w") as write:
                    shutil.copyfileobj(read, write, 1 << 20)
        partial.replace(out)
    return out


def _record_without(record: str, drop: dict[str, str]) -> str:
    rows = [row for row in csv.reader(io.StringIO(record)) if row and row[0] not in drop]
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return text.getvalue()


def prune_all(wheels: list[Path], dest: Path, pruned: dict[str, dict[str, str]] | None = None
              ) -> tuple[list[Path], dict[str, dict[str, str]]]:
    """``wheels`` with :data:`PRUNED`'s files dropped (the others unchanged), and what was dropped from which wheel
    (wheel file -> {file: reason}). A package in the table whose wheel is not in the kit is an error: the table would
    be silently stale."""
    pruned = PRUNED if pruned is None else pruned
    by_name = {wheel_package(w.name): w for w in wheels}
    missing = sorted(set(pruned) - set(by_name))
    if missing:
        raise KitError(f"thinkj/gpu_kit/prune.py PRUNED names {', '.join(missing)}, which the kit does not carry")
    out, dropped = [], {}
    for wheel in wheels:
        drop = pruned.get(wheel_package(wheel.name))
        if drop:
            out.append(prune_wheel(wheel, dest, drop))
            dropped[wheel.name] = dict(sorted(drop.items()))
        else:
            out.append(wheel)
    return out, dropped
