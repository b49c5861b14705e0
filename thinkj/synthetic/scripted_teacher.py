"""A scripted stand-in for DeepSeek-R1, served over real HTTP (OpenAI-compatible) for the demo tasks.

    thinkj data teacher-serve --port 8011 --error-rate 0.15          # until Ctrl-C
    python -m thinkj.synthetic.scripted_teacher --port 8011                        # the same

    with TeacherServer(TeacherConfig(seed=0)) as server:               # in-process, free port, own thread
        backend = make_backend("openai", "r1-scripted", base_url=server.base_url)

It reads the pair back from the rendered judge prompt (the question and the ``[Response (a)]`` /
``[Response (b)]`` blocks of :mod:`thinkj.prompts`) and answers the way R1 does: a long, wandering
reasoning (in ``reasoning_content``, or inline in ``<think>`` with ``inline_think``), then a short
explanation that summarises it (the task's ``explain``: :mod:`thinkj.synthetic.tasks`), then the verdict sentence with a
strength. Which answers are wrong (``error_rate``) or come without an explanation
(``empty_explanation_rate``) is a function of the prompt and the seed, so the same prompt always gets
the same answer. Fault injection (``faults`` = rates of timeout / 429 / 500 / malformed / drop per
request, plus ``poison_rate`` = share of prompts that always get a 500) is drawn from a seeded RNG.
The server counts requests and valid answers per prompt (``counts``), which tests use to prove that a
rerun repeats no finished call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import NoReturn

from thinkj.errors import ThinkJError
from thinkj.prompts import verdict_sentence
from thinkj.records import PreferencePair

FAULTS = ("timeout", "429", "500", "malformed", "drop")
_QUESTION = re.compile(r"\[User question\]\n(.*?)\n\n\[Response \(a\)\]", re.S)
_RESPONSE = {side: re.compile(rf"\[Response \({side}\)\]\n(.*?)\n\[End of Response \({side}\)\]", re.S) for side in "ab"}
_FILLERS = [
    "Hmm, let me read the question again to be sure what is being asked.",
    "Wait, maybe I should not rush this; a short answer can still be the right one.",
    "Let me consider whether the order in which the responses appear could be misleading me.",
    "Alternatively, one could argue the user might accept a loose answer, but that seems a stretch.",
    "Okay, so the key point is whether each response actually does what the user wanted.",
    "Let me double-check by going over both responses word by word.",
    "Is there anything harmful or rude here? No, nothing like that in either response.",
    "Length is not a merit by itself, so I should not prefer the longer text for that reason.",
]


@dataclass
class TeacherConfig:
    error_rate: float = 0.15  # share of prompts answered with the wrong side
    empty_explanation_rate: float = 0.1  # share of answers with the verdict but no explanation
    inline_think: bool = False  # reasoning inside <think> in content instead of reasoning_content
    reasoning_sentences: int = 24  # length of the wandering reasoning
    seed: int = 0
    faults: dict[str, float] = field(default_factory=dict)  # {"timeout": 0.05, "429": 0.05, ...} per request
    poison_rate: float = 0.0  # share of prompts that always fail with 500 (exhaust the client's retries)
    poison_fault: str = "500"  # how a poisoned prompt fails: "500", or "drop" (the connection closed, no response)
    fault_seed: int = 0
    delay: float = 0.0  # seconds before each answer
    timeout_sleep: float = 5.0  # how long a "timeout" fault stalls (longer than the client's timeout in tests)
    retry_after: float | None = 0.01  # Retry-After header sent with 429
    api_key_env: str | None = None  # when set, requests must carry "Bearer $<this variable>" (else 401)
    task: str = "fruit"  # which demo task's rules it knows (thinkj.synthetic.tasks): fruit | facts
    always: str | None = None  # "a" / "b": name that side for every prompt (a position-constant judge, a control)

    def __post_init__(self) -> None:
        if self.always not in (None, "a", "b"):
            raise ThinkJError(f"always must be 'a', 'b' or unset, got {self.always!r}")
        if self.poison_fault not in ("500", "drop"):
            raise ThinkJError(f"poison_fault must be '500' or 'drop', got {self.poison_fault!r}")
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ThinkJError(f"unknown fault kinds {sorted(unknown)}; known: {FAULTS}")
        if sum(self.faults.values()) > 1:
            raise ThinkJError("fault rates must sum to at most 1")
        from thinkj.synthetic.tasks import TASKS

        TASKS.lookup(self.task)  # an unknown task fails here, naming the known ones, not at the first request


def prompt_key(messages: list[dict]) -> str:
    """What the server counts calls by: a hash of the conversation text."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:16]


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (stable across processes, unlike hash())."""
    digest = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def parse_prompt(text: str) -> PreferencePair | None:
    """The pair behind a rendered single-question judge prompt, or None when the text is not one."""
    question, a, b = _QUESTION.search(text), _RESPONSE["a"].search(text), _RESPONSE["b"].search(text)
    if not (question and a and b):
        return None
    return PreferencePair("teacher", "prompt", [{"role": "user", "content": question.group(1)}], a.group(1), b.group(1), "tie")


def scripted_answer(text: str, config: TeacherConfig) -> tuple[str, str]:
    """(reasoning, content) the teacher gives for a prompt."""
    from thinkj.synthetic.tasks import get_task

    if config.always:
        return ("I will go with the response in this position.", verdict_sentence(config.always, 2))
    task = get_task(config.task)
    pair = parse_prompt(text)
    draw = lambda what: _unit(config.seed, what, text)  # noqa: E731
    if pair is None:
        choice = "a" if draw("side") < 0.5 else "b"
        return ("I cannot find two responses to compare in this prompt, so I will pick one.",
                verdict_sentence(choice, 1))
    right = task.rule_verdict(pair)
    if right == "tie":
        right = "a" if draw("tie") < 0.5 else "b"
    wrong = draw("error") < config.error_rate
    choice = {"a": "b", "b": "a"}[right] if wrong else right
    worse = pair.response_b if choice == "a" else pair.response_a
    strength = task.strength_against(worse, pair) if not wrong else 1 + int(draw("strength") * 2)
    rng = random.Random(f"{config.seed}-{text}")
    steps = [f"Okay, the user wrote: \"{pair.instruction}\". {task.asks(pair)}",
             f"Response (a) says \"{pair.response_a}\" -- it {task.describe(pair.response_a, pair)}.",
             f"Response (b) says \"{pair.response_b}\" -- it {task.describe(pair.response_b, pair)}."]
    while len(steps) < config.reasoning_sentences:
        steps.append(rng.choice(_FILLERS))
    steps.append(f"So, putting it together, I lean towards Response ({choice}).")
    reasoning = " ".join(steps[:3]) + "\n\n" + " ".join(steps[3:])
    explanation = "" if draw("empty") < config.empty_explanation_rate else task.explain(pair)
    content = (f"{explanation}\n\n" if explanation else "") + verdict_sentence(choice, strength)
    return reasoning, content


class TeacherServer:
    """The aiohttp app on 127.0.0.1 in a background thread; ``with`` starts and stops it."""

    def __init__(self, config: TeacherConfig | None = None, host: str = "127.0.0.1", port: int = 0,
                 model: str = "r1-scripted"):
        self.config = config or TeacherConfig()
        self.host, self.port, self.model = host, port, model
        self.requests: Counter[str] = Counter()  # prompt key -> requests received
        self.answered: Counter[str] = Counter()  # prompt key -> valid answers sent
        self.faults: Counter[str] = Counter()
        self._rng = random.Random(self.config.fault_seed)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def counts(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {"requests": dict(self.requests), "answered": dict(self.answered), "faults": dict(self.faults)}

    # -- handlers ---------------------------------------------------------------------------------------------
    def _app(self):
        from aiohttp import web

        async def models(request: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "thinkj"}]})

        async def chat(request: web.Request) -> web.StreamResponse:
            try:
                body = await request.json()
                messages = body["messages"]
                text = "\n".join(str(m.get("content", "")) for m in messages)
            except (ValueError, KeyError, TypeError, AttributeError):
                return web.json_response({"error": {"message": "body must be JSON with 'messages'"}}, status=400)
            wanted = f"Bearer {os.environ.get(self.config.api_key_env)}" if self.config.api_key_env else None
            if wanted and request.headers.get("Authorization") != wanted:
                return web.json_response({"error": {"message": "missing or wrong API key"}}, status=401)
            key = prompt_key(messages)
            with self._lock:
                self.requests[key] += 1
                roll = self._rng.random()
            if self.config.delay:
                await asyncio.sleep(self.config.delay)
            if _unit(self.config.fault_seed, "poison", text) < self.config.poison_rate:
                if self.config.poison_fault == "drop":
                    self._drop("poison", request)
                return self._fault("poison", web.json_response({"error": {"message": "poisoned prompt"}}, status=500))
            edge = 0.0
            for kind in FAULTS:
                edge += self.config.faults.get(kind, 0.0)
                if roll < edge:
                    return await self._inject(kind, request)
            reasoning, content = scripted_answer(text, self.config)
            message = {"role": "assistant", "content": content}
            if self.config.inline_think:
                message["content"] = f"<think>\n{reasoning}\n</think>\n\n{content}"
            else:
                message["reasoning_content"] = reasoning
            words = len(text.split())
            payload = {"id": f"chatcmpl-{key}", "object": "chat.completion", "created": int(time.time()), "model": self.model,
                       "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": words, "completion_tokens": len((reasoning + content).split()),
                                 "total_tokens": words + len((reasoning + content).split())}}
            with self._lock:
                self.answered[key] += 1
            return web.json_response(payload)

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_post("/v1/chat/completions", chat)
        return app

    def _fault(self, kind: str, response):
        with self._lock:
            self.faults[kind] += 1
        return response

    async def _inject(self, kind: str, request):
        from aiohttp import web

        if kind == "timeout":
            self._fault(kind, None)
            await asyncio.sleep(self.config.timeout_sleep)
            return web.json_response({"error": {"message": "too late"}}, status=504)
        if kind == "429":
            headers = {} if self.config.retry_after is None else {"Retry-After": f"{self.config.retry_after:g}"}
            return self._fault(kind, web.json_response({"error": {"message": "rate limited"}}, status=429, headers=headers))
        if kind == "500":
            return self._fault(kind, web.json_response({"error": {"message": "internal error"}}, status=500))
        if kind == "malformed":
            return self._fault(kind, web.Response(text='{"choices": [{"message": {"content": "trunc', status=200,
                                                  content_type="application/json"))
        self._drop(kind, request)

    def _drop(self, kind: str, request) -> NoReturn:
        """Close the socket without an HTTP response."""
        with self._lock:
            self.faults[kind] += 1
        if request.transport is not None:
            request.transport.close()
        raise asyncio.CancelledError

    # -- lifecycle --------------------------------------------------------------------------------------------
    async def _serve(self) -> None:
        from aiohttp import web

        runner = web.AppRunner(self._app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # the real port when 0 (a free one) was asked for
        self._stop = asyncio.Event()
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def start(self) -> TeacherServer:
        def run() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._serve())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="teacher-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("teacher server did not start within 30 s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __enter__(self) -> TeacherServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def serve_forever(config: TeacherConfig, host: str = "127.0.0.1", port: int = 8011,
                  port_file: str | os.PathLike | None = None) -> None:
    """Serve until interrupted or terminated; ``port_file`` gets the port once the server listens (port 0 = a free
    one), so a script can wait for it instead of guessing."""
    import signal

    from thinkj.atomic import write_text_atomic

    server = TeacherServer(config, host, port).start()
    if port_file:
        write_text_atomic(port_file, f"{server.port}\n")
    print(f"scripted teacher on {server.base_url} (Ctrl-C to stop)", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` from the script that started it stops it cleanly
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="Scripted R1 stand-in for the demo tasks (OpenAI-compatible).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--error-rate", type=float, default=0.15)
    parser.add_argument("--empty-explanation-rate", type=float, default=0.1)
    parser.add_argument("--inline-think", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task", default="fruit", help="fruit (tiny demo) or facts (SmolLM2 demo)")
    parser.add_argument("--faults", default="{}", help='JSON, e.g. {"429": 0.1, "drop": 0.05}')
    args = parser.parse_args()
    serve_forever(TeacherConfig(args.error_rate, args.empty_explanation_rate, args.inline_think, seed=args.seed,
                                faults=json.loads(args.faults), task=args.task), args.host, args.port)


if __name__ == "__main__":
    main()
