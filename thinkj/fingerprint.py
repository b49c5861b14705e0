"""Content fingerprints (sha256) of input files and folders, for completion records and cache keys.

A record that keeps a path, or a size and modification time, is fooled by a file changed in place and by a
``cp -p`` copy (same size, same mtime, other bytes). These fingerprints hash the bytes, streamed. A file's hash
of 1 MiB or more is remembered -- in this process and in ``<THINKJ_CACHE>/file_hashes.sqlite`` -- under the file's
(resolved path, device, inode, size, mtime_ns, ctime_ns), so a 15 GB model is hashed once, not on every call;
smaller files are simply hashed again. Any write to a file, and every ``utime`` (which is how ``cp -p`` restores
the mtime), moves its ctime, which no program can set back: a changed file is always hashed again. A file changed
within the last two seconds is not remembered, since a second write in the same clock tick could leave its
ctime unchanged.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing, suppress
from pathlib import Path

from thinkj.errors import ThinkJError

CACHED_BYTES = 1 << 20  # smaller files are rehashed each time: cheaper than a database row
RACY_NS = 2_000_000_000  # a hash taken this soon after the last change is not remembered
_BLOCK = 1 << 22
_memory: dict[tuple, str] = {}


def _key(path: Path) -> tuple:
    stat = path.stat()
    return (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _store() -> Path:
    from thinkj.paths import cache_root

    return cache_root() / "file_hashes.sqlite"


def _lookup(key: tuple) -> str | None:
    path = _store()
    if not path.is_file():
        return None
    try:
        with closing(sqlite3.connect(path, timeout=30)) as db:
            row = db.execute("SELECT sha256 FROM hashes WHERE path=? AND dev=? AND ino=? AND size=? AND mtime_ns=? "
                             "AND ctime_ns=?", key).fetchone()
    except sqlite3.Error:  # an unreadable cache only costs a rehash
        return None
    return row[0] if row else None


def _remember(key: tuple, digest: str) -> None:
    path = _store()
    with suppress(OSError, sqlite3.Error):  # a read-only cache folder only costs a rehash next time
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path, timeout=30)) as db, db:
            db.execute("CREATE TABLE IF NOT EXISTS hashes (path TEXT PRIMARY KEY, dev INTEGER, ino INTEGER, "
                       "size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, sha256 TEXT)")
            db.execute("INSERT OR REPLACE INTO hashes VALUES (?, ?, ?, ?, ?, ?, ?)", (*key, digest))


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (hex), read in blocks; remembered while the file is unchanged."""
    path = Path(path).resolve()
    if path.is_dir():
        raise ThinkJError(f"{path}: is a folder, expected a file")
    for _ in range(3):
        key = _key(path)
        cached = key[3] >= CACHED_BYTES and time.time_ns() - max(key[4], key[5]) > RACY_NS
        found = (_memory.get(key) or _lookup(key)) if cached else None
        if found is not None:
            _memory[key] = found
            break
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(_BLOCK), b""):
                digest.update(block)
        if _key(path) == key:  # else written to while it was read: the hash describes no version of the file
            found = digest.hexdigest()
            if cached:
                _memory[key] = found
                _remember(key, found)
            break
    else:
        raise ThinkJError(f"{path}: the file kept changing while it was being read; hash it when it is written")
    return found


def tree_sha256(path: str | os.PathLike, *, recursive: bool = True, ignore: Callable[[str], bool] | None = None) -> str:
    """One sha256 over a folder's files (relative names and contents), leaving out those whose relative name
    ``ignore`` accepts; a file's own hash for a file."""
    path = Path(path)
    if not path.is_dir():
        return file_sha256(path)
    files = sorted(p for p in (path.rglob("*") if recursive else path.iterdir()) if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        name = file.relative_to(path).as_posix()
        if ignore is None or not ignore(name):
            digest.update(f"{name}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def fingerprint(path: str | os.PathLike) -> str | None:
    """``sha256:<hex>`` of a local file or folder, ``None`` when nothing is there (a hub name, a missing path)."""
    path = Path(path)
    if not path.exists():
        return None
    return f"sha256:{tree_sha256(path)}"
