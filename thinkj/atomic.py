"""Write a file so that a reader sees the old content or the new one, never half of it.

The text goes to a temp file beside the target (same folder, so the rename never crosses file systems),
is flushed to disk, and only then renamed onto the target with ``os.replace``. If writing raises -- an
unserialisable value, a full disk, Ctrl-C -- the temp file is removed and the previous file stays as it was.
Each writer gets its own temp name, so two processes writing the same file cannot interleave their bytes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO


def temp_path(path: str | os.PathLike) -> Path:
    """A fresh hidden temp name beside ``path`` (``.<name>.<pid>.<random>.tmp``), unique per writer."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextmanager
def atomic_open(path: str | os.PathLike, *, encoding: str = "utf-8") -> Iterator[TextIO]:
    """A text handle whose content replaces ``path`` when the block ends normally; if it raises, ``path`` is
    untouched and no temp file is left."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "x", encoding=encoding) as handle:  # "x": the umask's permissions, never another's file
            yield handle
            handle.flush()
            os.fsync(handle.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise


def write_text_atomic(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (temp file + rename); returns ``path``."""
    with atomic_open(path, encoding=encoding) as handle:
        handle.write(text)
    return Path(path)
