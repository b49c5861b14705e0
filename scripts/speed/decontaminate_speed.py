"""Decontamination speed: training rows checked per second by the exact and 13-gram rules (no embedding).

    .venv/bin/python scripts/speed/decontaminate_speed.py                 # 80,000 rows x 10,000 benchmark items
    .venv/bin/python scripts/speed/decontaminate_speed.py --rows 20000 --items 2000

Data: synthetic text over a Zipf-distributed vocabulary of 30,000 made-up words, some capitalised or followed by
punctuation (so normalisation does real work). Lengths are log-normal, about Skywork-Reward-Preference-80K's scale:
prompts ~80 words, each response ~200 words, benchmark prompts ~60 words (RewardBench, RM-Bench and Auto-J prompts
run from a few words to a few hundred). 1 % of the rows are contaminated on purpose: half hold a benchmark prompt
inside a longer prompt, half a recased copy of one as a response; the run checks that exactly those rows are
caught. Prints the time to read the benchmark side (index), the time to check the rows, and rows per second.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def make_vocab(n: int, rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(3, 10, size=n)
    words = ["".join(rng.choice(letters, size=k)) for k in lengths]
    for i in rng.choice(n, size=n // 10, replace=False):  # a tenth capitalised or punctuated
        words[i] = words[i].capitalize() if i % 2 else words[i] + rng.choice([",", ".", "?", "!", ";"])
    return words


def make_texts(count: int, mean_words: float, vocab: list[str], rng: np.random.Generator) -> list[str]:
    lengths = np.clip(rng.lognormal(np.log(mean_words), 0.6, size=count).astype(int), 3, 2000)
    ranks = rng.zipf(1.2, size=int(lengths.sum())) % len(vocab)
    words = np.array(vocab, dtype=object)[ranks]
    cuts = np.cumsum(lengths)[:-1]
    return [" ".join(chunk) for chunk in np.split(words, cuts)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=80_000)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from thinkj.data.decontaminate import BenchmarkPrompts, Checker

    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    vocab = make_vocab(30_000, rng)
    items = make_texts(args.items, 60, vocab, rng)
    prompts = make_texts(args.rows, 80, vocab, rng)
    responses = make_texts(2 * args.rows, 200, vocab, rng)
    dirty = rng.choice(args.rows, size=args.rows // 100, replace=False)
    long_items = [i for i, text in enumerate(items) if len(text.split()) >= 20]
    for k, row in enumerate(dirty.tolist()):
        item = items[long_items[k % len(long_items)]]
        if k % 2:
            prompts[row] = f"Please answer this. {item} Thank you!"
        else:
            responses[2 * row + 1] = item.upper().replace(" ", "  ")
    rows = [(f"row-{r}", r + 1, {"prompt": prompts[r], "response_a": responses[2 * r],
                                 "response_b": responses[2 * r + 1]}) for r in range(args.rows)]
    n_words = sum(len(t.split()) for t in prompts) + sum(len(t.split()) for t in responses)
    made = time.perf_counter() - t0
    t1, c1 = time.perf_counter(), time.process_time()
    checker = Checker([BenchmarkPrompts("synthetic", "generated", None, [(f"item-{i}", t) for i, t in enumerate(items)])],
                      encoder="none")
    index_s, index_cpu = time.perf_counter() - t1, time.process_time() - c1
    t2, c2 = time.perf_counter(), time.process_time()
    matches = checker.check(rows)
    check_s, check_cpu = time.perf_counter() - t2, time.process_time() - c2
    caught = {m.line - 1 for m in matches}
    print(f"data: {args.rows} training rows ({n_words / 1e6:.1f} M words in prompts and responses), "
          f"{args.items} benchmark items; generated in {made:.1f} s")
    print(f"index the benchmark : {index_s:7.2f} s wall {index_cpu:7.2f} s CPU "
          f"({sum(i.hashes.size for i in checker.indexes)} n-gram hashes)")
    print(f"check the rows      : {check_s:7.2f} s wall {check_cpu:7.2f} s CPU")
    print(f"rows per second     : {args.rows / check_s:,.0f} (exact + 13-gram rules; {len(matches)} matches)")
    planted = set(dirty.tolist())
    print(f"planted rows caught : {len(planted & caught)} of {len(planted)}; other rows caught: {len(caught - planted)}")


if __name__ == "__main__":
    main()
