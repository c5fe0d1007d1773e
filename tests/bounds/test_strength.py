"""The TPR at a target FPR and its interval (:func:`dpaudit.bounds.strength.tpr_interval`): the ranks
of the negatives' quantile, coverage on Gaussian score games with signal at the canaries audit's
sizes, near-tight least-favourable games, and ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta, binom, norm

from dpaudit.bounds.strength import quantile_ranks, tpr_at_fpr, tpr_interval


def mc_limit(share: float, repeats: int) -> float:
    """The largest miss rate a limit stated at ``share`` may show: the share + 2 Monte Carlo s.e."""
    return share + 2.0 * math.sqrt(share * (1.0 - share) / repeats)


@pytest.mark.parametrize(("m", "fpr", "miss"), [(50, 0.1, 0.05), (640, 0.01, 0.0125), (1600, 0.001, 0.0125)])
def test_quantile_ranks_are_the_extreme_ranks_the_binomial_allows(m: int, fpr: float, miss: float) -> None:
    """j: the smallest rank with P(Bin(m, 1 − f) ≥ j) ≤ miss; i: the largest with P(Bin ≤ i − 1) ≤ miss
    (brute force over every rank)."""
    i, j = quantile_ranks(m, fpr, miss, miss)
    ranks = np.arange(1, m + 1)
    upper_ok = ranks[binom.sf(ranks - 1, m, 1 - fpr) <= miss]
    lower_ok = ranks[binom.cdf(ranks - 1, m, 1 - fpr) <= miss]
    assert j == (upper_ok.min() if upper_ok.size else None)
    assert i == lower_ok.max()
    if m * fpr >= 5:
        assert i < m - math.floor(fpr * m) < j  # the point estimate's rank lies between them


def test_limits_are_clopper_pearson_beyond_the_quantile_ranks() -> None:
    """A hand composition: ranks from the binomial, hits above X_(j) (strictly) and from X_(i) (with
    ties), one-sided Clopper–Pearson limits at half of each side's miss."""
    rng = np.random.default_rng(1)
    pos, neg = rng.normal(1.5, 1.0, 300), rng.normal(0.0, 1.0, 400)
    value, low, high, achieved = tpr_interval(pos, neg, 0.05, 0.02, 0.04)
    ranks = np.arange(1, 401)
    j = ranks[binom.sf(ranks - 1, 400, 0.95) <= 0.01].min()
    i = ranks[binom.cdf(ranks - 1, 400, 0.95) <= 0.02].max()
    xs = np.sort(neg)
    hits_low, hits_high = int(np.sum(pos > xs[j - 1])), int(np.sum(pos >= xs[i - 1]))
    assert low == pytest.approx(beta.ppf(0.01, hits_low, 300 - hits_low + 1))
    assert high == pytest.approx(beta.ppf(1 - 0.02, hits_high + 1, 300 - hits_high))
    assert value == np.sum(pos > xs[400 - 20 - 1]) / 300 and achieved == 20 / 400
    assert low < value < high


@pytest.mark.parametrize(("n", "fpr", "signal"), [(640, 0.01, 1.0), (640, 0.01, 2.5), (1600, 0.01, 2.0),
                                                  (1600, 0.001, 3.0)])  # fmt: skip
def test_gaussian_games_with_signal_are_covered(n: int, fpr: float, signal: float) -> None:
    """Positives N(s, 1), negatives N(0, 1), n of each: the true TPR at FPR f is Φ̄(Φ̄⁻¹(f) − s). Each
    one-sided limit of the 95 % interval may miss on its side in at most 2.5 % (+ 2 s.e.); the
    interval that treats the empirical threshold as fixed missed low in 25–30 % of repeats here."""
    repeats = 400
    truth = float(norm.sf(norm.isf(fpr) - signal))
    rng = np.random.default_rng([n, int(fpr * 1e4), int(signal * 10)])
    low_miss = high_miss = 0
    for _ in range(repeats):
        _, low, high, _ = tpr_at_fpr(rng.normal(signal, 1.0, n), rng.normal(0.0, 1.0, n), fpr, 0.95)
        low_miss += low > truth
        high_miss += high < truth
    assert low_miss / repeats <= mc_limit(0.025, repeats)
    assert high_miss / repeats <= mc_limit(0.025, repeats)


def flat_below(rng: np.random.Generator, n: int, m: int, fpr: float, tpr: float, jump: float) -> tuple:
    """Least favourable for the lower limit: negatives U(0, 1), quantile q = 1 − f; positives above
    every negative with probability ``tpr`` and just below q with probability ``jump``: any threshold
    below q gains ``jump`` in TPR, so a quantile rank that falls below q makes the lower limit miss."""
    q, u = 1.0 - fpr, rng.random(n)
    pos = np.where(u < tpr, 2.0, np.where(u < tpr + jump, q - 1e-4 * rng.random(n), -1.0))
    return pos, rng.random(m)


def flat_above(rng: np.random.Generator, n: int, m: int, fpr: float, tpr: float, drop: float) -> tuple:
    """Least favourable for the upper limit: a share ``drop`` of the positives just above q, the rest of
    ``tpr`` above every negative: a quantile rank above q loses ``drop``."""
    q, u = 1.0 - fpr, rng.random(n)
    pos = np.where(u < drop, q + 1e-4 * rng.random(n), np.where(u < tpr, 2.0, -1.0))
    return pos, rng.random(m)


def test_each_limit_holds_its_share_on_least_favourable_games() -> None:
    """On the games where the union bound is nearly tight each limit still misses in at most its share
    (2.5 %, + 2 s.e.); a quantile end taken one rank too far, or the whole share spent on the hits,
    would show here."""
    repeats, n, fpr, tpr = 1500, 640, 0.01, 0.3
    rng = np.random.default_rng(11)
    low_miss = sum(
        tpr_interval(*flat_below(rng, n, n, fpr, tpr, 0.6), fpr, 0.025, 0.0)[1] > tpr for _ in range(repeats)
    )
    high_miss = sum(
        tpr_interval(*flat_above(rng, n, n, fpr, tpr, 0.25), fpr, 0.0, 0.025)[2] < tpr for _ in range(repeats)
    )
    assert low_miss / repeats <= mc_limit(0.025, repeats)
    assert high_miss / repeats <= mc_limit(0.025, repeats)
    assert low_miss > 0 and high_miss > 0  # the games do reach the limits' edges


def test_ties_count_strictly_above_the_lower_end() -> None:
    """Negatives 0 or 1 (P(1) = 2 % > f = 1 %): no threshold at or below 1 keeps FPR ≤ 1 %, so the true
    TPR is P(Y > 1) = 0.3, although 90 % of the positives score ≥ 1. Counting Y ≥ X_(j) would claim
    about 0.9 as a lower limit."""
    rng = np.random.default_rng(2)
    misses = 0
    for _ in range(200):
        neg = (rng.random(1600) < 0.02).astype(float)
        pos = rng.choice([0.0, 1.0, 2.0], size=1600, p=[0.1, 0.6, 0.3])
        value, low, high, achieved = tpr_at_fpr(pos, neg, 0.01, 0.95)
        misses += not low <= 0.3 <= high
        assert achieved <= 0.01
    assert misses <= 200 * 0.05


def test_too_few_negatives_give_a_lower_limit_of_zero() -> None:
    """At FPR 0.1 % no order statistic of 1600 negatives is above the quantile with probability 98.75 %
    ((1 − f)^1600 ≈ 0.2), so no threshold is known to keep FPR ≤ 0.1 %; 6000 negatives suffice."""
    rng = np.random.default_rng(4)
    pos = rng.normal(4.0, 1.0, 1600)
    assert tpr_at_fpr(pos, rng.normal(size=1600), 0.001, 0.95)[1] == 0.0
    value, low, high, _ = tpr_at_fpr(pos, rng.normal(size=6000), 0.001, 0.95)
    assert 0.3 < low < value < high
