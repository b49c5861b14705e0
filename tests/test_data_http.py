"""The OpenAI-compatible client against the scripted teacher on 127.0.0.1: faults, resume after kill, key secrecy."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thinkj.errors import ThinkJError
from thinkj.inference import SamplingParams, make_backend
from thinkj.inference.cache import ResultCache, cache_key
from thinkj.inference.http_client import OpenAIChatBackend, _retry_after, served_identity, split_reasoning
from thinkj.prompts import get_template
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs
from thinkj.synthetic.scripted_teacher import TeacherConfig, TeacherServer, prompt_key
from thinkj.verdict_parser import parse_verdict

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = "judge_strength_v2"
SECRET = "sk-test-4f9a1c0ffee-do-not-leak"
ALL_FAULTS = {"timeout": 0.08, "429": 0.1, "500": 0.1, "malformed": 0.1, "drop": 0.1}


def _convs(n: int, seed: int = 0):
    pairs = make_pairs(n, seed)
    return pairs, [get_template(TEMPLATE).render(p) for p in pairs]


def _stored(cache_path: Path) -> tuple[set[str], set[str]]:
    db = sqlite3.connect(cache_path)
    try:
        done = {k for (k,) in db.execute("SELECT key FROM results")}
        failed = {k for (k,) in db.execute("SELECT key FROM failures")}
    except sqlite3.OperationalError:  # polled while the stage is still creating the tables
        return set(), set()
    finally:
        db.close()
    return done, failed


def test_split_reasoning_forms():
    assert split_reasoning({"content": "answer", "reasoning_content": " long "}) == ("long", "answer")
    assert split_reasoning({"content": "x", "reasoning": "vllm style"}) == ("vllm style", "x")
    assert split_reasoning({"content": "<think>\nhmm\n</think>\n\nfinal"}) == ("hmm", "final")
    assert split_reasoning({"content": "opened in the prompt</think>final"}) == ("opened in the prompt", "final")
    assert split_reasoning({"content": "no thinking at all"}) == ("", "no thinking at all")
    assert split_reasoning({"content": None}) == ("", "")
    assert _retry_after("2") == 2.0 and _retry_after(None) is None and _retry_after("garbage") is None


def test_every_item_ends_stored_or_failed_under_faults(tmp_path):
    pairs, convs = _convs(40)
    config = TeacherConfig(faults=ALL_FAULTS, poison_rate=0.1, fault_seed=3, timeout_sleep=1.0, inline_think=True)
    cache = ResultCache(tmp_path / "cache.sqlite")
    params = SamplingParams(max_new_tokens=64)
    with TeacherServer(config) as server:
        backend = make_backend("openai", "r1-scripted", base_url=server.base_url, api_key_env=None, cache=cache,
                               tag=TEMPLATE, timeout=0.4, max_retries=5, backoff=0.01, max_backoff=0.05, progress=False)
        results = backend.chat_many(convs, params)
        counts = server.counts()
    assert set(counts["faults"]) >= {"timeout", "429", "500", "malformed", "drop", "poison"}, counts["faults"]
    keys = [cache_key(served_identity("r1-scripted", server.base_url), TEMPLATE, c, params, 0) for c in convs]
    done, failed = _stored(tmp_path / "cache.sqlite")
    assert done.isdisjoint(failed) and done | failed == set(keys) and len(done) + len(failed) == len(convs)
    poisoned = [i for i, c in enumerate(convs) if counts["answered"].get(prompt_key(c), 0) == 0]
    assert poisoned and {keys[i] for i in poisoned} == failed  # only prompts that never got an answer failed
    for i, row in enumerate(results):
        result = row[0]
        assert result.ok == (keys[i] in done)
        if result.ok:  # inline <think> was split off; the answer holds a parsable verdict
            assert result.reasoning.startswith("Okay") and "<think>" not in result.content
            assert parse_verdict(result.full_text(), strict=False).choice in ("a", "b")
        else:
            assert result.error.startswith(("HTTP", "timeout", "malformed", "Client", "Server")) and result.attempts == 6
    assert any("poisoned prompt" in row[0].error for row in results if not row[0].ok)
    # A rerun asks only for the recorded failures (and they are retried, not skipped).
    before = dict(counts["requests"])
    with TeacherServer(config, port=server.port) as server:  # the same endpoint: the cache keys on it
        rerun = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, cache=cache, tag=TEMPLATE, timeout=0.4,
                                  max_retries=1, backoff=0.01, progress=False)
        rerun.generate(convs, params)
        again = server.counts()["requests"]
    assert set(again) == {prompt_key(convs[i]) for i in poisoned}
    assert rerun.stats["cached"] == len(done) and before
    cache.close()


def test_retry_after_is_honoured_and_4xx_fails_at_once(tmp_path):
    _, convs = _convs(6, seed=1)
    with TeacherServer(TeacherConfig(faults={"429": 1.0}, retry_after=0.3)) as server:
        backend = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, max_retries=1, backoff=0.001,
                                    progress=False)
        start = time.monotonic()
        results = backend.chat_many(convs[:1], SamplingParams())
        assert time.monotonic() - start >= 0.3  # waited for Retry-After, not the 1 ms back-off
        assert not results[0][0].ok and "429" in results[0][0].error
        # A 404 (wrong path) is not retried: one attempt, recorded as a failure.
        cache = ResultCache(tmp_path / "c.sqlite")
        wrong = OpenAIChatBackend("r1-scripted", server.base_url.replace("/v1", "/nope"), api_key_env=None, cache=cache,
                                  max_retries=5, progress=False)
        failed = wrong.chat_many(convs[:2], SamplingParams())
    assert [r[0].attempts for r in failed] == [1, 1] and cache.counts() == {"results": 0, "failures": 2}


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_server_that_is_down_costs_a_few_calls_then_a_rerun_asks_for_the_rest(tmp_path):
    """Nothing listens on the port: after give_up_after calls in a row found no server, the calls left are recorded
    as failed without a request; a rerun, once a server answers there, asks for every one of them."""
    _, convs = _convs(40, seed=2)
    port, params = _free_port(), SamplingParams(max_new_tokens=64)
    url = f"http://127.0.0.1:{port}/v1"
    cache = ResultCache(tmp_path / "cache.sqlite")
    down = OpenAIChatBackend("r1-scripted", url, api_key_env=None, cache=cache, tag=TEMPLATE, max_concurrency=2,
                             max_retries=1, backoff=0.01, max_backoff=0.02, progress=False, give_up_after=4)
    results = [row[0] for row in down.chat_many(convs, params)]
    assert not any(r.ok for r in results)
    sent = [r for r in results if r.attempts]
    assert 4 <= len(sent) <= 5 and down.stats["requests"] == sum(r.attempts for r in sent)
    assert sorted(r.attempts for r in sent)[-4:] == [2] * 4  # a 5th, in flight at the 4th, stops at once
    assert all(re.match(r"not sent: the [45] calls before it found no server after their retries", r.error)
               for r in results if not r.attempts)
    distinct = len({json.dumps(c) for c in convs})  # the cache keys on the conversation: repeats share a row
    assert down.stats["not_sent"] == 40 - len(sent) and cache.counts() == {"results": 0, "failures": distinct}
    with TeacherServer(TeacherConfig(), port=port) as server:
        rerun = OpenAIChatBackend("r1-scripted", url, api_key_env=None, cache=cache, tag=TEMPLATE, progress=False,
                                  give_up_after=4)
        assert all(row[0].ok for row in rerun.chat_many(convs, params))
        assert sum(server.counts()["requests"].values()) == 40
    with pytest.raises(ThinkJError, match="give_up_after must be >= 0, got -1"):  # not "off" in disguise
        OpenAIChatBackend("r1-scripted", url, api_key_env=None, give_up_after=-1)
    # give_up_after=0: every call is sent, whatever failed before it
    every = OpenAIChatBackend("r1-scripted", url, api_key_env=None, max_concurrency=2, max_retries=0, progress=False,
                              give_up_after=0)
    assert not any(row[0].ok for row in every.chat_many(convs[:10], params)) and every.stats["requests"] == 10
    cache.close()


def test_calls_in_flight_stop_retrying_once_the_batch_has_given_up():
    """Nothing listens. Four calls exhaust their four attempts; the calls that started as the first ones finished
    are still backing off when the fourth fails, and stop there instead of spending the rest of their retries on a
    server the batch has judged absent."""
    import random

    random.seed(0)
    url = f"http://127.0.0.1:{_free_port()}/v1"
    _, convs = _convs(12, seed=8)
    down = OpenAIChatBackend("r1-scripted", url, api_key_env=None, max_concurrency=4, max_retries=3, backoff=0.2,
                             max_backoff=5, progress=False, give_up_after=4)
    results = [row[0] for row in down.chat_many(convs, SamplingParams(max_new_tokens=64))]
    attempts = sorted(r.attempts for r in results)
    stopped = [a for a in attempts if 0 < a < 4]  # sent, then stopped short of their retries
    assert attempts.count(4) == 4 and stopped and len(stopped) + 4 + attempts.count(0) == 12, attempts
    assert down.stats["requests"] == sum(attempts) and down.stats["not_sent"] == attempts.count(0)


def test_calls_without_a_server_apart_never_add_up_to_giving_up():
    """One call at a time against prompts of which about 30 % always have their connection dropped (no response):
    more than give_up_after find no server in all, never give_up_after in a row, so every call is sent (an answer
    resets the count)."""
    _, convs = _convs(40, seed=4)
    with pytest.raises(ThinkJError, match="poison_fault must be '500' or 'drop', got '404'"):
        TeacherConfig(poison_fault="404")
    with TeacherServer(TeacherConfig(poison_rate=0.3, poison_fault="drop", fault_seed=5)) as server:
        backend = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, max_concurrency=1, max_retries=0,
                                    progress=False, give_up_after=6)
        results = [row[0] for row in backend.chat_many(convs, SamplingParams(max_new_tokens=64))]
    assert backend.stats["not_sent"] == 0 and all(r.attempts == 1 for r in results)
    failed = [not r.ok for r in results]
    longest = max(len(run) for run in "".join("x" if f else "." for f in failed).split("."))
    assert sum(failed) > 6 > longest  # the set-up this test needs: failures many, but apart
    assert all(r.unreachable for r in results if not r.ok)


def test_prompts_the_server_refuses_never_stop_the_others():
    """A server that answers 500 to every prompt is up: however many fail in a row, each call is sent (a stop here
    would leave a rerun stuck behind the same refused prompts)."""
    _, convs = _convs(12, seed=5)
    with TeacherServer(TeacherConfig(poison_rate=1.0)) as server:
        backend = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, max_concurrency=2, max_retries=0,
                                    progress=False, give_up_after=2)
        results = [row[0] for row in backend.chat_many(convs, SamplingParams(max_new_tokens=64))]
        assert sum(server.counts()["requests"].values()) == 12
    assert all(not r.ok and "poisoned prompt" in r.error and not r.unreachable for r in results)
    assert backend.stats["not_sent"] == 0


def test_a_server_slower_than_the_timeout_is_there_so_every_call_is_sent():
    """A call the server took but did not finish within ``timeout`` (a long generation) found a server: however many
    time out in a row, each is sent, and a rerun with a longer timeout gets all the answers."""
    _, convs = _convs(8, seed=6)
    params = SamplingParams(max_new_tokens=64)
    with TeacherServer(TeacherConfig(delay=1.0)) as server:
        slow = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, max_concurrency=2, max_retries=0,
                                 timeout=0.2, progress=False, give_up_after=2)
        results = [row[0] for row in slow.chat_many(convs, params)]
        assert sum(server.counts()["requests"].values()) == 8
        assert all(r.error == "timeout: no complete answer within 0.2 s" and not r.unreachable for r in results)
        assert slow.stats["not_sent"] == 0
        patient = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, max_concurrency=8,
                                    progress=False, give_up_after=2)
        assert all(row[0].ok for row in patient.chat_many(convs, params))


def test_a_host_that_takes_no_connection_is_given_up_on_at_the_connect_timeout():
    """A listener whose backlog is full drops new connects (as a firewalled or overloaded host does): each attempt
    ends at ``connect_timeout``, not at the whole call's ``timeout``, and counts as finding no server."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    held = []
    for _ in range(4):  # fill the accept queue; nothing ever accepts
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        held.append(filler)
    time.sleep(0.1)
    try:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            try:
                probe.connect(("127.0.0.1", port))
                pytest.skip("this kernel completes connects to a full listen backlog; the test needs them dropped")
            except TimeoutError:
                pass
        _, convs = _convs(12, seed=7)
        backend = OpenAIChatBackend("r1-scripted", f"http://127.0.0.1:{port}/v1", api_key_env=None, max_concurrency=2,
                                    max_retries=0, timeout=30, connect_timeout=0.3, progress=False, give_up_after=3)
        results = [row[0] for row in backend.chat_many(convs, SamplingParams(max_new_tokens=64))]
    finally:
        for sock in (*held, listener):
            sock.close()
    sent = [r for r in results if r.attempts]
    assert all(r.error == "no connection within 0.3 s" and r.unreachable for r in sent)
    assert 3 <= len(sent) <= 4 and backend.stats["not_sent"] == 12 - len(sent)


def test_generate_inside_a_running_loop_and_n_samples():
    _, convs = _convs(3, seed=2)

    async def inside() -> list[list[str]]:
        with TeacherServer(TeacherConfig()) as server:
            backend = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, progress=False)
            return backend.generate(convs, SamplingParams(temperature=0.7, n=2))

    texts = asyncio.run(inside())
    assert [len(row) for row in texts] == [2, 2, 2]
    assert all(t.startswith("<think>\n") and "</think>\n" in t for row in texts for t in row)


_STAGE = """
import sys
from thinkj.data.traces import run_traces
from thinkj.errors import exit_on_user_error
exit_on_user_error(lambda: run_traces(sys.argv[1], sys.argv[2], model="r1-scripted", base_url=sys.argv[3],
                   api_key_env="THINKJ_TEST_KEY", max_concurrency=2, max_retries=4, timeout=5.0, backoff=0.01,
                   max_backoff=0.05))
print("traces stage finished")
"""


def test_killed_stage_resumes_without_repeating_calls_and_never_leaks_the_key(tmp_path, caplog):
    pairs = make_pairs(40, 5)
    write_jsonl(tmp_path / "pairs.jsonl", pairs)
    out, cache_path = tmp_path / "traces" / "traces.jsonl", tmp_path / "traces" / "traces.cache.sqlite"
    env = {**os.environ, "THINKJ_TEST_KEY": SECRET, "PYTHONPATH": str(ROOT)}
    config = TeacherConfig(faults={"429": 0.1, "500": 0.05, "malformed": 0.05, "drop": 0.05}, poison_rate=0.08,
                           delay=0.1, fault_seed=1, api_key_env="THINKJ_TEST_KEY")
    os.environ["THINKJ_TEST_KEY"] = SECRET  # the server checks the header against it: the client really sends the key
    try:
        with TeacherServer(config) as server:
            proc = subprocess.Popen([sys.executable, "-c", _STAGE, str(tmp_path / "pairs.jsonl"), str(out), server.base_url],
                                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if cache_path.exists() and len(_stored(cache_path)[0]) >= 8:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            first_out, first_err = proc.communicate(timeout=30)
            assert "traces stage finished" not in first_out, "the stage finished before it could be killed"
            done_before, _ = _stored(cache_path)
            first = server.counts()
            proc = subprocess.run([sys.executable, "-c", _STAGE, str(tmp_path / "pairs.jsonl"), str(out), server.base_url],
                                  env=env, capture_output=True, text=True, timeout=120)
            # the poisoned prompts failed: written what succeeded, exit 1, one line
            assert proc.returncode == 1 and "teacher calls failed" in proc.stderr, proc.stderr[-2000:]
            total = server.counts()
    finally:
        os.environ.pop("THINKJ_TEST_KEY", None)
    params = SamplingParams(temperature=0.0, max_new_tokens=8192)
    convs = [get_template(TEMPLATE).render(p) for p in pairs]
    keys = [cache_key(served_identity("r1-scripted", server.base_url), TEMPLATE, c, params, 0) for c in convs]
    done, failed = _stored(cache_path)
    assert 8 <= len(done_before) < len(pairs)
    assert done_before <= done  # nothing stored before the kill was lost
    assert done.isdisjoint(failed) and done | failed == set(keys)
    assert failed and all(total["answered"].get(prompt_key(convs[keys.index(k)]), 0) == 0 for k in failed)
    for conv, key in zip(convs, keys):
        pk = prompt_key(conv)
        if key in done_before:  # finished before the kill: the rerun never asked again
            assert total["requests"].get(pk, 0) == first["requests"].get(pk, 0)
        if key in done:
            assert total["answered"].get(pk, 0) >= 1
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    assert summary["n_in"] == 40 and summary["failed_calls"] == len(failed) and summary["calls"]["cached"] == len(done_before)
    # The key never shows up in what the stage printed, logged or wrote.
    for text in (first_out, first_err, proc.stdout, proc.stderr, caplog.text):
        assert SECRET not in text
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    os.environ["THINKJ_TEST_KEY"] = SECRET
    try:
        backend = OpenAIChatBackend("m", "http://127.0.0.1:9/v1", api_key_env="THINKJ_TEST_KEY", max_retries=0, timeout=1,
                                    progress=False)
        failure = backend.chat_many(convs[:1], SamplingParams())[0][0]
    finally:
        os.environ.pop("THINKJ_TEST_KEY", None)
    assert SECRET not in repr(backend) and SECRET not in (failure.error or "") and not failure.ok


@pytest.mark.parametrize("inline", [False, True])
def test_scripted_teacher_is_right_mostly_and_wrong_sometimes(inline):
    pairs, convs = _convs(60, seed=7)
    with TeacherServer(TeacherConfig(error_rate=0.2, empty_explanation_rate=0.2, inline_think=inline)) as server:
        results = OpenAIChatBackend("r1-scripted", server.base_url, api_key_env=None, progress=False).chat_many(
            convs, SamplingParams())
    verdicts = [parse_verdict(r[0].full_text(), strict=False) for r in results]
    right = sum(v.choice == p.label for v, p in zip(verdicts, pairs))
    assert 36 <= right <= 56  # ~80 % right with error_rate 0.2
    empty = sum(r[0].content.startswith("Therefore") for r in results)
    assert 4 <= empty <= 24
    assert all(len(r[0].reasoning.split()) > 100 for r in results)  # R1-shaped: the reasoning is long
