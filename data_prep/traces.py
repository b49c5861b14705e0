"""Teacher-traces stage: R1 judges every pair with thinking; traces with the right verdict are kept.

    # DeepSeek-R1 through its API (key in the environment, never on the command line)
    export DEEPSEEK_API_KEY=...
    python -m data_prep.traces runs/limj/dedup/kept.jsonl runs/limj/traces/traces.jsonl \
        --model deepseek-reasoner --base-url https://api.deepseek.com/v1 --api-key-env DEEPSEEK_API_KEY --concurrency 16
    # R1 (or a distill) served on a GPU node with `vllm serve <model> --reasoning-parser deepseek_r1 --port 8000`
    python -m data_prep.traces runs/limj/dedup/kept.jsonl runs/limj/traces/traces.jsonl \
        --model deepseek-ai/DeepSeek-R1 --base-url http://gpu-node:8000/v1 --api-key-env NONE
    # CPU, the scripted stand-in (first: thinkj data teacher-serve --port 8011)
    python -m data_prep.traces runs/cpu/tiny/data/dedup/kept.jsonl /tmp/traces.jsonl --model r1-scripted \
        --base-url http://127.0.0.1:8011/v1

Rerunning the same command resumes from ``<out>.cache.sqlite``: finished calls are not repeated, failed
ones are retried. Same as ``thinkj data traces``.
"""

from __future__ import annotations

from thinkj.data.cli import app
from thinkj.errors import exit_on_user_error

if __name__ == "__main__":
    exit_on_user_error(lambda: app(["traces", *__import__("sys").argv[1:]]))
