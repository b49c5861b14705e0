"""A finished output folder is replaced only by another finished one.

When an output folder holds a finished run and a new run with other settings (or ``--force``) is asked for,
the new run trains beside it in ``<out>.next`` and takes the old one's place only once it has finished: a
missing input, a crash, a full disk or Ctrl-C leaves the finished run and its completion record as they were.
Rerunning the interrupted command resumes in ``<out>.next``. The swap is two renames (the old folder is moved
to ``<out>.replaced``, then deleted); :func:`restore` undoes the first one if a kill fell between them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def staging_dir(out: str | os.PathLike) -> Path:
    """Where a run that will replace the finished run in ``out`` trains."""
    out = Path(out)
    return out.with_name(out.name + ".next")


def _replaced(out: Path) -> Path:
    return out.with_name(out.name + ".replaced")


def restore(out: str | os.PathLike) -> None:
    """Put back a finished folder moved aside by a swap that was killed before its second rename."""
    out = Path(out)
    old = _replaced(out)
    if old.is_dir() and not out.exists():
        os.replace(old, out)


def promote(staged: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Move the finished run in ``staged`` to ``out``; the run it replaces is deleted only after the swap."""
    staged, out = Path(staged), Path(out)
    old = _replaced(out)
    shutil.rmtree(old, ignore_errors=True)  # a previous swap's leftover: ``out`` already holds its successor
    if out.exists():
        os.replace(out, old)
    os.replace(staged, out)
    shutil.rmtree(old, ignore_errors=True)
    return out
