"""Pathological ~100 KB judge outputs for the verdict parser (and the rewards that use it).

Shared by ``scripts/speed/parser_worst_case.py`` (prints the worst time per input) and
``tests/test_verdict_worst_case.py`` (asserts the bound). Each input aims at one way a regular expression
can go quadratic: a trigger word followed by a long run of what its next quantifier accepts.
"""

from __future__ import annotations

import random

SIZE = 100_000  # characters
LIMIT_S = 0.050  # the bound every parse must meet on any input of SIZE

_TRIGGERS = ("response", "Response (", "output", "answer", "assistant", "[[", "[RESULT]", "preference strength is",
             "Therefore, Response (a) is better, and the preference strength is [[", "<think>", "</think>",
             "it is a", "both responses are", "Therefore, the quality scores for Response (a) and Response (b) are [[",
             "<Score 1>", "<Score 1>1</Score 1> <Score 2>", "Response (a) is better",
             "Therefore, Response (a) is better, and the strength is [[")
_FILLERS = (" ", "\n", "\t ", "1", "a", "(", "*", "[[", "]]", ".")


def pathological_inputs(size: int = SIZE, seed: int = 0) -> dict[str, str]:
    """{name: text}: each trigger followed by each filler repeated to ``size``, repeated triggers, and a few
    seeded random mixtures of the same pieces (the fuzz part)."""
    cases: dict[str, str] = {}
    for trigger in _TRIGGERS:
        for filler in _FILLERS:
            cases[f"{trigger!r} + {filler!r}*"] = trigger + filler * ((size - len(trigger)) // len(filler))
        cases[f"{trigger!r} repeated"] = (trigger + " ") * (size // (len(trigger) + 1))
        cases[f"</think> + {trigger!r} + spaces"] = "<think>x</think>" + trigger + " " * size
    cases["400-digit scores"] = ("<think>x</think>\nTherefore, the quality scores for Response (a) and Response (b) "
                                 f"are [[{'9' * 400}]] and [[{'1' * 400}]], respectively.")
    cases["100K-digit strength"] = "<think>x</think>\nTherefore, Response (a) is better, and the preference strength is [[" \
                                   + "9" * size + "]]."
    rng = random.Random(seed)
    pieces = list(_TRIGGERS) + list(_FILLERS) + ["Response (a) is better", "[[B]]", "[RESULT] A", "Output (1)"]
    for k in range(8):
        parts, length = [], 0
        while length < size:
            piece = rng.choice(pieces) * rng.choice((1, 1, 1, 50, 2000))
            parts.append(piece)
            length += len(piece)
        cases[f"fuzz {k}"] = "".join(parts)[:size]
    return cases
