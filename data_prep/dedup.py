"""Dedup stage: embed each pair's instruction and keep a pair only if it is not too close to an earlier kept one.

    # GPU / normal use: instructor-large (downloaded from the hub once), the paper's embedding model
    python -m data_prep.dedup --in runs/limj/difficulty/kept.jsonl --out runs/limj/dedup/kept.jsonl \
        --model hkunlp/instructor-large --threshold 0.9
    # CPU / offline: the bundled all-MiniLM-L6-v2
    python -m data_prep.dedup --in runs/limj/difficulty/kept.jsonl --out runs/limj/dedup/kept.jsonl --threshold 0.9

Writes the kept pairs (JSONL), ``<out>.summary.json`` (counts, threshold, model, removed ids) and the
embeddings ``<out>.embeddings.npy`` (reused on a rerun with the same model/prompt/inputs, e.g. to try
another threshold). Library use: ``from data_prep.dedup import greedy_dedup``.
"""

from __future__ import annotations

import argparse
import json

from thinkj.checks import OneLineParser
from thinkj.data.dedup import brute_force_dedup, embed_texts, greedy_dedup, run_dedup
from thinkj.errors import exit_on_user_error

__all__ = ["brute_force_dedup", "embed_texts", "greedy_dedup", "run_dedup", "main"]


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--in", dest="inp", required=True, help="PreferencePair JSONL (kept in this order)")
    parser.add_argument("--out", required=True, help="kept pairs JSONL")
    parser.add_argument("--threshold", type=float, default=0.9, help="cosine similarity at or above which a pair is a duplicate")
    parser.add_argument("--model", default=None, help="sentence-transformers model (default: bundled all-MiniLM-L6-v2)")
    parser.add_argument("--prompt", default=None, help="instruction prepended for INSTRUCTOR models (left out of pooling)")
    parser.add_argument("--text-field", default="instruction", choices=["instruction", "instruction+responses"])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    from thinkj.paths import setup_caches

    setup_caches()
    summary = run_dedup(args.inp, args.out, threshold=args.threshold, model=args.model, prompt=args.prompt,
                        text_field=args.text_field, batch_size=args.batch_size, device=args.device)
    print(json.dumps({k: v for k, v in summary.items() if k != "removed_ids"}, indent=1))
    return summary


if __name__ == "__main__":
    exit_on_user_error(main)
