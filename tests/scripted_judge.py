"""A small scripted OpenAI-compatible pairwise judge on 127.0.0.1, for the judge-as-reward tests.

The judge reads the two responses of a ``judge_strength_v1`` prompt. merit = count("good") - count("bad"); the
side with more merit wins with strength min(3, |difference|); equal merit is a tie ("It is a tie"). Markers in a
response change the behaviour: ``BIAS`` -> always Response (a) (position bias, flips between orders),
``GARBLE`` -> an answer without a verdict, ``FAIL`` -> HTTP 400 (not retried), ``SLOW`` -> 0.2 s delay.
It counts requests and the most requests it had in flight at once.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from contextlib import contextmanager

from aiohttp import web

PAIR_BLOCK = re.compile(r"\[Response \(([ab])\)\]\n(.*?)\n\[End of Response \(\1\)\]", re.DOTALL)


def merit(text: str) -> int:
    return text.count("good") - text.count("bad")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ScriptedPairJudge:
    def __init__(self):
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0

    def answer(self, content: str) -> str | None:
        sides = dict(PAIR_BLOCK.findall(content))
        a, b = sides.get("a", ""), sides.get("b", "")
        both = a + b
        if "FAIL" in both:
            return None
        if "GARBLE" in both:
            return "<think>\nhard to say\n</think>\nBoth have merits."
        if "BIAS" in both:
            return "<think>\nthe first one\n</think>\nTherefore, Response (a) is better, and the preference strength is [[2]]."
        diff = merit(a) - merit(b)
        if diff == 0:
            return "<think>\nsame merit\n</think>\nIt is a tie."
        choice = "a" if diff > 0 else "b"
        return (f"<think>\nweighing both\n</think>\nTherefore, Response ({choice}) is better, and the preference "
                f"strength is [[{min(3, abs(diff))}]].")

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            body = await request.json()
            content = body["messages"][-1]["content"]
            if "SLOW" in content:
                await asyncio.sleep(0.2)
            text = self.answer(content)
            if text is None:
                return web.Response(status=400, text="scripted failure")
            return web.json_response({"id": "x", "object": "chat.completion", "model": body["model"],
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                   "finish_reason": "stop"}]})
        finally:
            self.in_flight -= 1


@contextmanager
def serve_judge():
    """Yield (judge, base_url) with the server running in a background thread."""
    judge = ScriptedPairJudge()
    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", judge.handle)
    runner = web.AppRunner(app)
    port = free_port()
    loop.run_until_complete(runner.setup())
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield judge, f"http://127.0.0.1:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


if __name__ == "__main__":  # python tests/scripted_judge.py: serve until Ctrl-C (manual runs)
    import time

    with serve_judge() as (_, url):
        print(url, flush=True)
        while True:
            time.sleep(3600)
