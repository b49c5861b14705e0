"""Inference on every GPU of a node: one worker process per group of ``tp`` GPUs, each over its own shard.

    run_sharded("difficulty", job, n_items=len(pairs), workers=8, tp=1, cache=out.with_suffix(".cache.sqlite"))

The difficulty filter and evaluation generate through a :class:`~thinkj.inference.cache.ResultCache`; with
``workers`` > 1 the generation is split before the stage's ordinary pass:

1. **Split.** The items (pairs in input order) are cut into ``workers`` contiguous shards of near-equal size
   (:func:`shard_bounds`); worker ``i`` sees only the GPUs of its group (``CUDA_VISIBLE_DEVICES``: GPUs
   ``i*tp .. i*tp+tp-1`` of those visible), loads its own engine there (vLLM with ``tensor_parallel_size=tp``,
   or the hf backend) and generates its shard. TP x workers must fit the GPUs visible: 8 GPUs hold 8 workers
   of TP 1, or 2 of TP 4 (32B). Equal shards of equal work take equal time, so 8 workers take about an eighth
   of one worker's time, plus one model load each.
2. **Own, resumable output.** Worker ``i`` of ``n`` writes its generations to its own cache beside the stage's,
   ``<cache stem>.shard<i>of<n>.sqlite``, one row per finished call, and reads the stage's cache first (what an
   earlier run already made is not generated again). A killed worker loses only its calls in flight.
3. **Merge.** When every worker has exited 0, the shard caches are copied into the stage's cache and removed
   (:func:`merge_shard_caches`); then the stage runs its ordinary single pass over all items in their original
   order. Every generation is a cache hit there, so no model loads, and its outputs (kept pairs, judgment records,
   summary, results) are in the original order, written once, as in a one-process run.
4. **Rerun.** Shard caches left by a run that stopped (a worker killed, a node lost) are merged first, whatever
   their worker count; the workers then generate only what no cache holds. A failed worker stops the stage with
   its shard and log named; the others' generations are kept.

A stage sends its workers a JSON job (:func:`run_sharded`); ``python -m thinkj.inference.data_parallel JOB INDEX
COUNT`` runs one worker, through the stage's ``generate_shard`` in :data:`STAGES`.
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

from thinkj.errors import StageIncomplete, ThinkJError, exit_on_user_error
from thinkj.inference.cache import ResultCache
from thinkj.records import write_json

# stage -> "module:function(job, index, count, cache)" that generates one shard into ``cache``
STAGES = {"difficulty": "thinkj.data.difficulty:generate_shard", "eval": "thinkj.evaluation.run:generate_shard"}


def visible_devices() -> list[str]:
    """The GPUs this process may use: ``CUDA_VISIBLE_DEVICES`` as listed, else every GPU torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def device_groups(workers: int, tp: int, devices: list[str] | None = None) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` of each worker: consecutive groups of ``tp`` of the visible GPUs."""
    devices = visible_devices() if devices is None else devices
    for option, value in (("--data-parallel", workers), ("tensor_parallel_size", tp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ThinkJError(f"{option} {value!r}: must be a whole number >= 1")
    if workers * tp > len(devices):
        raise ThinkJError(f"--data-parallel {workers} x tensor_parallel_size {tp} needs {workers * tp} GPUs and "
                          f"{len(devices)} are visible ({','.join(devices) or 'none'}): lower --data-parallel")
    return [",".join(devices[i * tp:(i + 1) * tp]) for i in range(workers)]


def shard_bounds(n: int, index: int, count: int) -> tuple[int, int]:
    """Items ``[start, end)`` of shard ``index`` of ``count``: contiguous, sizes differing by one at most."""
    if not 0 <= index < count:
        raise ThinkJError(f"shard {index} of {count}: must be from 0 to {count - 1}")
    size, extra = divmod(n, count)
    start = index * size + min(index, extra)
    return start, start + size + (index < extra)


def shard_cache_path(cache: Path, index: int, count: int) -> Path:
    return cache.with_name(f"{cache.stem}.shard{index}of{count}{cache.suffix}")


def _sqlite_files(path: Path) -> list[Path]:
    return [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm"))]


def leftover_shards(cache: Path) -> list[Path]:
    return sorted(cache.parent.glob(f"{cache.stem}.shard*of*{cache.suffix}"))


def merge_shard_caches(cache: Path) -> int:
    """Copy every shard cache of ``cache`` into it (results; a failure only where no result is known), then remove
    the shard caches. Returns the result rows added."""
    shards = leftover_shards(cache)
    if not shards:
        return 0
    main = ResultCache(cache)  # creates the tables when the stage's cache is new
    main.close()
    added = 0
    db = sqlite3.connect(cache, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        for shard in shards:
            try:
                db.execute("ATTACH DATABASE ? AS shard", (str(shard),))
                db.execute("SELECT key, text, extra FROM shard.results LIMIT 1")
            except sqlite3.Error as err:
                raise ThinkJError(f"{shard}: a worker's cache that cannot be read ({err}); delete it and rerun to "
                                  "generate its shard again") from None
            try:
                before = db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
                db.execute("BEGIN")
                db.execute("INSERT OR IGNORE INTO results SELECT key, text, extra FROM shard.results")
                db.execute("INSERT OR IGNORE INTO failures SELECT key, error, attempts FROM shard.failures "
                           "WHERE key NOT IN (SELECT key FROM results)")
                db.execute("COMMIT")
                added += db.execute("SELECT COUNT(*) FROM results").fetchone()[0] - before
            finally:
                db.execute("DETACH DATABASE shard")
            for path in _sqlite_files(shard):  # only once its rows are in the stage's cache
                path.unlink(missing_ok=True)
    finally:
        db.close()
    return added


class ShardCache(ResultCache):
    """A worker's own cache that also reads the stage's cache (read-only): what a finished run made is a hit."""

    def __init__(self, path: str | os.PathLike, base: str | os.PathLike):
        super().__init__(path)
        base = Path(base)
        self._base = sqlite3.connect(f"file:{quote(str(base.resolve()))}?mode=ro", uri=True,
                                     check_same_thread=False) if base.exists() else None

    def _from_base(self, column: str, key: str) -> tuple | None:
        if self._base is None:
            return None
        with self._lock:
            return self._base.execute(f"SELECT {column} FROM results WHERE key = ?", (key,)).fetchone()

    def get(self, key: str) -> str | None:
        text = super().get(key)
        if text is None:
            row = self._from_base("text", key)
            text = None if row is None else row[0]
        return text

    def get_extra(self, key: str) -> dict | None:
        extra = super().get_extra(key)
        if extra is None:
            row = self._from_base("extra", key)
            extra = None if row is None or row[0] is None else json.loads(row[0])
        return extra

    def close(self) -> None:
        if self._base is not None:
            self._base.close()
        super().close()


def run_sharded(stage: str, job: dict[str, Any], *, n_items: int, workers: int, tp: int, cache: Path) -> None:
    """Generate ``n_items`` items of ``stage`` in ``workers`` processes on their own GPUs (module docstring), then
    merge their caches into ``cache``. A worker that fails stops the stage (:class:`StageIncomplete`) naming its
    shard and log; the generations of every worker stay for the rerun."""
    if stage not in STAGES:
        raise ThinkJError(f"unknown data-parallel stage {stage!r}; known: {', '.join(STAGES)}")
    groups = device_groups(workers, tp)
    cache = Path(cache)
    merge_shard_caches(cache)  # a stopped run's shards, whatever their count
    count = min(workers, max(n_items, 1))
    job_file = cache.with_name(f"{cache.stem}.shards.json")
    write_json(job_file, {"stage": stage, "job": job, "cache": str(cache)})
    running = []
    for index in range(count):
        start, end = shard_bounds(n_items, index, count)
        log = cache.with_name(f"{cache.stem}.shard{index}of{count}.log")
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": groups[index]}
        print(f"[data parallel] {stage} shard {index + 1}/{count}: items {start}-{end - 1} on GPU(s) "
              f"{groups[index]}, log {log}", file=sys.stderr, flush=True)
        with open(log, "w", encoding="utf-8") as handle:
            proc = subprocess.Popen([sys.executable, "-m", "thinkj.inference.data_parallel", str(job_file), str(index),
                                     str(count)], env=env, stdout=handle, stderr=subprocess.STDOUT)
        running.append((index, proc, log))
    failed = [(index, proc.wait(), log) for index, proc, log in running]
    failed = [(index, code, log) for index, code, log in failed if code != 0]
    if failed:
        index, code, log = failed[0]
        tail = " ".join(log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:])[:300]
        raise StageIncomplete(f"{stage}: {len(failed)} of {count} data-parallel workers failed; shard {index + 1}/"
                              f"{count} exited {code} ({tail}), its log: {log}. The workers' generations are kept: "
                              "rerun the same command to resume")
    merge_shard_caches(cache)
    job_file.unlink(missing_ok=True)


def worker(job_file: str, index: int, count: int) -> None:
    """One worker: the stage's ``generate_shard`` over shard ``index`` of ``count``, into its own cache."""
    spec = json.loads(Path(job_file).read_text(encoding="utf-8"))
    module, function = STAGES[spec["stage"]].split(":")
    generate = getattr(importlib.import_module(module), function)
    cache = Path(spec["cache"])
    print(f"worker {index + 1}/{count} of {spec['stage']}: CUDA_VISIBLE_DEVICES="
          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}", flush=True)
    shard = ShardCache(shard_cache_path(cache, index, count), cache)
    try:
        generate(spec["job"], index, count, shard)
    finally:
        shard.close()


if __name__ == "__main__":  # vLLM spawns worker processes: the engine must be created under this guard
    exit_on_user_error(lambda: worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
