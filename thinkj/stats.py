"""Small statistics for reporting accuracies honestly: score intervals for a rate and for a difference.

Wilson's score interval for one proportion, and Newcombe's hybrid score interval (method 10 in
Newcombe, Statistics in Medicine 17:873-890, 1998) for the difference of two independent ones. Two judges scored on
the same judgments are compared with McNemar's exact test (the two-sided binomial test on the judgments where exactly
one of them is right; McNemar, Psychometrika 12:153-157, 1947) when the judgments are independent items.

When judgments share a unit (both orders of one comparison, several comparisons of one question, a comparison drawn
twice) they are not independent, and McNemar over judgments overstates the evidence. :func:`paired_test` then runs
the paired randomization (sign-flip) test at the level of that unit, the cluster: under "the two judges are
exchangeable", swapping their labels inside a cluster is as likely as not, so each cluster's difference in right
judgments keeps or flips its sign with probability 1/2, independently of the other clusters (Fisher's randomization
test for paired data, The Design of Experiments, 1935, section 21, applied to cluster totals). The exact null
distribution of the summed difference is built by convolution over the clusters (at most n judgments x n clusters
additions), so the p-value is exact at any size this project meets and needs no Monte Carlo. With one judgment per
cluster it is exactly McNemar's exact test. Every result names the test that ran, why, and the number of distinct
clusters. Beside the test, :func:`cluster_bootstrap_ci` gives a percentile interval for the change in accuracy by
resampling whole clusters with replacement (the cluster bootstrap: Davison & Hinkley, Bootstrap Methods and their
Application, 1997, section 3.8, resampling the top-level units of hierarchical data; Field & Welsh, "Bootstrapping
clustered data", JRSS B 69:369-390, 2007), with a fixed seed so a table recomputes to the same digits.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any

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


def design_effect_p(only_first: int, only_second: int, design_effect: float) -> float:
    """Two-sided p of McNemar's normal approximation, z = (b - c) / sqrt(b + c), with the variance inflated by a
    design effect (Kish, Survey Sampling, 1965: 1 + (m - 1) rho for clusters of m with intra-cluster correlation
    rho; with rho = 1 and unequal clusters, sum m^2 / sum m). A rough re-reading of summary counts whose records are
    gone, not a test of the records: it assumes the discordant judgments spread over the clusters as all judgments
    do."""
    n = only_first + only_second
    if n == 0:
        return 1.0
    z = abs(only_first - only_second) / math.sqrt(n * design_effect)
    return math.erfc(z / math.sqrt(2.0))


def successes_needed_above(upper: float, n: int, z: float = Z95) -> int | None:
    """The fewest successes out of ``n`` whose Wilson interval lies wholly above ``upper`` (None: not even ``n``)."""
    for k in range(n + 1):
        if wilson_interval(k, n, z)[0] > upper:
            return k
    return None


def cluster_sign_flip_p(differences: Sequence[int]) -> float:
    """Two-sided exact p-value of the paired sign-flip test on integer cluster differences (later right minus earlier
    right, per cluster): P(|sum s_c d_c| >= |sum d_c|) over independent fair signs s_c. Zero clusters add nothing."""
    diffs = [abs(int(d)) for d in differences if d]
    observed = abs(sum(int(d) for d in differences))
    if not diffs:
        return 1.0
    import numpy as np

    total = sum(diffs)
    dist = np.zeros(2 * total + 1)  # dist[t + total] = P(sum = t)
    dist[total] = 1.0
    for d in diffs:  # convolve with the two-point law {-d, +d}
        new = np.zeros_like(dist)
        new[:-d] += 0.5 * dist[d:]
        new[d:] += 0.5 * dist[:-d]
        dist = new
    sums = np.arange(-total, total + 1)
    tail = float(dist[np.abs(sums) >= observed].sum())
    return min(1.0, tail)


def cluster_bootstrap_ci(later: Sequence[bool], earlier: Sequence[bool], clusters: Sequence[Hashable],
                         resamples: int = 10_000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """Percentile interval for mean(later) - mean(earlier) over judgments, resampling the clusters (with all their
    judgments) with replacement; the ratio estimate sum(differences) / sum(judgments) of each resample."""
    if not (len(later) == len(earlier) == len(clusters)) or not later:
        raise ValueError(f"cluster bootstrap needs equally long, non-empty lists (got {len(later)}, {len(earlier)}, "
                         f"{len(clusters)})")
    import numpy as np

    index: dict[Hashable, int] = {}
    for key in clusters:
        index.setdefault(key, len(index))
    k = len(index)
    diff, size = np.zeros(k), np.zeros(k)
    for key, a, b in zip(clusters, later, earlier):
        diff[index[key]] += int(bool(a)) - int(bool(b))
        size[index[key]] += 1
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for start in range(0, resamples, 1000):  # chunks keep the index matrix small (1000 x clusters)
        draw = rng.integers(0, k, size=(min(1000, resamples - start), k))
        stats[start:start + len(draw)] = diff[draw].sum(axis=1) / size[draw].sum(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_test(later: Sequence[bool], earlier: Sequence[bool], clusters: Sequence[Hashable] | None = None, *,
                cluster_by: str = "judgment") -> dict[str, Any]:
    """Two judges' right/wrong on the same judgments (``later[i]`` and ``earlier[i]`` are one judgment), tested for a
    difference. ``clusters[i]`` names the unit judgment i belongs to (its comparison, its question; None: each
    judgment its own). All clusters singletons: McNemar's exact test; otherwise the cluster sign-flip test
    (:func:`cluster_sign_flip_p`). The result says which test ran, why, and how many distinct clusters there are;
    ``diff_ci95`` is the cluster bootstrap interval of the change in accuracy (a fraction, :func:`cluster_bootstrap_ci`)."""
    if len(later) != len(earlier) or (clusters is not None and len(clusters) != len(later)):
        raise ValueError(f"paired test needs equally long lists (got {len(later)}, {len(earlier)}"
                         f"{'' if clusters is None else f', {len(clusters)} clusters'})")
    keys = list(range(len(later))) if clusters is None else list(clusters)
    totals: dict[Hashable, int] = {}
    for key, a, b in zip(keys, later, earlier):
        totals[key] = totals.get(key, 0) + int(bool(a)) - int(bool(b))
    only_later = sum(bool(a) and not bool(b) for a, b in zip(later, earlier))
    only_earlier = sum(bool(b) and not bool(a) for a, b in zip(later, earlier))
    n, k = len(later), len(totals)
    if k == n:
        test, why, p = "mcnemar_exact", f"each of the {n} judgments is its own {cluster_by}", \
            mcnemar_exact(only_later, only_earlier)
    else:
        test, why = "cluster_sign_flip", f"{n} judgments share {k} distinct {cluster_by}s"
        p = cluster_sign_flip_p(list(totals.values()))
    low, high = cluster_bootstrap_ci(later, earlier, keys) if n else (0.0, 0.0)
    moves = {"gained": sum(t > 0 for t in totals.values()), "unchanged": sum(t == 0 for t in totals.values()),
             "lost": sum(t < 0 for t in totals.values())}  # how many clusters moved which way (their net change)
    return {"test": test, "why": why, "p": p, "clusters": k, "cluster_by": cluster_by, "n_judgments": n,
            "only_later_right": only_later, "only_earlier_right": only_earlier, "diff_ci95": [low, high],
            "cluster_moves": moves}
