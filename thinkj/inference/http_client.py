"""OpenAI-compatible chat-completions backend (DeepSeek-R1's API, ``vllm serve``, the scripted teacher).

    backend = make_backend("openai", "deepseek-reasoner", base_url="https://api.deepseek.com/v1",
                           api_key_env="DEEPSEEK_API_KEY", cache=ResultCache("runs/ds/traces/cache.sqlite"),
                           tag="judge_strength_v2", max_concurrency=16)
    results = backend.chat_many(conversations, SamplingParams(temperature=0.0, max_new_tokens=8192))
    results[i][0].reasoning, results[i][0].content

Requests run on an asyncio loop with at most ``max_concurrency`` in flight. A request is retried with
exponential back-off and jitter on 408/409/425/429/5xx, timeouts, dropped connections and bodies that are
not the expected JSON; ``Retry-After`` is honoured when the server sends it. Other 4xx fail at once.
A 200 whose body is not a chat completion (no ``choices[0].message.content``, content that is not text, or
null content with no reasoning) is malformed too; an empty string is an (empty) answer.

Each finished call is written to the :class:`ResultCache` (keyed on the served model name and the endpoint,
:attr:`OpenAIChatBackend.identity`) the moment it completes; a call that exhausts its
retries is recorded with ``put_failure`` and is never a stored answer. So every (conversation, sample) ends
with exactly one stored result or one recorded failure, a killed run loses only calls in flight, and a rerun
asks only for what is missing (recorded failures are retried). A server that cannot be reached does not cost
hours of back-off: a connection must open within ``connect_timeout`` (30 s; ``timeout`` bounds the whole call), and
once ``give_up_after`` calls in a row have found no server on their last attempt (refused, no connection in time,
dropped before an answer), the calls not yet sent are recorded as failed ("not sent") without a request, calls in
flight stop at their next attempt that finds no server, and the stage ends incomplete as for any failed call; a
rerun asks for them again. A call the server answers, even with an error status, resets the count, and so does
one it took but did not finish within ``timeout`` (a long generation, not a missing server): prompts it refuses or
outlasts one by one (a 400, a 500 for one prompt) never stop the others, so a rerun always gets past them, and a
rate-limited API (429) keeps being asked. ``generate`` returns a
:class:`~thinkj.inference.failures.FailedCall` for a failed call (the rule stages apply to failed calls is in
:mod:`thinkj.inference.failures`).

The API key is read from the environment variable named by ``api_key_env`` when the backend is built and
is only ever placed in the Authorization header: never in reprs, logs, error texts or the cache.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from thinkj.checks import check_range
from thinkj.inference.base import Messages, Output, SamplingParams
from thinkj.inference.cache import ResultCache, cache_key
from thinkj.inference.failures import FailedCall
from thinkj.progress import progress_bar

log = logging.getLogger(__name__)
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
OPEN, CLOSE = "<think>", "</think>"
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"  # `vllm serve`'s default port
# calls in a row that found no server (each after its retries) before the rest are not sent: with the default
# retries such a call takes about a minute of back-off, so a server that is down costs minutes, not
# (calls / concurrency) minutes
GIVE_UP_AFTER = 32
# seconds for a connection to open: a host that drops the connect (down behind a firewall, a full listen backlog)
# otherwise holds each attempt for the whole ``timeout`` (600 s), which has to allow a long generation
CONNECT_TIMEOUT = 30.0


def served_identity(model: str, base_url: str = DEFAULT_BASE_URL) -> str:
    """The cache identity of ``model`` served at ``base_url``: the served name alone does not say what answers."""
    return f"{model}@{base_url.rstrip('/')}"


@dataclass
class ChatResult:
    """One completion: the final answer (``content``) and the reasoning the server returned with it."""

    content: str = ""
    reasoning: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # set when the call failed after all retries
    attempts: int = 0
    cached: bool = False
    unreachable: bool = False  # its last attempt found no server (refused, no connection in time, dropped unanswered)

    @property
    def ok(self) -> bool:
        return self.error is None

    def full_text(self) -> str:
        """Reasoning and answer as one judge output: ``<think>reasoning</think>`` then the content."""
        if not self.reasoning:
            return self.content
        return f"{OPEN}\n{self.reasoning.strip()}\n{CLOSE}\n{self.content.strip()}"


def chat_message(data: Any) -> dict[str, Any]:
    """The first choice's message of a chat-completion body; TypeError / KeyError for anything else, so a server
    answering garbage with status 200 is a failed call, never an empty answer."""
    message = data["choices"][0]["message"]
    if not isinstance(message, dict) or "content" not in message:
        raise KeyError("choices[0].message.content")
    for name in ("content", "reasoning_content", "reasoning"):
        if message.get(name) is not None and not isinstance(message[name], str):
            raise TypeError(f"choices[0].message.{name} is {type(message[name]).__name__}, not text")
    if message["content"] is None and not (message.get("reasoning_content") or message.get("reasoning")):
        raise KeyError("choices[0].message.content is null and no reasoning came with it")  # no text at all
    return message


def split_reasoning(message: dict[str, Any]) -> tuple[str, str]:
    """(reasoning, content) of a chat message: ``reasoning_content`` (DeepSeek) / ``reasoning`` (newer vLLM)
    when the server separates it, else a ``<think>...</think>`` block at the start of the content."""
    content = message.get("content") or ""
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    if reasoning:
        return str(reasoning).strip(), str(content).strip()
    content = str(content)
    stripped = content.lstrip()
    close = stripped.find(CLOSE)
    # R1-style chat templates often put the opening tag in the prompt, so the reply may begin inside the block.
    if close >= 0 and (stripped.startswith(OPEN) or OPEN not in stripped[:close]):
        head = stripped[:close]
        if head.startswith(OPEN):
            head = head[len(OPEN):]
        return head.strip(), stripped[close + len(CLOSE):].strip()
    return "", content.strip()


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _Fatal(Exception):
    pass


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the HTTP-date form
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (ValueError, TypeError):
        return None


class OpenAIChatBackend:
    """Backend ``"openai"``: ``generate`` (the protocol) plus ``chat_many`` returning reasoning + content."""

    def __init__(self, model: str, base_url: str = DEFAULT_BASE_URL, *, api_key_env: str | None = "OPENAI_API_KEY",
                 max_concurrency: int = 16, timeout: float = 600.0, max_retries: int = 6, backoff: float = 1.0,
                 max_backoff: float = 60.0, cache: ResultCache | str | os.PathLike | None = None, tag: str = "",
                 join_reasoning: bool = True, progress: bool = True, extra_body: dict[str, Any] | None = None,
                 give_up_after: int = GIVE_UP_AFTER, connect_timeout: float = CONNECT_TIMEOUT):
        self.check_settings(max_concurrency=max_concurrency, timeout=timeout, connect_timeout=connect_timeout,
                            max_retries=max_retries, backoff=backoff, max_backoff=max_backoff,
                            give_up_after=give_up_after)
        self.name = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.__key = os.environ.get(api_key_env) if api_key_env else None
        self.max_concurrency = int(max_concurrency)
        self.timeout = float(timeout)
        self.connect_timeout = min(float(connect_timeout), self.timeout)
        self.max_retries = int(max_retries)
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.give_up_after = int(give_up_after)  # 0: send every call whatever came before
        self.cache = cache if isinstance(cache, ResultCache) or cache is None else ResultCache(cache)
        self.tag = tag
        self.join_reasoning = join_reasoning  # generate() returns "<think>reasoning</think>content" when True
        self.progress = progress
        self.extra_body = dict(extra_body or {})
        self.stats = {"requests": 0, "retries": 0, "failures": 0, "cached": 0, "completed": 0, "not_sent": 0}

    @staticmethod
    def check_settings(*, max_concurrency: int = 16, timeout: float = 600.0, connect_timeout: float = CONNECT_TIMEOUT,
                       max_retries: int = 6, backoff: float = 1.0, max_backoff: float = 60.0,
                       give_up_after: int = GIVE_UP_AFTER, **_: Any) -> None:
        """The client's numeric settings, checked where they are defined (the constructor and ``--backend-arg``
        both call this): a value out of range is an error naming it, never clamped (``give_up_after=-1`` is not
        "off", that is 0; ``max_concurrency=0`` is not 1)."""
        for name, value, low, low_open in (("max_concurrency", max_concurrency, 1, False),
                                           ("timeout", timeout, 0, True), ("connect_timeout", connect_timeout, 0, True),
                                           ("max_retries", max_retries, 0, False), ("backoff", backoff, 0, False),
                                           ("max_backoff", max_backoff, 0, False),
                                           ("give_up_after", give_up_after, 0, False)):
            check_range(f"openai backend: {name}", value, low=low, low_open=low_open)

    def __repr__(self) -> str:
        return (f"OpenAIChatBackend(model={self.name!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r}, "
                f"max_concurrency={self.max_concurrency})")

    # -- public API -------------------------------------------------------------------------------------------
    def generate(self, conversations: list[Messages], params: SamplingParams) -> list[list[Output]]:
        """The backend protocol: ``params.n`` texts per conversation, a :class:`FailedCall` for each call that
        failed after its retries (never an empty text standing in for an answer)."""
        results = self.chat_many(conversations, params)
        return [[((r.full_text() if self.join_reasoning else r.content) if r.ok
                  else FailedCall(r.error or "failed", r.attempts)) for r in row] for row in results]

    def chat_many(self, conversations: list[Messages], params: SamplingParams) -> list[list[ChatResult]]:
        """Synchronous wrapper: runs the event loop (in a helper thread when one is already running here)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.achat_many(conversations, params))
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = asyncio.run(self.achat_many(conversations, params))
            except BaseException as err:  # re-raised in the caller's thread
                box["error"] = err

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["value"]

    @property
    def identity(self) -> str:
        """What the cache keys this backend's answers on: the served model name *and* the endpoint serving it. Two
        servers may serve different models under one name (two ``vllm serve`` of other checkpoints, a teacher and a
        stand-in): a run pointed at another ``--base-url`` is answered by that server, never from the other's cache."""
        return served_identity(self.name, self.base_url)

    def key(self, messages: Messages, params: SamplingParams, sample: int) -> str:
        return cache_key(self.identity, self.tag, messages, params, sample)

    def stored_output(self, key: str) -> str | None:
        """What ``generate`` returns for the call stored under ``key`` in this backend's cache, or None: the stored
        answer with its reasoning joined back as ``generate`` joins it (the cache keeps the two apart)."""
        text = self.cache.get(key) if self.cache is not None else None
        if text is None or not self.join_reasoning:
            return text
        extra = self.cache.get_extra(key) or {}
        return ChatResult(text, extra.get("reasoning", "")).full_text()

    async def achat_many(self, conversations: list[Messages], params: SamplingParams) -> list[list[ChatResult]]:
        import aiohttp

        results: list[list[ChatResult | None]] = [[None] * params.n for _ in conversations]
        todo: list[tuple[int, int, str]] = []
        for i, conv in enumerate(conversations):
            for k in range(params.n):
                key = self.key(conv, params, k)
                if self.cache is not None and self.cache.get(key) is not None:
                    extra = self.cache.get_extra(key) or {}
                    results[i][k] = ChatResult(self.cache.get(key) or "", extra.get("reasoning", ""), extra.get("usage", {}),
                                               cached=True)
                    self.stats["cached"] += 1
                else:
                    todo.append((i, k, key))
        if not todo:
            return results  # type: ignore[return-value]
        limit = asyncio.Semaphore(self.max_concurrency)
        headers = {"Content-Type": "application/json"}
        if self.__key:
            headers["Authorization"] = f"Bearer {self.__key}"
        timeout = aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout)
        connector = aiohttp.TCPConnector(limit=self.max_concurrency)
        failed_in_a_row = 0
        given_up = asyncio.Event()  # set once give_up_after calls in a row found no server; stays set for the batch

        async with aiohttp.ClientSession(headers=headers, timeout=timeout, connector=connector) as session:
            with progress_bar(f"{self.name} via {self.base_url}", len(todo), enabled=self.progress) as advance:
                async def one(i: int, k: int, key: str) -> None:
                    nonlocal failed_in_a_row
                    async with limit:
                        if given_up.is_set():
                            result = self._not_sent()
                        else:
                            result = await self._call(session, conversations[i], params, k, given_up=given_up)
                            failed_in_a_row = failed_in_a_row + 1 if result.unreachable else 0
                            if self.give_up_after and failed_in_a_row >= self.give_up_after:
                                given_up.set()
                    self._store(key, result)
                    results[i][k] = result
                    advance(1)

                await asyncio.gather(*(one(i, k, key) for i, k, key in todo))
        return results  # type: ignore[return-value]

    # -- internals --------------------------------------------------------------------------------------------
    def _not_sent(self) -> ChatResult:
        if not self.stats["not_sent"]:
            log.warning("%s via %s: the last %d calls found no server after their retries; the calls left are not "
                        "sent (recorded as failed: rerun to ask for them)", self.name, self.base_url, self.give_up_after)
        self.stats["not_sent"] += 1
        return ChatResult(error=f"not sent: the {self.give_up_after} calls before it found no server after their "
                                "retries (is it up?)", attempts=0)

    def _scrub(self, text: str) -> str:
        return text.replace(self.__key, "***") if self.__key else text

    def _store(self, key: str, result: ChatResult) -> None:
        if result.ok:
            self.stats["completed"] += 1
        else:
            self.stats["failures"] += 1
        if self.cache is None:
            return
        if result.ok:
            self.cache.put(key, result.content, {"reasoning": result.reasoning, "usage": result.usage})
        else:
            self.cache.put_failure(key, result.error or "failed", result.attempts)

    def _payload(self, messages: Messages, params: SamplingParams, sample: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "messages": messages, "temperature": params.temperature,
                                "top_p": params.top_p, "max_tokens": params.max_new_tokens, "n": 1}
        if params.temperature > 0:
            body["seed"] = params.seed + sample  # distinct, reproducible samples where the server supports seeds
        body.update(self.extra_body)
        return body

    async def _call(self, session: Any, messages: Messages, params: SamplingParams, sample: int, *,
                    given_up: asyncio.Event | None = None) -> ChatResult:
        """One call with its retries. A call in flight when the batch gives up (``given_up`` set) and whose last
        attempt found no server stops there, waking from its back-off, instead of spending the rest of its retries
        on a server the batch has judged absent (so a dead server costs about two rounds of calls, not three)."""
        import aiohttp

        body = self._payload(messages, params, sample)
        url = f"{self.base_url}/chat/completions"
        error = ""
        unreachable = False
        for attempt in range(self.max_retries + 1):
            self.stats["requests"] += 1
            wait, unreachable = None, False
            try:
                async with session.post(url, json=body) as response:
                    text = await response.text()
                    if response.status in RETRY_STATUS:
                        wait_s = _retry_after(response.headers.get("Retry-After"))
                        raise _Retryable(f"HTTP {response.status}: {text[:200]}", wait_s)
                    if response.status >= 400:
                        raise _Fatal(f"HTTP {response.status}: {text[:300]}")
                    try:
                        data = json.loads(text)
                        message = chat_message(data)
                    except (ValueError, KeyError, IndexError, TypeError) as err:
                        raise _Retryable(f"malformed response body ({type(err).__name__}: {err}): {text[:120]!r}") from None
                    reasoning, content = split_reasoning(message)
                    return ChatResult(content, reasoning, data.get("usage") or {}, attempts=attempt + 1)
            except _Fatal as err:
                return ChatResult(error=self._scrub(str(err)), attempts=attempt + 1)
            except _Retryable as err:
                error, wait = str(err), err.retry_after
            except aiohttp.ConnectionTimeoutError:  # before the TimeoutError it also is
                error, unreachable = f"no connection within {self.connect_timeout:g} s", True
            except asyncio.TimeoutError:  # the server took the request but did not finish it: it is there
                error = f"timeout: no complete answer within {self.timeout:g} s"
            except (aiohttp.ClientError, ConnectionError) as err:  # dropped connections, payload errors, refused
                error = f"{type(err).__name__}: {err}"
                # no answer at all (refused, reset, dropped before a response); a payload error had one begin
                unreachable = isinstance(err, (aiohttp.ClientConnectionError, ConnectionError))
            absent = unreachable and given_up is not None  # this attempt found no server: has the batch given up?
            if attempt == self.max_retries or absent and given_up.is_set():
                break
            delay = min(self.max_backoff, self.backoff * 2 ** attempt) * random.uniform(0.5, 1.0)
            if wait is not None:
                delay = max(delay, min(wait, self.max_backoff))
            log.debug("retry %d/%d in %.2f s: %s", attempt + 1, self.max_retries, delay, self._scrub(error)[:200])
            if absent:  # the back-off ends early if the batch gives up meanwhile
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(given_up.wait(), delay)
                if given_up.is_set():
                    break
            else:
                await asyncio.sleep(delay)
            self.stats["retries"] += 1
        return ChatResult(error=self._scrub(error) or "failed", attempts=attempt + 1, unreachable=unreachable)
