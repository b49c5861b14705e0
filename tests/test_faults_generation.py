"""A generation call that fails is never an answer: evaluation, the difficulty filter and the offline pair builders
against a real OpenAI-compatible server on 127.0.0.1 that is dead, answers 500, garbage or a body that is no chat
completion, hangs or drops the connection. Each stage exits non-zero with one line, writes no complete result and
keeps nothing because of a failed call; once the server answers, the same command asks only for the calls that
failed and gives the numbers of a fresh run. A stage that keeps nothing of its input (every pair too long for the
model's context) fails with one line saying why.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import socket
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web

from thinkj.errors import StageIncomplete, exit_on_user_error, run_typer
from thinkj.inference import SamplingParams
from thinkj.inference.cache import CachedBackend, ResultCache
from thinkj.inference.failures import CallTally, FailedCall
from thinkj.inference.http_client import OpenAIChatBackend
from thinkj.prompts import judge_output
from thinkj.records import load_pairs, write_jsonl
from thinkj.synthetic.fruit_task import make_pairs

_TOLD = re.compile(r"You are told that Response \(([ab])\)")
FAULTS = ("dead", "500", "401", "garbage", "not_chat", "null_content", "hang", "drop")


def _digest(*parts: object) -> int:
    return int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FaultServer:
    """An OpenAI-compatible judge whose fault can be switched while it runs.

    ``ok``: a judge answer in the paper's format, fixed per (prompt, seed) -- some right, some wrong -- and, for a
    critic prompt, the side it is told. ``500``; ``401`` (not retried); ``garbage`` (status 200, an HTML body);
    ``not_chat`` (status 200, JSON that is no chat completion); ``null_content`` (a chat completion without any
    text); ``hang`` (no answer within the client's timeout); ``drop`` (the connection closed without a response);
    ``mute``: no fault, an answer that names no side.
    ``failing`` limits the fault to the prompts it selects; ``requests`` counts calls per prompt text.
    """

    def __init__(self, port: int | None = None):
        self.port = port or _free_port()
        self.mode = "ok"
        self.failing: Callable[[str], bool] | None = None
        self.requests: Counter[str] = Counter()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        content = body["messages"][-1]["content"]
        self.requests[content] += 1
        mode = self.mode if self.failing is None or self.failing(content) else "ok"
        if mode == "500":
            return web.json_response({"error": {"message": "internal error"}}, status=500)
        if mode == "401":
            return web.json_response({"error": {"message": "invalid API key"}}, status=401)
        if mode == "garbage":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>", content_type="text/html")
        if mode == "not_chat":
            return web.json_response({"object": "error", "message": "the model is still loading"})
        if mode == "hang":
            await asyncio.sleep(5)
        if mode == "drop":
            request.transport.close()
            raise asyncio.CancelledError
        told = _TOLD.search(content)
        choice = told.group(1) if told else "ab"[_digest(content, body.get("seed", 0)) % 2]
        text = {"null_content": None, "mute": "I cannot decide."}.get(mode, judge_output("Compared both.", choice, 2))
        return web.json_response({"id": "x", "object": "chat.completion", "model": body["model"],
                                  "choices": [{"index": 0, "finish_reason": "stop",
                                               "message": {"role": "assistant", "content": text}}]})

    def __enter__(self) -> FaultServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        self._loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# the client timeout is what "hang" waits out; 2 s, not less: a loaded 2-core machine answers a healthy request
# in more than half a second
FAST = {"max_retries": 1, "backoff": 0.01, "timeout": 2.0, "progress": False}


def _backend_args(url: str) -> list[str]:
    args = []
    for key, value in {"base_url": url, **FAST}.items():
        args += ["--backend-arg", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    return args


def _thinkj(capsys, *argv: str) -> tuple[int, str]:
    """Run ``thinkj ARGV`` in-process as its entry point does; (exit status, stderr)."""
    from thinkj.cli import _register_subcommands, app

    if not any(g.name == "train" for g in app.registered_groups):
        _register_subcommands()
    saved, sys.argv = sys.argv, ["thinkj", *argv]
    capsys.readouterr()
    try:
        exit_on_user_error(lambda: run_typer(app))
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        sys.argv = saved
    return code, capsys.readouterr().err


def _difficulty(capsys, *argv: str) -> tuple[int, str]:
    from data_prep.difficulty import main

    capsys.readouterr()
    try:
        exit_on_user_error(lambda: main(list(argv)))
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    return code, capsys.readouterr().err


def _error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture
def data(tmp_path) -> Path:
    """Six pairs whose prompts are all different (the tiny task repeats its texts)."""
    pairs = make_pairs(6, seed=11)
    for i, p in enumerate(pairs):
        p.response_a, p.response_b = f"{p.response_a} [{i}a]", f"{p.response_b} [{i}b]"
    path = tmp_path / "pairs.jsonl"
    write_jsonl(path, pairs)
    return path


def _eval(capsys, data: Path, url: str, out: Path, *extra: str) -> tuple[int, str]:
    return _thinkj(capsys, "eval", "run", "synthetic", "--model", "judge", "--backend", "openai", "--data", str(data),
                   "--out", str(out), "--max-new-tokens", "64", *_backend_args(url), *extra)


def _results(out: Path) -> dict:
    return json.loads((out / "synthetic.results.json").read_text())


# ------------------------------------------------------------------------------------------------ the contract


def test_failed_calls_are_failed_values_never_cached_and_asked_again(tmp_path):
    with FaultServer() as server:
        server.mode, server.failing = "500", lambda text: "second" in text
        cache = ResultCache(tmp_path / "c.sqlite")
        backend = CachedBackend(OpenAIChatBackend("judge", server.url, api_key_env=None, **FAST), cache, tag="t")
        convs = [[{"role": "user", "content": "first"}], [{"role": "user", "content": "second"}]]
        out = backend.generate(convs, SamplingParams())
        assert isinstance(out[0][0], str) and isinstance(out[1][0], FailedCall) and "HTTP 500" in out[1][0].error
        assert cache.counts() == {"results": 1, "failures": 1}
        server.mode = "ok"
        again = backend.generate(convs, SamplingParams())
        assert again[0] == out[0] and isinstance(again[1][0], str)
        assert server.requests == {"first": 1, "second": 3}  # two tries that failed, then one that answered
        assert cache.counts() == {"results": 2, "failures": 0}
        with pytest.raises(TypeError):
            cache.put("k", FailedCall("x"))  # type: ignore[arg-type]


def test_the_failure_rule():
    tally = CallTally()
    tally.add([["text", FailedCall("HTTP 500: down")], ["text", "text"]])
    assert (tally.calls, tally.failed, tally.first_error) == (4, 1, "HTTP 500: down")
    assert tally.exceeds(0.0) and tally.exceeds(0.2) and not tally.exceeds(0.25)
    with pytest.raises(StageIncomplete, match=r"1 of 4 generation calls failed after retries \(first error: HTTP 500"):
        tally.check("stage")
    every = CallTally(calls=3, failed=3, first_error="refused")
    with pytest.raises(StageIncomplete, match="every call failed"):
        every.check("stage", 1.0)  # a stage with no answer at all is never done
    CallTally(calls=3, failed=0).check("stage")


# ------------------------------------------------------------------------------------------------ evaluation


@pytest.mark.parametrize("fault", FAULTS)
def test_eval_run_against_a_failing_server_fails_then_matches_a_fresh_run(fault, tmp_path, data, capsys):
    server = FaultServer()
    first = tmp_path / "first"
    if fault == "dead":  # nothing listens on the port yet
        code, err = _eval(capsys, data, server.url, first)
    else:
        with server:
            server.mode = fault
            code, err = _eval(capsys, data, server.url, first)
    assert code == 1 and "12 of 12 generation calls failed after retries" in _error_line(err)
    document = _results(first)
    assert document["complete"] is False and document["metrics"]["complete"] is False
    assert document["metrics"]["n_failed_calls"] == 12
    records = [json.loads(line) for line in (first / "synthetic.judgments.jsonl").read_text().splitlines()]
    assert all(r["failed"] and r["verdict"] is None and r["output"] is None and r["error"] for r in records)
    rescored = _thinkj(capsys, "eval", "score", "synthetic", str(first / "synthetic.judgments.jsonl"))
    assert rescored[0] == 0

    with server:  # the server answers now (the dead one is started on its port)
        server.mode, before = "ok", sum(server.requests.values())
        code, err = _eval(capsys, data, server.url, first)
        assert code == 0, err
        asked_again = sum(server.requests.values()) - before
        code, err = _eval(capsys, data, server.url, tmp_path / "fresh")
        assert code == 0, err
    assert asked_again == 12  # every call failed before, so every call is asked again: none was cached
    resumed, fresh = _results(first), _results(tmp_path / "fresh")
    assert resumed["complete"] is True and resumed["metrics"]["n_failed_calls"] == 0
    assert resumed["metrics"] == fresh["metrics"]
    assert 0 < resumed["metrics"]["accuracy"] < 100


def test_eval_rerun_asks_only_for_the_failed_calls(tmp_path, data, capsys):
    failing = lambda text: _digest(text) % 3 == 0  # noqa: E731
    with FaultServer() as server:
        server.mode, server.failing = "500", failing
        code, err = _eval(capsys, data, server.url, tmp_path / "run")
        failed = [text for text in server.requests if failing(text)]
        assert 0 < len(failed) < 12 and code == 1
        assert f"{len(failed)} of 12 generation calls failed" in _error_line(err)
        metrics = _results(tmp_path / "run")["metrics"]
        assert metrics["n_failed_calls"] == len(failed) and not metrics["complete"]
        assert any("generation calls failed after retries" in m for m in metrics["missing"])
        score = _thinkj(capsys, "eval", "score", "synthetic", str(tmp_path / "run" / "synthetic.judgments.jsonl"))
        assert score[0] == 0
        # allowed by --max-failure-rate: exit 0, still incomplete and saying how many calls failed
        code, err = _eval(capsys, data, server.url, tmp_path / "run", "--max-failure-rate", "0.5")
        assert code == 0 and "incomplete:" in err and f"{len(failed)} of 12 generation calls failed" in err
        assert _results(tmp_path / "run")["complete"] is False

        server.mode, before = "ok", Counter(server.requests)
        assert _eval(capsys, data, server.url, tmp_path / "run")[0] == 0
        assert server.requests - before == Counter(failed)  # exactly the failed calls, once each
        assert _eval(capsys, data, server.url, tmp_path / "fresh")[0] == 0
    assert _results(tmp_path / "run")["metrics"] == _results(tmp_path / "fresh")["metrics"]
    assert _results(tmp_path / "run")["complete"] is True


def test_after_a_whole_batch_failed_the_rest_is_not_sent(tmp_path, data, capsys):
    with FaultServer() as server:
        server.mode = "500"
        code, err = _eval(capsys, data, server.url, tmp_path / "run", "--chunk", "4")  # 8 calls, then 4
        assert code == 1 and "12 of 12 generation calls failed after retries (first error: HTTP 500" in _error_line(err)
        assert len(server.requests) == 8  # the second chunk's prompts never reached the dead server
        records = [json.loads(line) for line in (tmp_path / "run" / "synthetic.judgments.jsonl").read_text().splitlines()]
        assert sum(r["error"].startswith("not sent: all 8 calls of an earlier batch") for r in records) == 4
        server.mode = "ok"
        assert _eval(capsys, data, server.url, tmp_path / "run", "--chunk", "4")[0] == 0
        assert _eval(capsys, data, server.url, tmp_path / "fresh")[0] == 0
    assert _results(tmp_path / "run")["complete"] is True
    assert _results(tmp_path / "run")["metrics"] == _results(tmp_path / "fresh")["metrics"]


def test_eval_score_of_failed_records_is_incomplete(tmp_path, data, capsys):
    with FaultServer() as server:
        server.mode = "garbage"
        assert _eval(capsys, data, server.url, tmp_path / "run")[0] == 1
    from typer.testing import CliRunner

    from thinkj.evaluation.cli import app

    scored = CliRunner().invoke(app, ["score", "synthetic", str(tmp_path / "run" / "synthetic.judgments.jsonl")])
    metrics = json.loads(scored.stdout)
    assert metrics == _results(tmp_path / "run")["metrics"]
    assert metrics["complete"] is False and metrics["n_failed_calls"] == 12


def test_bad_max_failure_rate_is_one_line(tmp_path, data, capsys):
    code, err = _eval(capsys, data, "http://127.0.0.1:9/v1", tmp_path / "run", "--max-failure-rate", "1.5")
    assert code == 2 and "--max-failure-rate must be a share of calls between 0 and 1" in _error_line(err)


def test_rewardbench2_against_a_failing_server_fails_then_matches_a_fresh_run(tmp_path, capsys):
    from test_rewardbench2 import write_rb2_fixture

    data = write_rb2_fixture(tmp_path / "rb2.jsonl")

    def run(url: str, out: Path) -> tuple[int, str]:
        return _thinkj(capsys, "eval", "run", "rewardbench2", "--model", "judge", "--backend", "openai", "--data",
                       str(data), "--template", "rb2_ratings_v1", "--out", str(out), "--max-new-tokens", "64",
                       *_backend_args(url))

    with FaultServer() as server:
        server.mode = "500"
        code, err = run(server.url, tmp_path / "run")
        assert code == 1 and "27 of 27 generation calls failed after retries" in _error_line(err)
        document = json.loads((tmp_path / "run" / "rewardbench2.results.json").read_text())
        assert document["complete"] is False and document["metrics"]["n_failed_calls"] == 27
        server.mode = "ok"
        assert run(server.url, tmp_path / "run")[0] == 0
        assert run(server.url, tmp_path / "fresh")[0] == 0
    resumed, fresh = (json.loads((tmp_path / d / "rewardbench2.results.json").read_text()) for d in ("run", "fresh"))
    assert resumed["metrics"] == fresh["metrics"] and resumed["metrics"]["n_failed_calls"] == 0


# ------------------------------------------------------------------------------------------------ difficulty


def _run_difficulty(capsys, data: Path, url: str, out: Path, *extra: str) -> tuple[int, str]:
    return _difficulty(capsys, "--in", str(data), "--out", str(out), "--model", "judge", "--backend", "openai",
                       "--max-new-tokens", "64", *_backend_args(url), *extra)


@pytest.mark.parametrize("fault", ["dead", "500", "not_chat"])
def test_difficulty_never_keeps_a_pair_because_a_call_failed(fault, tmp_path, data, capsys):
    server = FaultServer()
    out = tmp_path / "kept.jsonl"
    if fault == "dead":
        code, err = _run_difficulty(capsys, data, server.url, out)
    else:
        with server:
            server.mode = fault
            code, err = _run_difficulty(capsys, data, server.url, out)
    assert code == 1 and "18 of 18 generation calls failed after retries" in _error_line(err)
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["n_out"] == 0 and summary["failed_pairs"] == 6 and summary["calls"]["failed_calls"] == 18
    assert not out.read_text().strip()  # no pair kept as "difficult" because its calls failed
    with server:
        server.mode = "ok"
        assert _run_difficulty(capsys, data, server.url, out)[0] == 0
        assert _run_difficulty(capsys, data, server.url, tmp_path / "fresh.jsonl")[0] == 0
    kept = [p.id for p in load_pairs(out)]
    assert kept and kept == [p.id for p in load_pairs(tmp_path / "fresh.jsonl")]


def test_difficulty_leaves_out_pairs_with_failed_calls_when_allowed(tmp_path, data, capsys):
    failing = lambda text: _digest(text) % 2 == 0  # noqa: E731
    with FaultServer() as server:
        server.mode, server.failing = "500", failing
        out = tmp_path / "kept.jsonl"
        code, err = _run_difficulty(capsys, data, server.url, out, "--max-failure-rate", "0.9")
        hit = {text for text in server.requests if failing(text)}
        assert code == 0, err
        summary = json.loads(out.with_suffix(".summary.json").read_text())
        assert summary["failed_pairs"] == len(hit) > 0 and summary["calls"]["failed_calls"] == 3 * len(hit)
        failed_ids = {p.id for p in load_pairs(data) if any(f"{p.response_a}\n" in t for t in hit)}
        assert len(failed_ids) == len(hit) and set(summary["failures_per_pair"]) == \
            {p.id for p in load_pairs(data)} - failed_ids  # a pair with a failed call is never judged, never kept
        assert {p.id for p in load_pairs(out)}.isdisjoint(failed_ids)


def test_difficulty_default_budget_on_a_short_context_fails_in_one_line(tmp_path, data, capsys, tiny_model_dir):
    # the tiny model's context is 4,096 tokens, the main model profile's budget 4,096 new tokens: no prompt fits
    out = tmp_path / "kept.jsonl"
    code, err = _difficulty(capsys, "--in", str(data), "--out", str(out), "--model", str(tiny_model_dir))
    line = _error_line(err)
    assert code == 2 and "every one of the 6 pairs is too long for the model's context (4096 tokens)" in line
    assert "lower --max-new-tokens" in line and not out.exists()
    # a budget that leaves room, but not enough for any prompt: nothing is generated, nothing kept, exit 1
    code, err = _difficulty(capsys, "--in", str(data), "--out", str(out), "--model", str(tiny_model_dir),
                            "--max-new-tokens", "4090")
    line = _error_line(err)
    assert code == 1 and "kept no pair of 6: every pair was too long for the model's context (4096 tokens)" in line
    assert json.loads(out.with_suffix(".summary.json").read_text())["too_long_skipped"] == 6


def test_difficulty_on_ties_only_fails_in_one_line(tmp_path, capsys):
    pairs = make_pairs(3, seed=2)
    for p in pairs:
        p.label, p.strength = "tie", None
    path = tmp_path / "ties.jsonl"
    write_jsonl(path, pairs)
    code, err = _difficulty(capsys, "--in", str(path), "--out", str(tmp_path / "kept.jsonl"), "--model", "judge",
                            "--backend", "openai", *_backend_args("http://127.0.0.1:9/v1"))
    assert code == 2 and "every one of its 3 pairs is a tie" in _error_line(err)


# ------------------------------------------------------------------------------------------------ offline pairs


def _train(capsys, command: str, data: Path, url: str, out: Path) -> tuple[int, str]:
    models = ["--judge", "judge", "--critic", "judge"] if command == "critic-pairs" else ["--judge", "judge", "-n", "2"]
    args = []
    for key, value in {"base_url": url, **FAST}.items():
        args += ["--backend-arg", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return _thinkj(capsys, "train", command, "--pairs", str(data), *models, "--out", str(out), "--backend", "openai",
                   "--max-new-tokens", "64", *args)


@pytest.mark.parametrize("command", ["critic-pairs", "sampling-pairs"])
@pytest.mark.parametrize("fault", ["dead", "500", "garbage"])
def test_offline_pairs_with_a_failing_server_exit_non_zero(command, fault, tmp_path, data, capsys):
    server = FaultServer()
    out = tmp_path / "pairs"
    if fault == "dead":
        code, err = _train(capsys, command, data, server.url, out)
    else:
        with server:
            server.mode = fault
            code, err = _train(capsys, command, data, server.url, out)
    assert code == 1 and "generation calls failed after retries" in _error_line(err)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pairs"] == 0 and summary["calls"]["failed_calls"] == summary["calls"]["calls"] > 0
    failed_views = sum(v for k, v in summary["counts"].items() if k.startswith("dropped: judge call failed"))
    assert failed_views == 6
    with server:
        server.mode = "ok"
        code, err = _train(capsys, command, data, server.url, out)
        assert code == 0, err
        assert _train(capsys, command, data, server.url, tmp_path / "fresh")[0] == 0
    resumed = json.loads((out / "summary.json").read_text())
    fresh = json.loads((tmp_path / "fresh" / "summary.json").read_text())
    assert resumed["counts"] == fresh["counts"] and resumed["pairs"] == fresh["pairs"]
    assert resumed["calls"]["failed_calls"] == 0


def test_baseline_rejection_sampling_with_a_failing_server_exits_non_zero(tmp_path, data, capsys):
    with FaultServer() as server:
        server.mode = "500"
        args = []
        for key, value in {"base_url": server.url, **FAST}.items():
            args += ["--backend-arg", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        code, err = _thinkj(capsys, "train", "baseline-data", "--pairs", str(data), "--out", str(tmp_path / "b"),
                            "--rs-model", "judge", "-n", "2", "--backend", "openai", "--max-new-tokens", "64", *args)
    assert code == 1 and "12 of 12 generation calls failed after retries" in _error_line(err)
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["rejection_sampling"]["items with a failed call"] == 6 and summary["thinkj_rs_sft"] == 0


@pytest.mark.parametrize("mode", ["500", "mute"])
def test_offline_iterations_stop_before_dpo_when_no_pair_is_kept(mode, tmp_path, data, capsys, monkeypatch):
    """Failed calls, or answers from which no pair can be built: the stage fails in one line and DPO never runs."""
    from thinkj.offline import iterate

    trained = []
    monkeypatch.setattr(iterate, "run_stage", lambda *a, **kw: trained.append(a))
    with FaultServer() as server:
        server.mode = mode
        args = []
        for key, value in {"base_url": server.url, **FAST}.items():
            args += ["--backend-arg", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        code, err = _thinkj(capsys, "train", "offline", "--pairs", str(data), "--judge", "judge", "--critic", "judge",
                            "--model", "tiny", "--run-dir", str(tmp_path / "run"), "--backend", "openai", *args)
    expected = "6 of 6 generation calls failed" if mode == "500" else "iteration 1: no DPO pairs were kept"
    assert code == 1 and expected in _error_line(err) and trained == []
