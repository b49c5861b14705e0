"""A persistent result cache for generation, so interrupted stages resume and finished ones rerun for free.

Each completion is stored under a key made of (model identity, template tag, messages, sampling params
without ``n``, sample index): asking for 8 samples after 4 were cached generates only what is missing. The
store is SQLite in WAL mode, written one row per finished call, so a kill loses at most calls in
flight. Only successful generations are results: a call that failed after the backend's retries
(:class:`~thinkj.inference.failures.FailedCall`) is kept in the failures table with its error text, is never
served as an answer, and is asked again by the next run.

The model identity (:func:`thinkj.inference.identity.model_identity`) is the model's fingerprint, not its
path: a model retrained into the same folder is judged again, never served the old model's answers. A backend
that runs the model in another precision than float32 adds the precision that ran (``|bfloat16``, whether asked for
or resolved from ``dtype=auto``; :mod:`thinkj.inference.precision`) to the identity.

    cache = ResultCache(run_dir / "cache.sqlite")
    backend = CachedBackend(make_backend("hf", model), cache, tag="judge_strength_v2")

A write SQLite cannot make (a full disk or quota, a file past the size limit, a read-only or unwritable folder) is
one :class:`~thinkj.atomic.WriteError` naming the cache file, as the JSON and table writers give; a cache that
could not even be created is removed again, so no 0-byte ``*.cache.sqlite`` is left behind.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path

from thinkj.atomic import WriteError, write_error
from thinkj.inference.base import InferenceBackend, Messages, Output, SamplingParams
from thinkj.inference.failures import FailedCall
from thinkj.inference.identity import model_identity


def cache_key(model: str, tag: str, messages: Messages, params: SamplingParams, sample: int) -> str:
    settings = params.to_dict()
    settings.pop("n", None)
    blob = json.dumps([model, tag, messages, settings, sample], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# SQLite's result codes for a write the file system refused (SQLITE_FULL, SQLITE_IOERR with its extended write
# codes, SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM): a fault of the disk, not of the data. On Python < 3.11
# there are no codes; the message then says it ("database or disk is full", "disk I/O error", …).
_DISK_CODES = frozenset({13, 10, 8, 14, 3})
_DISK_WORDS = ("disk is full", "disk i/o error", "readonly database", "unable to open database", "attempt to write")


def _disk_fault(err: sqlite3.Error) -> bool:
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _DISK_CODES
    return any(word in str(err).lower() for word in _DISK_WORDS)


class ResultCache:
    """Key -> completion text (plus an optional JSON payload); failures kept in their own table."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        new = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._disk():
                self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, text TEXT, extra TEXT)")
                self._db.execute("CREATE TABLE IF NOT EXISTS failures (key TEXT PRIMARY KEY, error TEXT, "
                                 "attempts INTEGER)")
        except BaseException:
            if hasattr(self, "_db"):
                self._db.close()
            if new:  # ours, and never usable: a 0-byte file would read as an empty cache next time
                for leftover in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm"))):
                    with suppress(OSError):
                        leftover.unlink()
            raise

    @contextmanager
    def _disk(self) -> Iterator[None]:
        """A write SQLite could not make because of the disk -> one WriteError line naming the cache file."""
        try:
            yield
        except sqlite3.Error as err:
            if not _disk_fault(err):
                raise
            raise WriteError(f"{self.path}: cannot write the generation cache ({err}); finished generations stay "
                             "in it -- free space and rerun the same command to resume") from None
        except OSError as err:
            failure = write_error(err, self.path, kept="finished generations stay in it")
            if failure is None:
                raise
            raise failure from None

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT text FROM results WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def get_extra(self, key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT extra FROM results WHERE key = ?", (key,)).fetchone()
        return None if row is None or row[0] is None else json.loads(row[0])

    def put(self, key: str, text: str, extra: dict | None = None) -> None:
        if not isinstance(text, str):  # a failed call is put_failure's, never a result
            raise TypeError(f"a cached result is text, got {type(text).__name__}")
        with self._lock, self._disk():
            self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?, ?)",
                             (key, text, None if extra is None else json.dumps(extra, ensure_ascii=False)))
            self._db.execute("DELETE FROM failures WHERE key = ?", (key,))

    def put_failure(self, key: str, error: str, attempts: int) -> None:
        with self._lock, self._disk():
            self._db.execute("INSERT OR REPLACE INTO failures VALUES (?, ?, ?)", (key, error[:2000], attempts))

    def failure(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT error FROM failures WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def counts(self) -> dict[str, int]:
        with self._lock:
            done = self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
            failed = self._db.execute("SELECT COUNT(*) FROM failures").fetchone()[0]
        return {"results": done, "failures": failed}

    def close(self) -> None:
        with self._lock:
            self._db.close()


OUTAGE_MIN_CALLS = 8  # a batch this large that fails whole is a server that is down, not a few bad prompts


class CachedBackend:
    """Wrap any backend: only (conversation, sample index) pairs missing from the cache are generated.

    Once a batch of at least ``OUTAGE_MIN_CALLS`` fresh calls came back with every call failed (a server that is
    down or broken), the calls of later batches are not sent: they come back as :class:`FailedCall` saying so
    (answers already cached are still served), so a stage meets its failure rule in one batch's time instead of
    retrying every remaining call against a dead server. Nothing is cached for them; a rerun asks again.
    """

    def __init__(self, backend: InferenceBackend, cache: ResultCache, tag: str = "", identity: str | None = None):
        self.backend, self.cache, self.tag = backend, cache, tag
        self.name = backend.name
        self.hits = self.misses = self.failures = 0
        self.outage: str | None = None  # why later calls are not sent, once a whole batch failed
        self.records_itself = records_itself = hasattr(backend, "cache")
        # A backend that keys its own records (HTTP: the served model name at its endpoint) is keyed on its identity,
        # so the keys agree.
        self.identity = identity or getattr(backend, "identity", None) or (backend.name if records_itself else
                                     model_identity(backend.name, getattr(backend, "revision", None)))
        precision = getattr(backend, "precision", None)  # the dtype that ran: bf16 answers differ from fp32
        if precision and identity is None:
            self.identity += f"|{precision}"
        # how the backend samples, part of a sampled answer's key only (greedy answers do not depend on it): the HF
        # backend's "full" answers are not the top-50 draws it made before transformers' default was overridden
        self.sampler = getattr(backend, "sampler", None)
        if getattr(backend, "cache", ...) is None:
            # A backend that records per-call results and failures itself (the HTTP client) shares our cache, so
            # each call is stored the moment it finishes and a killed run loses only the calls in flight.
            backend.cache, backend.tag = cache, tag
        # A backend that stores its calls in our cache in its own form (the HTTP client keeps reasoning apart from the
        # answer) reads them back as its generate returned them, so a rerun sees the text a fresh run sees.
        self._stored = getattr(backend, "stored_output", None) if getattr(backend, "cache", None) is cache else None

    def _get(self, key: str) -> str | None:
        return self._stored(key) if self._stored is not None else self.cache.get(key)

    def generate(self, conversations: list[Messages], params: SamplingParams) -> list[list[Output]]:
        """Cached texts, fresh texts (stored as they come) and, for calls that failed after the backend's retries,
        :class:`FailedCall` values: recorded in the failures table, never stored as results."""
        identity = f"{self.identity}|{self.sampler}" if self.sampler and params.temperature > 0 else self.identity
        keys = [[cache_key(identity, self.tag, conv, params, k) for k in range(params.n)] for conv in conversations]
        results: list[list[Output | None]] = [[self._get(k) for k in row] for row in keys]
        todo = [i for i, row in enumerate(results) if any(text is None for text in row)]
        self.hits += sum(t is not None for row in results for t in row)
        if todo and self.outage is not None:
            for i in todo:
                for k, text in enumerate(results[i]):
                    if text is None:
                        self.failures += 1
                        results[i][k] = FailedCall(f"not sent: {self.outage}")
        elif todo:
            # Sampling is seeded per call, so generate the full n for an incomplete conversation and keep only
            # the missing indices: cached samples are never replaced.
            fresh = self.backend.generate([conversations[i] for i in todo], replace(params))
            sent = failed = 0
            first = ""
            for i, samples in zip(todo, fresh):
                for k, text in enumerate(samples):
                    if results[i][k] is not None:
                        continue
                    sent += 1
                    if isinstance(text, FailedCall):
                        self.failures += 1
                        failed += 1
                        self.cache.put_failure(keys[i][k], text.error, text.attempts)
                        results[i][k] = text
                        first = first or " ".join(text.error.split())[:200]
                        continue
                    if not isinstance(text, str):
                        raise TypeError(f"backend {self.name!r} returned {type(text).__name__}, not text or FailedCall")
                    error = self.cache.failure(keys[i][k]) if self.records_itself and self.cache.get(keys[i][k]) is None \
                        else None
                    if error is not None:  # a backend that records its own failures and returned a stand-in text
                        self.failures += 1
                        failed += 1
                        results[i][k] = FailedCall(error)
                        first = first or " ".join(error.split())[:200]
                        continue
                    if self.cache.get(keys[i][k]) is None:
                        self.cache.put(keys[i][k], text)
                    results[i][k] = text
                    self.misses += 1
            if sent >= OUTAGE_MIN_CALLS and failed == sent:
                self.outage = f"all {sent} calls of an earlier batch to {self.name!r} failed (first error: {first})"
        return results  # type: ignore[return-value]
