"""One writer at a time for a shared folder: an advisory ``flock`` on a lock file beside it.

Used where two commands may fill the same cache at once (two ``thinkj models fetch smollm2`` in two shells, or a demo
and a test): the second waits for the first, then finds its finished result instead of racing it through the same
temporary names. The lock is released by the kernel when its holder exits, also on a kill, so a crashed holder
never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive(lock_path: str | os.PathLike, what: str, log: Callable[[str], object] = print) -> Iterator[None]:
    """Hold the lock ``lock_path`` (created if missing) for the block; says once that it waits when another holds it."""
    path = Path(lock_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"{what}: another process holds {path}; waiting for it to finish ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
