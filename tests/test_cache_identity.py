"""The generation cache is keyed on the model, not its path: a model retrained into the same folder is judged again.

Both consumers of the cache are checked end to end with the real HF backend on the tiny model: ``thinkj eval run``
and the difficulty filter. On the old code (key = path) the second run after the rebuild was served entirely from
the cache (0 generated) and reported the old model's judgments.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from test_evaluation_run import write_rewardbench_fixture
from typer.testing import CliRunner

from thinkj.data.difficulty import run_difficulty
from thinkj.errors import ThinkJError
from thinkj.evaluation.cli import app
from thinkj.inference.cache import ResultCache
from thinkj.inference.identity import check_model_source, model_identity
from thinkj.models.tiny import build_tiny_model
from thinkj.records import write_jsonl
from thinkj.synthetic.fruit_task import make_pairs


def _retrain(path):
    time.sleep(0.01)  # distinct mtimes even on coarse clocks
    build_tiny_model(path, seed=1)


def test_model_identity_follows_the_files(tmp_path):
    model = build_tiny_model(tmp_path / "m", seed=0)
    first = model_identity(str(model))
    assert first == model_identity(str(model)) and first.startswith(f"{model}#dir:")
    _retrain(model)
    assert model_identity(str(model)) != first
    gguf = tmp_path / "w.gguf"
    gguf.write_bytes(b"x")
    one = model_identity(str(gguf))
    gguf.write_bytes(b"xy")
    assert model_identity(str(gguf)) != one
    assert model_identity("org/name").startswith("org/name@")  # hub: name + revision
    assert model_identity("org/name", "v2") != model_identity("org/name", "v1")


def _weights(model: Path) -> Path:
    return next(model.glob("*.safetensors"))


def test_weights_copied_over_with_their_times_are_another_model(tmp_path):
    """``cp -p`` of other weights over a model keeps size, mtime and even the inode; only the bytes tell."""
    model, other = build_tiny_model(tmp_path / "m", seed=0), build_tiny_model(tmp_path / "other", seed=1)
    first = model_identity(str(model))
    target, source = _weights(model), _weights(other)
    before = target.stat()
    assert source.stat().st_size == before.st_size and source.read_bytes() != target.read_bytes()
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))
    shutil.copy2(source, target)  # what `cp -p` does: write into the file, then restore the source's times
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert model_identity(str(model)) != first


def test_an_identical_copy_keeps_the_identity(tmp_path):
    model = build_tiny_model(tmp_path / "m", seed=0)
    first = model_identity(str(model))
    weights = _weights(model)
    copy = weights.with_name("copy.tmp")
    shutil.copy2(weights, copy)
    os.replace(copy, weights)  # same bytes under a new inode and ctime: hashed again, same answer
    assert model_identity(str(model)) == first
    time.sleep(0.01)
    weights.touch()  # a new mtime alone is not a new model (the cache keeps its answers)
    assert model_identity(str(model)) == first


def test_remembered_hashes_follow_the_file(tmp_path, monkeypatch):
    """Big files are hashed once and remembered on disk; a same-size rewrite with the old mtime is hashed again."""
    from thinkj import fingerprint

    monkeypatch.setenv("THINKJ_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fingerprint, "RACY_NS", 0)  # remember at once instead of two seconds after the last write
    big = tmp_path / "w.bin"
    big.write_bytes(b"a" * (fingerprint.CACHED_BYTES + 1))
    stat = big.stat()
    first = fingerprint.file_sha256(big)
    with sqlite3.connect(tmp_path / "cache" / "file_hashes.sqlite") as db:
        assert db.execute("SELECT sha256 FROM hashes").fetchall() == [(first,)]
    fingerprint._memory.clear()
    assert fingerprint.file_sha256(big) == first  # from the database
    with open(big, "r+b") as handle:  # same size, same inode, mtime put back
        handle.write(b"b")
    os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert fingerprint.file_sha256(big) != first


def test_missing_local_model_and_offline_hub_fail_in_one_line(tmp_path, monkeypatch):
    with pytest.raises(ThinkJError, match="folder does not exist"):
        check_model_source(str(tmp_path / "runs" / "missing"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ThinkJError, match="hub is unreachable"):
        check_model_source("no-such-org/no-such-model")


def test_difficulty_filter_rejudges_a_retrained_model(tmp_path):
    model = build_tiny_model(tmp_path / "model", seed=0)
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, make_pairs(3, seed=4))
    args = dict(model=str(model), backend="hf", k=1, max_new_tokens=6, temperature=0.0)
    first = run_difficulty(src, tmp_path / "kept.jsonl", **args)
    again = run_difficulty(src, tmp_path / "kept.jsonl", **args)
    assert first["cache"] == {"hits": 0, "generated": 3} and again["cache"] == {"hits": 3, "generated": 0}
    _retrain(model)
    after = run_difficulty(src, tmp_path / "kept.jsonl", **args)
    assert after["cache"] == {"hits": 0, "generated": 3}


def test_eval_run_rejudges_a_retrained_model(tmp_path):
    model = build_tiny_model(tmp_path / "model", seed=0)
    data = write_rewardbench_fixture(tmp_path / "rb.jsonl", subsets=("alpacaeval-easy", "donotanswer"))
    out = tmp_path / "out"
    args = ["run", "rewardbench", "--model", str(model), "--data", str(data), "--max-new-tokens", "6", "--out", str(out)]

    def judged() -> int:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, (result.output, result.exception)
        assert len(open(out / "rewardbench.judgments.jsonl").readlines()) == 4
        cache = ResultCache(out / "cache.sqlite")
        try:
            return cache.counts()["results"]
        finally:
            cache.close()

    assert judged() == 4 and judged() == 4  # a rerun of the same model generates nothing
    _retrain(model)
    assert judged() == 8  # the retrained model's 4 judgments were generated, not read from the old model's


def test_difficulty_filter_rejudges_in_another_precision(tmp_path):
    """bf16 and fp32 greedy answers can differ: a cache filled in fp32 must not answer a bf16 run (and back)."""
    model = build_tiny_model(tmp_path / "model", seed=0)
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, make_pairs(3, seed=4))
    args = dict(model=str(model), backend="hf", k=1, max_new_tokens=6, temperature=0.0)

    def generated(**backend_kwargs) -> int:
        return run_difficulty(src, tmp_path / "kept.jsonl", backend_kwargs=backend_kwargs, **args)["cache"]["generated"]

    assert generated() == 3 and generated(dtype="auto") == 0  # "auto" is the default precision
    assert generated(dtype="bfloat16") == 3 and generated(dtype="bfloat16") == 0
    assert generated(dtype="float32") == 0  # the tiny checkpoint is float32: "auto" ran exactly this


def _declare_dtype(model: Path, dtype: str) -> None:
    config = json.loads((model / "config.json").read_text())
    config.pop("torch_dtype", None)
    config["dtype"] = dtype
    (model / "config.json").write_text(json.dumps(config))


def test_cache_keys_on_the_dtype_that_ran_not_the_one_asked_for(tmp_path):
    """"auto" loads a bf16 checkpoint in bf16: it shares keys with dtype=bfloat16 and never serves a float32 run."""
    from thinkj.inference.precision import expected_precision

    model = build_tiny_model(tmp_path / "model", seed=0)
    _declare_dtype(model, "bfloat16")
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, make_pairs(3, seed=4))

    def generated(**backend_kwargs) -> int:
        return run_difficulty(src, tmp_path / "kept.jsonl", model=str(model), backend="hf", k=1, max_new_tokens=6,
                              temperature=0.0, backend_kwargs=backend_kwargs)["cache"]["generated"]

    assert generated() == 3 and generated(dtype="bfloat16") == 0 and generated(dtype="float32") == 3
    # known before loading, as the lazy evaluation backend needs it
    assert expected_precision("hf", model, "auto", on_cpu=True) == "bfloat16"
    assert expected_precision("vllm", model, "auto", on_cpu=True) is None  # our vLLM backend runs fp32 on CPU
    assert expected_precision("hf", model, "float32", on_cpu=True) is None


def test_precision_of_a_hub_model_comes_from_its_cached_config_without_the_network(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from thinkj.inference.precision import expected_precision

    repo = tmp_path / "hub" / "models--org--bf16-model"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert expected_precision("hf", "org/bf16-model", "auto", on_cpu=True) == "bfloat16"
    with pytest.raises(ThinkJError, match="config.json cannot be read"):
        expected_precision("hf", "org/not-cached", "auto", on_cpu=True)


def test_precision_that_cannot_be_known_or_does_not_match_fails_in_one_line(tmp_path):
    from thinkj.inference.precision import check_precision, expected_precision

    with pytest.raises(ThinkJError, match="config.json cannot be read.*pass dtype="):
        expected_precision("hf", tmp_path, "auto", on_cpu=True)  # a folder without a config
    with pytest.raises(ThinkJError, match="dtype must be one of"):
        expected_precision("hf", tmp_path, "fp8", on_cpu=True)
    check_precision("bfloat16", "bfloat16", "m")
    with pytest.raises(ThinkJError, match="expected to run in bfloat16 .* engine runs float16; pass dtype=float16"):
        check_precision("bfloat16", "float16", "m")


def test_hf_backend_rejects_an_unknown_dtype(tmp_path):
    from thinkj.inference import make_backend

    model = build_tiny_model(tmp_path / "model", seed=0)
    with pytest.raises(ThinkJError, match="dtype must be one of auto, float32, bfloat16, float16"):
        make_backend("hf", str(model), dtype="int8")


def test_eval_run_records_its_backend_args_and_keys_their_precision(tmp_path):
    model = build_tiny_model(tmp_path / "model", seed=0)
    data = write_rewardbench_fixture(tmp_path / "rb.jsonl", subsets=("alpacaeval-easy", "donotanswer"))
    out = tmp_path / "out"
    args = ["run", "rewardbench", "--model", str(model), "--data", str(data), "--max-new-tokens", "6", "--out", str(out),
            "--backend-arg", "dtype=bfloat16"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    document = json.loads((out / "rewardbench.results.json").read_text())
    assert document["provenance"]["backend_args"] == {"dtype": "bfloat16"}
    result = CliRunner().invoke(app, args[:-2])  # the same run in the default precision is judged again
    assert result.exit_code == 0, (result.output, result.exception)
    cache = ResultCache(out / "cache.sqlite")
    try:
        assert cache.counts()["results"] == 8
    finally:
        cache.close()


def test_a_catalog_name_keys_on_its_fetched_folder(tmp_path, monkeypatch):
    """``--model smollm2`` is the fetched folder's files: a re-fetch of other weights is another model."""
    from thinkj.models import model_dir
    from thinkj.models.catalog import DONE_MARKER

    monkeypatch.setenv("THINKJ_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)  # no ./smollm2 folder shadows the catalog name
    folder = build_tiny_model(model_dir("smollm2"), seed=0)
    (folder / DONE_MARKER).write_text("{}")
    first = model_identity("smollm2")
    assert first.startswith("smollm2#dir:") and first.split("#")[1] == model_identity(str(folder)).split("#")[1]
    _retrain(folder)
    assert model_identity("smollm2") != first
