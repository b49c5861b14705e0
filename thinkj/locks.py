"""One writer at a time for a shared place: an advisory ``flock`` on a lock file.

Used where two processes may fill the same place at once: two ``thinkj models fetch smollm2`` in two shells (or a
demo and a test), the pipeline's stages when several runs share a ``RUN_DIR`` (a recipe sweep's cells, a Slurm
array, a run started twice; :func:`thinkj.pipeline.stage_runner.run_steps`), and the standalone training and
evaluation commands into one output folder (:func:`output_lock`). The second waits for the first, then
finds its finished result instead of racing it through the same temporary names. The holder writes who it is (pid,
host, since when) into the lock file, so the waiter can say whom it waits for. The kernel releases the lock when its
holder exits, also on a kill, so a crashed holder never leaves a stale lock behind (on NFS the server does, once the
client's lease ends).

A filesystem without ``flock`` (Lustre mounted without ``-o flock``: ENOSYS; NFS without a lock daemon: ENOLCK) is
said once per lock folder, and the work goes on unlocked: refusing would stop every run there.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from thinkj.atomic import write_error

_NO_LOCKS = {errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOLCK}  # the filesystem takes no flock at all
_UNLOCKED_WARNED: set[Path] = set()  # lock folders already said to be unlockable (once per process)


def _holder(handle) -> str:
    """Who holds the lock, as the holder wrote it ("another process" when it has not written yet)."""
    handle.seek(0)
    text = handle.read().decode(errors="replace").strip()
    return f"another process ({text})" if text else "another process"


def _claim(handle) -> None:
    """Write this process into the lock file it now holds; a disk too full for that line leaves it empty (the line
    only names the holder to a waiter)."""
    with suppress(OSError):
        os.ftruncate(handle.fileno(), 0)  # opened for appending: the write lands at the new end, 0
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
                     .encode())


def _open(path: Path):
    """The lock file, created if missing; a full disk or a read-only folder is one WriteError naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a+b", buffering=0)  # unbuffered: nothing left to flush (and fail) when it closes
    except OSError as err:  # before anything ran
        failure = write_error(err, path, kept="nothing was started")
        if failure is not None:
            raise failure from None
        raise


def _unlockable(err: OSError, path: Path, what: str, log: Callable[[str], object], advice: str) -> None:
    """A flock that failed otherwise than by being held: re-raised, unless the filesystem takes no flock at all; that
    is said once per lock folder, and the caller goes on unlocked."""
    if err.errno not in _NO_LOCKS:
        raise err
    if path.parent not in _UNLOCKED_WARNED:
        _UNLOCKED_WARNED.add(path.parent)
        log(f"{what}: cannot lock {path} ({os.strerror(err.errno)}: a filesystem without flock, e.g. Lustre "
            f"mounted without -o flock); going on without locks there: {advice}")


@contextmanager
def _holding(handle) -> Iterator[None]:
    """The block runs holding the lock just taken on ``handle``: this process written into it, released after."""
    _claim(handle)
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)


def output_lock(folder: str | os.PathLike, node: str = "") -> Path:
    """The lock of a command's output folder, beside it (``<parent>/.locks/<name><node>.lock``), so that the folder's
    own content, which later stages fingerprint, never holds it."""
    folder = Path(folder)
    return folder.parent / ".locks" / f"{folder.name}{node}.lock"


@contextmanager
def exclusive(lock_path: str | os.PathLike, what: str, log: Callable[[str], object] = print) -> Iterator[bool]:
    """Hold the lock ``lock_path`` (created if missing) for the block, which gets whether it had to wait for another
    holder (then says once whom it waits for). Unlockable filesystems: see the module's docstring."""
    path = Path(lock_path)
    handle = _open(path)
    with handle:
        waited = False
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"{what}: {_holder(handle)} holds {path}; waiting for it to finish ...")
            fcntl.flock(handle, fcntl.LOCK_EX)
            waited = True
        except OSError as err:
            _unlockable(err, path, what, log, "do not start two runs on it at once")
            yield False
            return
        with _holding(handle):
            yield waited


@contextmanager
def one_of(lock_paths: Sequence[str | os.PathLike], what: str, log: Callable[[str], object] = print,
           poll: float = 5.0) -> Iterator[Path]:
    """Hold one of the locks ``lock_paths`` for the block (so at most that many blocks run at once): the first free
    one; when every one is held, say once who holds them and try again every ``poll`` seconds. Yields the lock held.
    A filesystem without ``flock`` is said once, as in :func:`exclusive`, and the block runs unlocked."""
    paths = [Path(p) for p in lock_paths]
    handles = []
    said = False
    try:
        for path in paths:
            handles.append(_open(path))
        while True:
            for path, handle in zip(paths, handles, strict=True):
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                except OSError as err:
                    _unlockable(err, path, what, log, "turns are not kept")
                    yield path
                    return
                with _holding(handle):
                    yield path
                return
            if not said:
                holders = "; ".join(_holder(handle) for handle in handles)
                log(f"{what}: all {len(paths)} turn(s) are taken ({holders}); waiting for one ...")
                said = True
            time.sleep(poll)
    finally:
        for handle in handles:
            handle.close()
