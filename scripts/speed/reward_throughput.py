"""Reward throughput through the verl adapter on ~2 KB judge outputs, one core.

    python scripts/speed/reward_throughput.py [--calls 200000] [--preset thinkj_qwen]

Target: >= 50,000 calls/s for the Think-J reward.
"""

from __future__ import annotations

import argparse
import os
import random
import time


def make_outputs(n: int, seed: int = 0) -> list[tuple[str, dict]]:
    from thinkj.prompts import judge_output

    rng = random.Random(seed)
    words = "the response answers correctly while the other misses the key constraint about safety".split()
    items = []
    for _ in range(n):
        thinking = " ".join(rng.choice(words) for _ in range(330))  # ~2 KB
        kind = rng.random()
        choice, strength = rng.choice("ab"), rng.randint(1, 3)
        text = judge_output(thinking, choice, strength)
        if kind < 0.1:
            text = text[: len(text) // 2]  # truncated: unclosed think
        elif kind < 0.2:
            text = text.replace("[[", "[[x")
        items.append((text, {"label": rng.choice("ab"), "strength": rng.randint(1, 3)}))
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--preset", default="thinkj_qwen")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    from thinkj.rewards.adapters.verl import compute_score

    items = make_outputs(1000)
    size = sum(len(t) for t, _ in items) / len(items)
    for text, gt in items[:1000]:  # warm up
        compute_score("thinkj", text, gt, preset=args.preset)
    start = time.perf_counter()
    for i in range(args.calls):
        text, gt = items[i % len(items)]
        compute_score("thinkj", text, gt, preset=args.preset)
    elapsed = time.perf_counter() - start
    print(f"preset={args.preset} mean_output_bytes={size:.0f} calls={args.calls} "
          f"seconds={elapsed:.2f} calls_per_second={args.calls / elapsed:,.0f}")


if __name__ == "__main__":
    main()
