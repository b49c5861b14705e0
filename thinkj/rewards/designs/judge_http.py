"""Chat requests from the judge-as-reward presets to an OpenAI-compatible judge server, and the guard that stops a
run when the judge cannot be reached.

:func:`judge_batch` sends a batch of conversations through the project's OpenAI-compatible backend
(``thinkj.inference.http_client.OpenAIChatBackend``: retries with backoff on timeouts, dropped connections, 429
and 5xx, Retry-After honoured) with two additions for training:

* **One concurrency limit per judge endpoint** (``concurrency``), shared by every group scored on the same event
  loop: TRL and verl score many groups at once, and a per-group limit would multiply the load on the server.
* **A failure meter per endpoint** (:class:`JudgeMeter`). A request that still fails after its retries is a
  *failure*. The meter keeps the outcome of the last ``failure_window`` requests; when the share of failures
  there is above ``max_failure_rate`` (and at least ``min_calls`` requests were made, or every request of the
  batch failed) the batch raises :class:`JudgeUnavailableError`, which stops the trainer with a one-line reason
  (the URL, the counts and the last error). Below the threshold a failed comparison is left out of the rewards
  (never read as a score of 0), and the batch's failure rate is returned to be logged as a training metric.

``max_failure_rate=1.0`` switches the stop off (failures are still counted and logged).

    batch = await judge_batch(conversations, base_url="http://127.0.0.1:8000/v1", model="judge", max_tokens=512)
    batch.texts[i][k]           # sample k of conversation i, None when the request failed
    batch.failure_rate, batch.latency_s, batch.cache_hits
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from thinkj.errors import ThinkJError
from thinkj.inference.base import SamplingParams
from thinkj.inference.cache import ResultCache
from thinkj.inference.http_client import OpenAIChatBackend

GUARD_DEFAULTS: dict[str, Any] = {"max_failure_rate": 0.2, "min_calls": 8, "failure_window": 256}
# the client and guard settings every HTTP judge design takes, above zero (thinkj.rewards.weights): 0 is not "a
# little" (no call in flight, no time, no answer, a window of no requests)
CLIENT_KINDS: dict[str, str] = {"concurrency": "int+", "timeout_s": "float+", "max_tokens": "int+",
                                "failure_window": "int+"}


class JudgeUnavailableError(ThinkJError):
    """Too many judge requests failed: the reward would be noise (or silently 0), so training must stop."""


class JudgeMeter:
    """Outcomes of the last ``window`` requests to one judge endpoint (thread-safe; shared across groups)."""

    def __init__(self, endpoint: str, window: int = 256):
        self.endpoint = endpoint
        self._recent: deque[bool] = deque(maxlen=max(int(window), 1))  # True = failed
        self._lock = threading.Lock()
        self.calls = self.failures = 0
        self.last_error = ""

    def record(self, failed: list[bool], errors: list[str]) -> None:
        with self._lock:
            self._recent.extend(failed)
            self.calls += len(failed)
            self.failures += sum(failed)
            if errors:
                self.last_error = errors[-1]

    def check(self, batch_failed: int, batch_calls: int, *, max_failure_rate: float, min_calls: int) -> None:
        """Raise :class:`JudgeUnavailableError` when the recent failure rate is above ``max_failure_rate``."""
        with self._lock:
            recent, failed = len(self._recent), sum(self._recent)
        if not recent or failed / recent <= max_failure_rate:
            return
        if recent < min_calls and not (batch_calls and batch_failed == batch_calls):
            return  # too few requests to tell an outage from bad luck, and this batch still got answers
        raise JudgeUnavailableError(
            f"judge at {self.endpoint}: {failed} of the last {recent} requests failed after retries "
            f"({failed / recent:.0%} > max_failure_rate {max_failure_rate:.0%}); last error: "
            f"{self.last_error[:200] or 'unknown'}. Is the judge server up and serving that model? "
            "(a judge reward never turns failed requests into scores; raise max_failure_rate to tolerate more)")


_METERS: dict[tuple[str, str], JudgeMeter] = {}
_METERS_LOCK = threading.Lock()


def meter_for(base_url: str, model: str, window: int = 256) -> JudgeMeter:
    key = (base_url.rstrip("/"), model)
    with _METERS_LOCK:
        if key not in _METERS:
            _METERS[key] = JudgeMeter(f"{key[0]} (model {model!r})", window)
        return _METERS[key]


def reset_meters() -> None:
    with _METERS_LOCK:
        _METERS.clear()


# One semaphore per (event loop, endpoint): asyncio primitives belong to one loop, and TRL runs a new loop per call.
_LIMITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = weakref.WeakKeyDictionary()


def _endpoint_limit(endpoint: str, concurrency: int) -> asyncio.Semaphore:
    per_loop = _LIMITS.setdefault(asyncio.get_running_loop(), {})
    if endpoint not in per_loop:
        per_loop[endpoint] = asyncio.Semaphore(max(int(concurrency), 1))
    return per_loop[endpoint]


class _JudgeBackend(OpenAIChatBackend):
    """The project's HTTP backend, plus the endpoint-wide concurrency limit and per-request latency."""

    def __init__(self, *args: Any, endpoint_limit: asyncio.Semaphore, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._endpoint_limit = endpoint_limit
        self.latencies: list[float] = []

    async def _call(self, session: Any, messages: Any, params: SamplingParams, sample: int, **kw: Any) -> Any:
        async with self._endpoint_limit:
            start = time.perf_counter()
            result = await super()._call(session, messages, params, sample, **kw)
            self.latencies.append(time.perf_counter() - start)  # includes retries: what the trainer waits
        return result


@dataclass
class JudgeBatch:
    texts: list[list[str | None]]
    calls: int = 0  # requests sent (cache hits excluded)
    failures: int = 0
    cache_hits: int = 0
    latencies: list[float] = field(default_factory=list)

    @property
    def failure_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0

    @property
    def latency_s(self) -> float:
        return sum(self.latencies) / len(self.latencies) if self.latencies else 0.0


_CACHES: dict[str, ResultCache] = {}


def _cache(path: str | None) -> ResultCache | None:
    if not path:
        return None
    if path not in _CACHES:
        _CACHES[path] = ResultCache(path)
    return _CACHES[path]


async def judge_batch(conversations: list[list[dict[str, str]]], *, n: int = 1, base_url: str, model: str,
                      api_key_env: str | None = "OPENAI_API_KEY", temperature: float = 0.0, max_tokens: int = 1024,
                      concurrency: int = 8, retries: int = 3, timeout_s: float = 120.0, backoff_s: float = 0.5,
                      with_reasoning: bool = True, cache_path: str | None = None, tag: str = "",
                      max_failure_rate: float = 0.2, min_calls: int = 8, failure_window: int = 256) -> JudgeBatch:
    """``n`` answers per conversation (sample k carries seed k when sampling); failures counted and guarded.

    With ``with_reasoning`` a reasoning field the server returns separately is put back in front of the answer
    as ``<think>..</think>``, which is what the Think-J verdict parser expects. With ``cache_path`` every answer
    is stored in a :class:`~thinkj.inference.cache.ResultCache` keyed by (model, ``tag``, messages, sampling
    settings, sample index), so a repeated comparison is not sent again.
    """
    endpoint = base_url.rstrip("/")
    backend = _JudgeBackend(model, base_url, api_key_env=api_key_env, max_concurrency=concurrency, timeout=timeout_s,
                            max_retries=retries, backoff=backoff_s, progress=False, cache=_cache(cache_path), tag=tag,
                            endpoint_limit=_endpoint_limit(f"{endpoint}|{model}", concurrency))
    params = SamplingParams(temperature=temperature, max_new_tokens=max_tokens, n=n, seed=0)
    rows = await backend.achat_many(conversations, params) if conversations else []
    fresh = [r for row in rows for r in row if not r.cached]
    failed = [not r.ok for r in fresh]
    batch = JudgeBatch([[(r.full_text() if with_reasoning else r.content) if r.ok else None for r in row] for row in rows],
                       calls=len(fresh), failures=sum(failed), cache_hits=sum(r.cached for row in rows for r in row),
                       latencies=list(backend.latencies))
    meter = meter_for(base_url, model, failure_window)
    meter.record(failed, [r.error or "" for r in fresh if not r.ok])
    meter.check(batch.failures, batch.calls, max_failure_rate=float(max_failure_rate), min_calls=int(min_calls))
    return batch


def guard_settings(kw: dict[str, Any]) -> dict[str, Any]:
    """The guard's keyword arguments out of a preset's weights."""
    return {k: kw[k] for k in GUARD_DEFAULTS if k in kw}
