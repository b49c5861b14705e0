"""Trace-clipping stage: the teacher's explanation becomes the thinking; the long reasoning is dropped.

    python -m data_prep.clip runs/limj/traces/traces.jsonl runs/limj/clip/clipped.jsonl \
        --tokenizer Qwen/Qwen2.5-7B-Instruct          # length statistics in the student's tokens
    python -m data_prep.clip runs/cpu/tiny/data/traces/traces.jsonl /tmp/clipped.jsonl   # whitespace words

Same as ``thinkj data clip``; writes ``<out>.summary.json`` with the length statistics before and after.
"""

from __future__ import annotations

from thinkj.data.cli import app
from thinkj.errors import exit_on_user_error

if __name__ == "__main__":
    exit_on_user_error(lambda: app(["clip", *__import__("sys").argv[1:]]))
