"""Inference on every GPU of a node (issue 38, fault 8): workers over contiguous shards, each on its own GPUs, merged
in the input order, resumable (thinkj.inference.data_parallel).

The end-to-end test runs the difficulty filter with the hf backend and the tiny model in 2 worker processes with
2 "devices" (``CUDA_VISIBLE_DEVICES=0,1``; on the CPU the workers just run): one worker is made to fail, then a
rerun resumes, generating only the failed worker's shard. Before the change there was no ``--data-parallel``
(the entry point refused the option), so every test here fails on the old code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from thinkj.errors import ThinkJError
from thinkj.inference.data_parallel import device_groups, shard_bounds
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs


@pytest.mark.parametrize("n,count", [(80_000, 8), (10, 3), (2, 2), (7, 1), (0, 2)])
def test_shards_are_contiguous_near_equal_and_cover_every_item(n, count):
    bounds = [shard_bounds(n, i, count) for i in range(count)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # in order, no gap, no overlap
    sizes = [end - start for start, end in bounds]
    assert max(sizes) - min(sizes) <= 1  # 80k pairs on 8 GPUs: 10k each, an eighth of the work per worker


def test_each_worker_gets_its_own_tensor_parallel_group_of_gpus():
    eight = [str(i) for i in range(8)]
    assert device_groups(8, 1, eight) == eight
    assert device_groups(2, 4, eight) == ["0,1,2,3", "4,5,6,7"]  # 32B: TP 4 x 2 workers
    assert device_groups(2, 1, ["3", "5"]) == ["3", "5"]  # the GPUs CUDA_VISIBLE_DEVICES lists, as listed
    with pytest.raises(ThinkJError, match=r"--data-parallel 3 x tensor_parallel_size 4 needs 12 GPUs and 8 are "
                                          r"visible \(0,1,2,3,4,5,6,7\): lower --data-parallel"):
        device_groups(3, 4, eight)


def _difficulty(src, out, model, *extra):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1"}
    return subprocess.run([sys.executable, "-m", "data_prep.difficulty", "--in", str(src), "--out", str(out),
                           "--model", str(model), "--backend", "hf", "--k", "2", "--max-new-tokens", "8",
                           "--data-parallel", "2", *extra], capture_output=True, text=True, timeout=600, env=env)


def test_difficulty_on_two_devices_merges_in_order_and_resumes_a_failed_shard(tmp_path, tiny_model_dir):
    src, out = tmp_path / "pairs.jsonl", tmp_path / "kept.jsonl"
    pairs = make_pairs(6, seed=3)
    write_jsonl(src, pairs)
    cache = out.with_suffix(".cache.sqlite")
    blocked = cache.with_name("kept.cache.shard1of2.sqlite-wal")
    blocked.mkdir(parents=True)  # worker 2's own cache cannot be written: that worker fails, worker 1 finishes
    first = _difficulty(src, out, tiny_model_dir)
    assert first.returncode == 1, first.stderr[-3000:]
    log = cache.with_name("kept.cache.shard1of2.log")
    assert "shard 2/2 exited 2" in first.stderr and f"its log: {log}" in first.stderr
    assert "rerun the same command to resume" in first.stderr and not out.exists()
    done = (cache.with_name("kept.cache.shard0of2.log")).read_text()
    assert "CUDA_VISIBLE_DEVICES=0" in done and "shard 1/2: pairs 0-2, 0 cached and 6 generated" in done
    blocked.rmdir()

    again = _difficulty(src, out, tiny_model_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    logs = [cache.with_name(f"kept.cache.shard{i}of2.log").read_text() for i in range(2)]
    # the finished shard was merged first and is read back, not generated again; the failed one is generated
    assert "CUDA_VISIBLE_DEVICES=0\n" in logs[0] and "shard 1/2: pairs 0-2, 6 cached and 0 generated" in logs[0]
    assert "CUDA_VISIBLE_DEVICES=1\n" in logs[1] and "shard 2/2: pairs 3-5, 0 cached and 6 generated" in logs[1]
    assert not list(tmp_path.glob("*.shard*.sqlite*"))  # merged into the stage's cache and removed
    summary = json.loads(out.with_suffix(".summary.json").read_text())
    # the merge pass read every sample from the cache (no model loaded) and wrote the outputs in input order
    assert summary["n_in"] == 6 and summary["cache"] == {"hits": 12, "generated": 0}
    judgments = [json.loads(line) for line in open(out.with_suffix(".judgments.jsonl"))]
    assert [(j["item_id"], j["sample"]) for j in judgments] == [(p.id, k) for p in pairs for k in range(2)]
    assert all(isinstance(j["output"], str) for j in judgments)


def test_the_pipeline_runs_its_inference_stages_on_every_gpu_of_the_node(tmp_path):
    from thinkj.pipeline.plan import plan
    from thinkj.pipeline.settings import env_settings

    def workers(**env):
        stages = plan(env_settings({"RUN_DIR": str(tmp_path), **env}))
        return {st.name: st.argv[st.argv.index("--data-parallel") + 1] for st in stages if "--data-parallel" in st.argv}

    assert workers() == {"difficulty": "8", "eval_rewardbench": "8", "eval_rmbench": "8", "eval_autoj": "8"}
    assert workers(TP="4")["difficulty"] == "2"  # 32B: 2 workers of TP 4 on 8 GPUs
    # a benchmark with a runner of its own runs in one process; one CPU "GPU" runs everything in one process
    assert "eval_rewardbench2" not in workers(BENCHMARKS="rewardbench rewardbench2")
    assert workers(DEVICE="cpu", GPUS_PER_NODE="1", JUDGE_BACKEND="hf") == {}


def test_eval_on_two_devices_writes_records_in_the_one_process_order(tmp_path, tiny_model_dir, monkeypatch):
    from typer.testing import CliRunner

    from thinkj.evaluation.cli import app

    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, make_pairs(5, seed=4))
    common = ["run", "synthetic", "--model", str(tiny_model_dir), "--backend", "hf", "--data", str(data),
              "--max-new-tokens", "8"]
    one = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "one")])
    assert one.exit_code == 0, (one.output, one.exception)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    two = CliRunner().invoke(app, [*common, "--out", str(tmp_path / "two"), "--data-parallel", "2"])
    assert two.exit_code == 0, (two.output, two.exception)
    logs = [(tmp_path / "two" / f"cache.shard{i}of2.log").read_text() for i in range(2)]
    assert "CUDA_VISIBLE_DEVICES=0\n" in logs[0] and "shard 1/2: pairs 0-2, 6 judgments" in logs[0]
    assert "CUDA_VISIBLE_DEVICES=1\n" in logs[1] and "shard 2/2: pairs 3-4, 4 judgments" in logs[1]
    assert not list((tmp_path / "two").glob("cache.shard*.sqlite*"))

    def order(folder):
        return [(r["item_id"], r["order"]) for r in map(json.loads, open(tmp_path / folder / "synthetic.judgments.jsonl"))]

    assert order("two") == order("one") and len(order("two")) == 10
    # a benchmark with a runner of its own, or a server, is refused in one line instead of run unsharded
    refused = CliRunner().invoke(app, ["run", "rewardbench2", "--model", str(tiny_model_dir), "--data-parallel", "2",
                                       "--out", str(tmp_path / "rb2")])
    assert refused.exit_code != 0 and "has a runner of its own" in str(refused.exception or refused.output)
