"""Pathological completions every reward must survive: ~100 KB each, built to trip backtracking parsers,
int-string limits and non-finite arithmetic. Used by the fuzz test (``tests/test_reward_worst_case.py``) and the
timing benchmark (``scripts/speed/worst_case_inputs.py``).

The rule they check: a reward never raises, never returns a non-finite number, and runs in time linear in
the input (the target is <= 50 ms for 100 KB on one core). :func:`bad_ground_truths` holds the ground truths a
reward must record as a data error (``gold_error`` = 1, thinkj/rewards/gold.py) instead of raising or misreading.
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
    """A well-formed ground truth for the preset (the completions above are what is pathological)."""
    return {"multi_objective": [3, 3, 4, 2, 1], "competition": {"answer": "42"}}.get(preset, {"label": "a", "strength": 2})


# Presets that read the gold strength; the other pairwise presets read only the label (a bad strength is no error
# for them: they never use it).
STRENGTH_READERS = ("thinkj_qwen", "thinkj_llama", "thinkj_subtractive", "strength_public")

BAD_STRENGTHS: dict[str, Any] = {
    "Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan"), "2.7": 2.7, "7": 7, "-1": -1, "4": 4,
    "true": True, "false": False, "string '2'": "2", "list": [2], "dict": {"value": 2}, "1e308": 1e308,
    "huge int": 10 ** 400,
}
BAD_LABELS: dict[str, Any] = {
    "label None": {"label": None, "strength": 2}, "label 'c'": {"label": "c", "strength": 2},
    "label 1": {"label": 1}, "label true": {"label": True}, "label ''": {"label": ""}, "label list": {"label": ["a"]},
    "no label": {"strength": 2}, "empty dict": {}, "None": None, "int 3": 3, "float NaN": float("nan"), "list": ["a"],
    "text 'garbage'": "garbage", "text 'ab'": "ab", "broken JSON": '{"label": ', "JSON list": '["a"]',
    "JSON with a 5,000-digit strength": '{"label": "a", "strength": ' + "9" * 5000 + "}",
    "deeply nested JSON": "{" + '"x": {' * 50_000 + "}" * 50_001, "bytes": b"a",
}
BAD_SCORES: dict[str, Any] = {
    "None": None, "text": "not json", "empty list": [], "2.7": [3, 2.7, 4, 2, 1], "true": [3, True, 4, 2, 1],
    "string '2'": [3, "2", 4, 2, 1], "None item": [3, None, 4, 2, 1], "NaN": [3, float("nan"), 4, 2, 1],
    "Infinity": [3, float("inf"), 4, 2, 1], "huge": [3, 10 ** 30, 4, 2, 1], "scores None": {"scores": None},
    "no scores key": {"x": [1]}, "too many": [1] * 100, "nested": [[1, 2]], "5,000-digit JSON": "[" + "9" * 5000 + "]",
    "deeply nested JSON": "[" * 100_000, "int": 3,
}
BAD_ANSWERS: dict[str, Any] = {
    "None": None, "true": True, "NaN": float("nan"), "Infinity": float("inf"), "huge int": 10 ** 400,
    "answer None": {"answer": None}, "no answer key": {}, "empty text": "", "punctuation only": "?!", "list": [24],
}


def bad_ground_truths(preset: str) -> dict[str, Any]:
    """Name -> a ground truth the preset must record as a data error (``gold_error`` = 1), never raise on."""
    if preset == "multi_objective":
        return dict(BAD_SCORES)
    if preset == "competition":
        return dict(BAD_ANSWERS)
    bad = dict(BAD_LABELS)
    if preset in STRENGTH_READERS:
        bad.update({f"strength {name}": {"label": "a", "strength": value} for name, value in BAD_STRENGTHS.items()})
    return bad
