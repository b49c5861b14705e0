"""Exact greedy dedup vs one blockwise X @ X.T of the same matrix (the product exact dedup cannot avoid).

    .venv/bin/python scripts/speed/dedup_speed.py                   # 80,000 x 768 float32 (about Skywork-Reward-Preference-80K)
    .venv/bin/python scripts/speed/dedup_speed.py --n 20000 --threads 1

Data: unit-norm Gaussian vectors (pairwise cosine ~ 0 +- 0.036 at 768 dims) plus planted clusters of
near-duplicates (copies of a base row with small noise, cosine ~ 0.99), so the threshold removes some
rows. Prints both times (wall and process CPU time: on a shared machine the CPU-time ratio is the
steadier one), their ratio and the peak extra memory of each (tracemalloc sees numpy buffers).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np


def make_data(n: int, dim: int, seed: int, dup_fraction: float = 0.1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    n_dup = int(n * dup_fraction)
    targets = rng.choice(n, size=n_dup, replace=False)
    sources = rng.choice(np.setdiff1d(np.arange(n), targets), size=n_dup)
    x[targets] = x[sources] + 0.1 * rng.standard_normal((n_dup, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def blockwise_gram(x: np.ndarray, block: int, chunk: int) -> None:
    """X @ X.T computed block by block into a reused buffer (same shapes as the dedup's products)."""
    n = x.shape[0]
    buf = np.empty((block, min(chunk, n)), dtype=np.float32)
    for start in range(0, n, block):
        xb = x[start:start + block]
        for c0 in range(0, n, chunk):
            c1 = min(c0 + chunk, n)
            np.matmul(xb, x[c0:c1].T, out=buf[:xb.shape[0], :c1 - c0])


def measure(fn):
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, cpu, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=80_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="BLAS threads (threadpoolctl if installed)")
    args = parser.parse_args()
    if args.threads:
        from threadpoolctl import threadpool_limits

        threadpool_limits(args.threads)
    from thinkj.data.dedup import greedy_dedup

    x = make_data(args.n, args.dim, args.seed)
    data_mb = x.nbytes / 2**20
    _, t_gram, c_gram, m_gram = measure(lambda: blockwise_gram(x, args.block, args.chunk))
    kept, t_dedup, c_dedup, m_dedup = measure(lambda: greedy_dedup(x, args.threshold, block=args.block, chunk=args.chunk,
                                                          normalise=False))
    print(f"data: {args.n} x {args.dim} float32 ({data_mb:.0f} MiB), threshold {args.threshold}, "
          f"block {args.block}, chunk {args.chunk}")
    print(f"kept {kept.size} of {args.n} (removed {args.n - kept.size})")
    print(f"blockwise X @ X.T : {t_gram:8.2f} s wall {c_gram:8.2f} s CPU   peak extra memory {m_gram / 2**20:8.1f} MiB")
    print(f"greedy dedup      : {t_dedup:8.2f} s wall {c_dedup:8.2f} s CPU   peak extra memory {m_dedup / 2**20:8.1f} MiB "
          f"(kept-row copy {kept.size * args.dim * 4 / 2**20:.0f} MiB + buffers)")
    print(f"ratio dedup / product: {t_dedup / t_gram:.3f} wall, {c_dedup / c_gram:.3f} CPU time (target <= 1.5)")


if __name__ == "__main__":
    main()
