from __future__ import annotations

import pytest

from thinkj.stats import diff_interval, mcnemar_exact, successes_needed_above, wilson_interval


def test_wilson_known_values():
    # Newcombe (1998), Table I: 81/263 -> 0.2553 to 0.3662
    lo, hi = wilson_interval(81, 263)
    assert lo == pytest.approx(0.2553, abs=1e-4) and hi == pytest.approx(0.3662, abs=1e-4)
    assert wilson_interval(0, 10)[0] == pytest.approx(0.0) and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_newcombe_difference_known_values():
    # Newcombe (1998), Table II example (56/70 vs 48/80), method 10: 0.0524 to 0.3339
    lo, hi = diff_interval(48, 80, 56, 70)
    assert lo == pytest.approx(0.0524, abs=1e-3) and hi == pytest.approx(0.3339, abs=1e-3)
    lo, hi = diff_interval(50, 100, 50, 100)
    assert lo < 0 < hi


def test_mcnemar_exact_known_values():
    # 2 discordant judgments against 8: P(X <= 2 | n=10, 1/2) = 56/1024, doubled
    assert mcnemar_exact(2, 8) == pytest.approx(112 / 1024)
    assert mcnemar_exact(8, 2) == mcnemar_exact(2, 8)
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(0, 6) == pytest.approx(2 / 64)


def test_successes_needed_above_is_the_first_separated_count():
    upper = wilson_interval(46, 60)[1]  # 76.7 % of 60 judgments: the interval ends at 85.6 %
    k = successes_needed_above(upper, 60)
    assert wilson_interval(k, 60)[0] > upper >= wilson_interval(k - 1, 60)[0]
    assert k == 57  # 95.0 %: what a trained row must reach on 60 judgments to be separated from that init
    assert successes_needed_above(0.99, 10) is None
