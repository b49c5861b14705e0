"""Write a file so that a reader sees the old content or the new one, never half of it.

The text goes to a temp file beside the target (same folder, so the rename never crosses file systems),
is flushed to disk, and only then renamed onto the target with ``os.replace``. If writing raises -- an
unserialisable value, a full disk, Ctrl-C -- the temp file is removed and the previous file stays as it was.
Each writer gets its own temp name, so two processes writing the same file cannot interleave their bytes.

A write the file system refuses (full disk, quota, read-only or forbidden folder) becomes one
:class:`WriteError` line naming the target file, never the temp name or a traceback. :func:`staged_dir` does
the same for a writer that fills a folder with several files (tables, charts), and :func:`disk_errors` gives
an appending writer (a log) the same one-line error.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO, TextIO

from thinkj.errors import ThinkJError

# The errors a writer meets from the file system rather than from its own data: no room, no quota, a read-only
# mount, a folder it may not write. EDQUOT is missing on some platforms.
WRITE_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EFBIG, errno.EROFS,
                                     errno.EACCES, errno.EPERM) if e is not None)


class WriteError(ThinkJError):
    """A file the file system would not let us write; the message names the target file and the reason."""


def write_error(err: BaseException, target: str | os.PathLike, *, kept: str = "its previous content, if any, is "
                "unchanged") -> WriteError | None:
    """``err`` as a one-line :class:`WriteError` naming ``target`` when it is a refused write, else None."""
    if not isinstance(err, OSError) or err.errno not in WRITE_ERRNOS:
        return None
    return WriteError(f"{target}: cannot write ({os.strerror(err.errno)}); {kept}")


def _ours(err: OSError, *paths: Path) -> bool:
    """Whether an OSError came from writing one of ``paths`` (a write error carries no file name)."""
    if err.filename is None:
        return True
    name = Path(os.fsdecode(err.filename))
    return any(name == p or name in p.parents for p in paths)


def temp_path(path: str | os.PathLike) -> Path:
    """A fresh hidden temp name beside ``path`` (``.<name>.<pid>.<random>.tmp``), unique per writer."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextmanager
def atomic_open(path: str | os.PathLike, *, encoding: str = "utf-8", binary: bool = False) -> Iterator[TextIO | BinaryIO]:
    """A handle (text, or bytes with ``binary=True``) whose content replaces ``path`` when the block ends normally;
    if it raises, ``path`` is untouched and no temp file is left. A refused write (full disk …) raises
    :class:`WriteError` naming ``path``."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # "x": the umask's permissions, never another's file
        with (open(tmp, "xb") if binary else open(tmp, "x", encoding=encoding)) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except BaseException as err:
        with suppress(OSError):
            tmp.unlink()
        failure = write_error(err, path) if isinstance(err, OSError) and _ours(err, tmp, path) else None
        if failure is not None:
            raise failure from None
        raise


def write_text_atomic(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (temp file + rename); returns ``path``."""
    with atomic_open(path, encoding=encoding) as handle:
        handle.write(text)
    return Path(path)


@contextmanager
def staged_dir(out_dir: str | os.PathLike) -> Iterator[Path]:
    """A fresh hidden folder inside ``out_dir`` for a writer that makes several files (a table and its charts).

    When the block ends normally, each file written there is synced and renamed onto its namesake in
    ``out_dir``; if the block raises, no file of ``out_dir`` changes. Either way the staging folder is removed.
    A refused write raises :class:`WriteError` naming the file's final path."""
    out_dir = Path(out_dir)
    stage = out_dir / f".staged.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)  # an --out that is a file fails here, naming --out
        stage.mkdir()
        yield stage
        files = sorted(p for p in stage.iterdir() if p.is_file())
        for file in files:
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
        for file in files:
            os.replace(file, out_dir / file.name)
    except OSError as err:
        failure = write_error(err, _staged_target(err, stage, out_dir), kept="the files already there are unchanged")
        if failure is not None:
            raise failure from None
        raise
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _staged_target(err: OSError, stage: Path, out_dir: Path) -> Path:
    """The final path of the staged file a write failed on: the one the error names, else the newest one (a failed
    ``write`` names no file), else ``out_dir``."""
    if err.filename is not None:
        name = Path(os.fsdecode(err.filename))
        return out_dir / name.name if name.parent == stage else name
    with suppress(OSError):
        files = sorted(stage.iterdir(), key=lambda p: p.stat().st_mtime_ns)
        if files:
            return out_dir / files[-1].name
    return out_dir


@contextmanager
def disk_errors(target: str | os.PathLike) -> Iterator[None]:
    """Turn a refused write inside the block (a log or another file appended in place) into one
    :class:`WriteError` line naming ``target``; what was written before stays."""
    try:
        yield
    except OSError as err:
        failure = write_error(err, target, kept="the lines written before it are kept") \
            if _ours(err, Path(target)) else None
        if failure is not None:
            raise failure from None
        raise
