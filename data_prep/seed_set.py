"""Seed-set stage: judge SFT + critic SFT datasets (LlamaFactory) and RL data (verl parquet + pairs JSONL).

    python -m data_prep.seed_set runs/limj/clip/clipped.jsonl runs/limj/seed_set
    python -m data_prep.seed_set runs/limj/clip/clipped.jsonl runs/limj/seed_set --rl-pairs runs/hs2/pairs.jsonl
    # then in a LlamaFactory YAML: dataset: thinkj_judge_sft, dataset_dir: runs/limj/seed_set

Same as ``thinkj data seed-set``.
"""

from __future__ import annotations

from thinkj.data.cli import app
from thinkj.errors import exit_on_user_error

if __name__ == "__main__":
    exit_on_user_error(lambda: app(["seed-set", *__import__("sys").argv[1:]]))
