"""Where runs and caches live. Caches go to folders the project owns, never to the user's home."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def cache_root() -> Path:
    """``$THINKJ_CACHE``, else ``.cache`` in the source checkout, else ``~/.cache/thinkj`` for a wheel install."""
    if os.environ.get("THINKJ_CACHE"):
        return Path(os.environ["THINKJ_CACHE"])
    if (PROJECT_ROOT / "setup.py").exists():
        return PROJECT_ROOT / ".cache"
    return Path.home() / ".cache" / "thinkj"


def setup_caches() -> None:
    """Point every library cache at the project's cache folder (only where the user has not chosen one)."""
    root = cache_root()
    for var, sub in (("HF_HOME", "hf"), ("VLLM_CACHE_ROOT", "vllm"), ("MPLCONFIGDIR", "matplotlib"),
                     ("RAY_TMPDIR", "ray"), ("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                     ("TORCH_EXTENSIONS_DIR", "torch_extensions")):  # DeepSpeed's JIT ops (its CPU comm op)
        if var not in os.environ:
            path = root / sub
            path.mkdir(parents=True, exist_ok=True)
            os.environ[var] = str(path)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def run_dir(path: str | os.PathLike | None = None) -> Path:
    """The run directory: ``--run-dir``, else ``$THINKJ_RUN_DIR``, else ``runs/default``."""
    chosen = Path(path or os.environ.get("THINKJ_RUN_DIR") or "runs/default")
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


def stage_dir(run: Path, stage: str) -> Path:
    """Stage outputs live under the run directory by stage name, so later stages find them."""
    path = run / stage
    path.mkdir(parents=True, exist_ok=True)
    return path


def shared_data_dir() -> Path:
    """The real benchmark slices beside the checkout (``../shared/data``; THINKJ_SHARED_DATA elsewhere)."""
    return Path(os.environ.get("THINKJ_SHARED_DATA", PROJECT_ROOT.parent / "shared" / "data"))
