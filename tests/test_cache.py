from __future__ import annotations

from thinkj.inference import SamplingParams
from thinkj.inference.cache import CachedBackend, ResultCache, cache_key
from thinkj.inference.failures import FailedCall


class CountingBackend:
    """A real (deterministic) backend for testing the cache's bookkeeping: echoes a counter per call."""

    name = "counter"

    def __init__(self):
        self.calls = 0

    def generate(self, conversations, params):
        self.calls += len(conversations)
        return [[f"{c[-1]['content']}#{k}" for k in range(params.n)] for c in conversations]


def test_resume_generates_only_missing(tmp_path):
    convs = [[{"role": "user", "content": f"q{i}"}] for i in range(5)]
    inner = CountingBackend()
    cache = ResultCache(tmp_path / "c.sqlite")
    backend = CachedBackend(inner, cache, tag="t")
    first = backend.generate(convs[:3], SamplingParams(n=2))
    assert inner.calls == 3
    cache.close()
    backend = CachedBackend(inner, ResultCache(tmp_path / "c.sqlite"), tag="t")  # a rerun after a crash
    again = backend.generate(convs, SamplingParams(n=2))
    assert inner.calls == 5 and again[:3] == first and backend.hits == 6
    backend.generate(convs, SamplingParams(n=3))  # one more sample each
    assert inner.calls == 10 and backend.misses == 4 + 5


def test_key_depends_on_everything_but_n():
    m = [{"role": "user", "content": "x"}]
    base = cache_key("m", "t", m, SamplingParams(n=1), 0)
    assert base == cache_key("m", "t", m, SamplingParams(n=8), 0)
    assert base != cache_key("m", "t", m, SamplingParams(temperature=1.0), 0)
    assert base != cache_key("m", "t2", m, SamplingParams(), 0)
    assert base != cache_key("m", "t", m, SamplingParams(), 1)


def test_failures_are_recorded_and_cleared(tmp_path):
    cache = ResultCache(tmp_path / "c.sqlite")
    cache.put_failure("k", "HTTP 500", 5)
    assert cache.failure("k") == "HTTP 500" and cache.counts() == {"results": 0, "failures": 1}
    cache.put("k", "ok", {"reasoning": "r"})
    assert cache.failure("k") is None and cache.get("k") == "ok" and cache.get_extra("k") == {"reasoning": "r"}


class FailingRecorder(CountingBackend):
    """Like the HTTP client: records its own results and failures in the cache it is given."""

    name = "recorder"
    cache = None
    tag = ""

    def generate(self, conversations, params):
        out = super().generate(conversations, params)
        for conv, samples in zip(conversations, out):
            for k, text in enumerate(samples):
                key = cache_key(self.name, self.tag, conv, params, k)
                if "bad" in conv[-1]["content"]:
                    self.cache.put_failure(key, "HTTP 500 after 3 attempts", 3)
                    samples[k] = ""
                else:
                    self.cache.put(key, text)
        return out


def test_backend_recorded_failures_are_not_stored_as_answers(tmp_path):
    inner = FailingRecorder()
    cache = ResultCache(tmp_path / "c.sqlite")
    backend = CachedBackend(inner, cache, tag="t")
    assert inner.cache is cache and inner.tag == "t"
    out = backend.generate([[{"role": "user", "content": "good"}], [{"role": "user", "content": "bad"}]], SamplingParams())
    # the failure it recorded comes back as a FailedCall, never as the empty stand-in text it returned
    assert out == [["good#0"], [FailedCall("HTTP 500 after 3 attempts")]] and backend.failures == 1
    assert cache.counts() == {"results": 1, "failures": 1}
    backend.generate([[{"role": "user", "content": "bad"}]], SamplingParams())
    assert inner.calls == 3  # the failed call is retried on the next run, the finished one is not
