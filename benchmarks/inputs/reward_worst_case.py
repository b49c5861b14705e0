"""Pathological completions every reward must survive: ~100 KB each, built to trip backtracking parsers,
int-string limits and non-finite arithmetic. Used by the fuzz test (``tests/test_reward_worst_case.py``) and the
timing benchmark (``benchmarks/worst_case_inputs.py``).

The rule they check: a reward never raises, never returns a non-finite number, and runs in time linear in
the input (the target is <= 50 ms for 100 KB on one core).
"""

from __future__ import annotations

import random
from typing import Any

SIZE = 100_000


def _rep(unit: str, size: int = SIZE) -> str:
    return unit * max(1, size // max(1, len(unit)))


def worst_case_inputs(size: int = SIZE, seed: int = 0) -> dict[str, str]:
    """Name -> completion text of about ``size`` characters."""
    rng = random.Random(seed)
    noise = "".join(rng.choice("<>[]()/abAB0123456789 \n\t-.*:=") for _ in range(size))
    return {
        "repeated <notes>": _rep("<notes>", size),
        "<judgement> then spaces": "<judgement>" + " " * size + "x",
        "trigger word then spaces": "Response (a) is better" + " " * size,
        "after </think>: trigger then spaces": "<think>x</think>Therefore, Response (a) is better" + " " * size + "[[",
        "unclosed <think>": "<think>" + "x" * size,
        "repeated <think>": _rep("<think>", size),
        "repeated </think>": _rep("</think>", size),
        "repeated [[": "</think>" + _rep("[[", size),
        "huge integer": "9" * size,
        "huge strength": f"<think>x</think>Therefore, Response (a) is better, and the preference strength is [[{'9' * size}]].",
        "huge scores": "Score A: " + "9" * (size // 2) + " Score B: " + "8" * (size // 2),
        "many integers": _rep("1 ", size),
        "digit-dot runs": _rep("1.", size),
        "digits then letter+digit": "1" * size + "a1",
        "dashes": "-" * size,
        "inf and nan words": _rep("inf nan NaN 1e999 -1e999 ", size),
        "both verdicts repeated": _rep("Response (a) is better. Response (b) is better. ", size),
        "verdict sentence repeated": _rep("Therefore, Response (a) is better, and the preference strength is [[2]]. ", size),
        "boxed answers": _rep("\\boxed{1} ", size),
        "tags of every kind": _rep("<think><notes></notes><judgement>A</judgement><answer>1</answer></think>", size),
        "lone surrogates and NUL": _rep("\ud800\x00\udfff", size),
        "random punctuation": noise,
        "empty": "",
    }


def ground_truth(preset: str) -> Any:
    """A well-formed ground truth for the preset (the rule is about completions: a malformed ground truth is bad
    data and fails loudly)."""
    return {"multi_objective": [3, 3, 4, 2, 1], "competition": {"answer": "42"}}.get(preset, {"label": "a", "strength": 2})
