"""Small statistics for reporting accuracies honestly: score intervals for a rate and for a difference.

Wilson's score interval for one proportion, and Newcombe's hybrid score interval (method 10 in
Newcombe, Statistics in Medicine 17:873-890, 1998) for the difference of two independent ones. Two judges scored on
the same judgments are compared with McNemar's exact test (the two-sided binomial test on the judgments where exactly
one of them is right; McNemar, Psychometrika 12:153-157, 1947).
"""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for ``successes / n`` (``(0, 1)`` when ``n`` is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def diff_interval(k1: float, n1: int, k2: float, n2: int, z: float = Z95) -> tuple[float, float]:
    """Newcombe's interval for ``k2/n2 - k1/n1`` (the second minus the first)."""
    p1, p2 = k1 / max(n1, 1), k2 / max(n2, 1)
    l1, u1 = wilson_interval(k1, n1, z)
    l2, u2 = wilson_interval(k2, n2, z)
    d = p2 - p1
    lower = d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2)
    upper = d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2)
    return max(-1.0, lower), min(1.0, upper)


def mcnemar_exact(only_first: int, only_second: int) -> float:
    """Two-sided exact p-value of McNemar's test: ``only_first`` judgments right for the first judge alone,
    ``only_second`` for the second alone; under no difference each discordant judgment is a fair coin."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    k = min(only_first, only_second)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def successes_needed_above(upper: float, n: int, z: float = Z95) -> int | None:
    """The fewest successes out of ``n`` whose Wilson interval lies wholly above ``upper`` (None: not even ``n``)."""
    for k in range(n + 1):
        if wilson_interval(k, n, z)[0] > upper:
            return k
    return None
