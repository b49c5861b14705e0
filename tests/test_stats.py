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


def test_cluster_sign_flip_hand_worked():
    from thinkj.stats import cluster_sign_flip_p

    # differences (1, 2, 2), observed sum 5: only the all-plus and all-minus patterns reach |5|: 2/8
    assert cluster_sign_flip_p([1, 2, 2]) == pytest.approx(2 / 8)
    # (1, -2, 2), observed 1: every pattern has |sum| >= 1 (sums are odd): p = 1
    assert cluster_sign_flip_p([1, -2, 2]) == pytest.approx(1.0)
    # (3, 1), observed 4: patterns 4, 2, -2, -4: 2/4; zero clusters change nothing
    assert cluster_sign_flip_p([3, 1, 0, 0]) == pytest.approx(0.5)
    assert cluster_sign_flip_p([0, 0]) == 1.0 and cluster_sign_flip_p([]) == 1.0


def test_singleton_clusters_are_mcnemar_and_the_test_is_named():
    from thinkj.stats import paired_test

    later = [True] * 12 + [False] * 3 + [True] * 5
    earlier = [False] * 12 + [True] * 3 + [True] * 5
    result = paired_test(later, earlier)
    assert result["test"] == "mcnemar_exact" and result["clusters"] == 20
    assert result["p"] == pytest.approx(mcnemar_exact(12, 3))
    # the same judgments in distinct clusters of their own: the sign-flip law is McNemar's binomial
    clustered = paired_test(later, earlier, [f"q{i}" for i in range(20)], cluster_by="question")
    assert clustered["test"] == "mcnemar_exact" and clustered["p"] == pytest.approx(result["p"])
    with pytest.raises(ValueError, match="equally long"):
        paired_test(later, earlier[:-1])


def test_a_duplicated_judgment_is_counted_once():
    """Each judgment drawn twice (the same comparison repeated): McNemar over the judgments sees twice the evidence,
    the cluster test, clustering by the comparison, the same as before."""
    from thinkj.stats import paired_test

    later = [True] * 9 + [False] * 2 + [True] * 4
    earlier = [False] * 9 + [True] * 2 + [True] * 4
    once = paired_test(later, earlier, list(range(15)), cluster_by="comparison")
    twice = paired_test(later * 2, earlier * 2, list(range(15)) * 2, cluster_by="comparison")
    naive = mcnemar_exact(18, 4)
    assert once["p"] == pytest.approx(mcnemar_exact(9, 2))  # 0.065: not below 0.05
    assert naive < 0.01 < once["p"]  # counted twice, McNemar would claim p = 0.004
    assert twice["test"] == "cluster_sign_flip" and twice["clusters"] == 15
    assert twice["p"] == pytest.approx(once["p"])
    # 9 comparisons gained, 2 lost, 4 unchanged; duplicates move no extra cluster
    assert once["cluster_moves"] == twice["cluster_moves"] == {"gained": 9, "unchanged": 4, "lost": 2}


def test_cluster_bootstrap_hand_worked_and_blind_to_duplicates():
    from thinkj.stats import cluster_bootstrap_ci, paired_test

    # two clusters of two judgments: A both gained (+2 of 2), B both lost (-2 of 2). A resample of two clusters is
    # AA (+1.0, chance 1/4), AB or BA (0, 1/2) or BB (-1.0, 1/4): its 2.5 % and 97.5 % points are -1 and +1
    later, earlier, clusters = [True, True, False, False], [False, False, True, True], ["A", "A", "B", "B"]
    assert cluster_bootstrap_ci(later, earlier, clusters) == (-1.0, 1.0)
    # every cluster the same change: no spread to resample
    assert cluster_bootstrap_ci([True, True, True], [False, False, False], [1, 2, 3]) == (1.0, 1.0)
    # each judgment drawn twice: the same clusters, so the same resamples and the same interval; counted as
    # judgments of their own the interval would narrow (the duplicate looks like new evidence)
    later = [True] * 9 + [False] * 2 + [True] * 4
    earlier = [False] * 9 + [True] * 2 + [True] * 4
    once = cluster_bootstrap_ci(later, earlier, list(range(15)))
    assert cluster_bootstrap_ci(later * 2, earlier * 2, list(range(15)) * 2) == once
    naive = cluster_bootstrap_ci(later * 2, earlier * 2, list(range(30)))
    assert naive[1] - naive[0] < 0.8 * (once[1] - once[0])
    assert paired_test(later * 2, earlier * 2, list(range(15)) * 2)["diff_ci95"] == list(once)
    with pytest.raises(ValueError, match="equally long"):
        cluster_bootstrap_ci(later, earlier, list(range(14)))


def test_design_effect_p_hand_worked():
    from thinkj.stats import design_effect_p

    # 8 vs 0: z = 8 / sqrt(8) = 2.83; at design effect 2, z = 8 / sqrt(16) = 2: two-sided 0.0455
    assert design_effect_p(8, 0, 2.0) == pytest.approx(0.0455, abs=5e-5)
    assert design_effect_p(8, 0, 1.0) == pytest.approx(0.00468, abs=5e-6)
    assert design_effect_p(5, 5, 3.0) == 1.0 and design_effect_p(0, 0, 2.0) == 1.0
