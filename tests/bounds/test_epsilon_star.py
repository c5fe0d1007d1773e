"""Epsilon* (Negoescu et al.): closed forms for normal scores, Eq. 7 by hand, transform, properties."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpaudit.bounds import epsilon_star as es
from dpaudit.bounds.accountants import gaussian_epsilon
from dpaudit.bounds.epsilon_star import null as es_null


def test_default_delta():
    assert es.default_delta(1000) == pytest.approx(1 / (1000 * math.log(1000)))
    with pytest.raises(ValueError, match="n_members"):
        es.default_delta(1)


@pytest.mark.parametrize(("mu", "delta"), [(0.25, 1e-3), (0.5, 1e-3), (0.5, 1e-4)])
def test_gaussian_supremum_is_analytic_gaussian_epsilon(mu, delta):
    # With equal variances the threshold tests are Neyman–Pearson optimal, so the supremum of Eq. 7 is
    # the ε(δ) of the Gaussian mechanism with sensitivity/σ = μ (Balle & Wang 2018), when the optimal
    # rates lie inside (δ, 1 − δ).
    value, _, t, eta = es.epsilon_star_gaussian(0.0, 1.0, mu, 1.0, delta)
    assert value == pytest.approx(gaussian_epsilon(mu, delta), rel=1e-6)
    assert delta < t < 1 - delta and delta < eta < 1 - delta


def test_gaussian_supremum_on_the_rate_boundary():
    # Well-separated normals: the supremum is reached as a rate falls to δ (App. B's band edge):
    # ε* = log((1 − δ − Φ(z_{1−δ} − μ)) / δ), below the unrestricted ε(δ).
    mu, delta = 2.0, 1e-3
    expected = math.log((1 - delta - norm.cdf(norm.ppf(1 - delta) - mu)) / delta)
    value, _, t, eta = es.epsilon_star_gaussian(0.0, 1.0, mu, 1.0, delta)
    assert value == pytest.approx(expected, rel=1e-6)
    # Equal variances make the two tails symmetric: the supremum sits where η or t reaches δ.
    assert min(t, eta) == pytest.approx(delta, rel=1e-6)
    assert value < gaussian_epsilon(mu, delta)


def test_parametric_on_normal_losses_matches_closed_form():
    rng = np.random.default_rng(0)
    members, nonmembers = rng.normal(0.0, 1.0, 20_000), rng.normal(0.5, 1.0, 20_000)
    delta = 1e-3
    result = es.epsilon_star_parametric(members, nonmembers, delta, transform=False)
    assert result.method == "parametric" and result.ks_pvalue > 0.01
    assert result.epsilon_star == pytest.approx(gaussian_epsilon(0.5, delta), abs=0.1)
    # Members (low losses) are rejected below the threshold: t is the non-member share below it.
    assert result.fpr == pytest.approx(norm.cdf(result.threshold, nonmembers.mean(), nonmembers.std()))


def test_identical_losses_give_zero():
    rng = np.random.default_rng(1)
    losses = rng.gamma(2.0, 5.0, 500)
    assert es.epsilon_star_empirical(losses, losses.copy()).epsilon_star == 0.0
    assert es.epsilon_star_parametric(losses, losses.copy()).epsilon_star == pytest.approx(0.0, abs=1e-9)
    constant = np.full(50, 0.3)
    assert es.epsilon_star_parametric(constant, constant).epsilon_star == 0.0


def test_identical_distributions_parametric_near_zero():
    # Same distribution, independent samples: the parametric estimate is close to 0 and closer than the
    # empirical one (Negoescu et al. App. B, Fig. 4).
    rng = np.random.default_rng(2)
    members, nonmembers = rng.normal(size=20_000), rng.normal(size=20_000)
    parametric = es.epsilon_star_parametric(members, nonmembers).epsilon_star
    empirical = es.epsilon_star_empirical(members, nonmembers).epsilon_star
    assert 0.0 <= parametric < 0.25
    assert parametric < empirical


def test_monotone_in_separation():
    rng = np.random.default_rng(3)
    members, base = rng.normal(size=5000), rng.normal(size=5000)
    for estimator in (es.epsilon_star_parametric, es.epsilon_star_empirical):
        values = [estimator(members, base + shift).epsilon_star for shift in (0.0, 0.5, 1.0, 2.0, 3.0)]
        assert all(a < b for a, b in itertools.pairwise(values)), values


def test_empirical_matches_eq7_by_hand():
    members = np.array([0.1, 0.4, 0.5, 0.9, 1.2])
    nonmembers = np.array([0.3, 0.8, 1.0, 1.5, 2.0, 2.5])
    delta = 0.01
    best = 0.0
    for tau in np.concatenate([members, nonmembers]):
        t = np.mean(nonmembers <= tau)
        eta = np.mean(members > tau)
        if 0 < t < 1 and 0 < eta < 1:
            ratios = [
                (1 - delta - eta) / t,
                (1 - delta - t) / eta,
                (eta - delta) / (1 - t),
                (t - delta) / (1 - eta),
                1,
            ]
            best = max(best, math.log(max(ratios)))
    result = es.epsilon_star_empirical(members, nonmembers, delta, rate_floor=0.0)
    assert result.epsilon_star == pytest.approx(best)
    assert best == pytest.approx(math.log((1 - delta - 2 / 5) / (1 / 6)))  # τ = 0.5: t = 1/6, η = 2/5
    assert result.threshold == 0.5


def test_separated_groups_band_rule_drops_every_threshold_floor_variant_scores_high():
    # No threshold keeps both rates inside App. B's band when the groups do not overlap: the paper's
    # band rule (default) drops them all and scores 0; the named "floor" variant floors the
    # denominators instead and gives the largest score, log((1 − δ)/floor).
    rng = np.random.default_rng(7)
    members, nonmembers = rng.normal(0.0, 1.0, 2000), rng.normal(8.0, 1.0, 2000)
    delta = es.default_delta(2000)
    assert es.epsilon_star_parametric(members, nonmembers, transform=False).epsilon_star == 0.0
    assert es.epsilon_star_empirical(members, nonmembers).epsilon_star == 0.0
    parametric = es.epsilon_star_parametric(members, nonmembers, transform=False, variant="floor")
    assert parametric.variant == "floor"
    assert parametric.epsilon_star == pytest.approx(math.log((1 - 2 * delta) / delta), abs=0.05)
    empirical = es.epsilon_star_empirical(members, nonmembers, variant="floor")
    assert empirical.epsilon_star == pytest.approx(math.log((1 - delta) / 0.001), rel=1e-6)
    overlapping = es.epsilon_star_empirical(members, nonmembers - 4.0).epsilon_star
    assert 0.0 < overlapping < empirical.epsilon_star


def test_band_rule_only_uses_thresholds_inside_the_band():
    rng = np.random.default_rng(8)
    members, nonmembers = rng.normal(0.0, 1.0, 300), rng.normal(1.0, 1.0, 300)
    band = es.epsilon_star_empirical(members, nonmembers, 1e-3)
    assert 0.001 < band.fpr < 0.999 and 0.001 < band.fnr < 0.999
    floor = es.epsilon_star_empirical(members, nonmembers, 1e-3, variant="floor")
    assert floor.epsilon_star >= band.epsilon_star  # it keeps more thresholds
    with pytest.raises(ValueError, match="variant"):
        es.epsilon_star_empirical(members, nonmembers, 1e-3, variant="clip")


@pytest.mark.parametrize("method", ["empirical", "parametric"])
@pytest.mark.parametrize("variant", ["band", "floor"])
def test_null_is_the_estimator_on_label_permutations(method, variant):
    """The vectorised null equals the estimator recomputed on each relabelled sample (same masks)."""
    rng = np.random.default_rng(4)
    members, nonmembers = rng.normal(0, 1, 150), np.round(rng.normal(0.3, 1.2, 120), 1)  # ties too
    null = es.epsilon_star_null(members, nonmembers, 1e-3, method, variant, permutations=25, seed=7)
    pooled = np.concatenate([members, nonmembers])
    masks = es_null._permuted_member_masks(150, 270, 25, np.random.default_rng([7, 1]))
    assert np.all(masks.sum(axis=1) == 150)  # group sizes kept
    estimator = es.epsilon_star_parametric if method == "parametric" else es.epsilon_star_empirical
    expected = [estimator(pooled[k], pooled[~k], 1e-3, variant=variant).epsilon_star for k in masks]
    np.testing.assert_allclose(null, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["empirical", "parametric"])
def test_null_level_and_bootstrap_spread(method):
    rng = np.random.default_rng(9)
    same = es.epsilon_star_with_null(
        rng.normal(0, 1, 400), rng.normal(0, 1, 400), 1e-3, method=method, n_bootstrap=60
    )
    assert same.spread_low <= same.spread_high and same.spread_level == 0.95
    assert 0.0 < same.null_mean <= same.null_high  # identical distributions: far from 0 at finite n
    assert same.null_permutations == es.NULL_PERMUTATIONS and same.null_quantile == 0.95
    assert not same.above_null and same.null_pvalue > 0.05
    apart = es.epsilon_star_with_null(
        rng.normal(0, 1, 400), rng.normal(2.5, 1, 400), 1e-3, method=method, n_bootstrap=0
    )
    assert apart.above_null and apart.epsilon_star > apart.null_high
    assert apart.null_pvalue == pytest.approx(1 / (es.NULL_PERMUTATIONS + 1))  # no permutation reaches it
    assert math.isnan(apart.spread_low) and math.isnan(apart.spread_level)  # no bootstrap asked for


def test_above_null_false_alarm_rate_on_identical_distributions():
    """On one distribution, "above the null 95th percentile" happens about 5 % of the time."""
    rng = np.random.default_rng(11)
    flags = [
        es.epsilon_star_with_null(rng.normal(size=200), rng.normal(size=200), method="empirical",
                                  n_bootstrap=0, seed=r).above_null
        for r in range(100)
    ]
    assert np.mean(flags) <= 0.12  # 5 % nominal; 12 % is beyond 3 binomial sd at 100 repeats


def test_null_critical_rank_is_the_monte_carlo_test_critical_value():
    assert es.null_critical_rank(100, 0.95) == 96  # ⌈0.95 · 101⌉: P(exceed) = 5/101 under the null
    assert es.null_critical_rank(19, 0.95) == 19  # the maximum of 19: P(exceed) = 1/20
    assert es.null_critical_rank(999, 0.99) == 990
    with pytest.raises(ValueError, match="permutations=18 is too few .* need at least 19"):
        es.null_critical_rank(18, 0.95)
    rng = np.random.default_rng(2)
    members, nonmembers = rng.normal(size=100), rng.normal(size=100)
    star = es.epsilon_star_with_null(members, nonmembers, 0.01, "empirical", n_bootstrap=0, seed=3)
    null = es.epsilon_star_null(members, nonmembers, 0.01, "empirical", seed=3)
    assert star.null_high == np.sort(null)[95] and star.null_mean == pytest.approx(null.mean())
    assert star.null_pvalue == pytest.approx((1 + np.sum(null >= star.epsilon_star)) / 101)


def test_null_rejects_bad_arguments():
    members, nonmembers = np.arange(10.0), np.arange(10.0) + 0.5
    with pytest.raises(ValueError, match="permutations"):
        es.epsilon_star_null(members, nonmembers, 0.01, permutations=0)
    with pytest.raises(ValueError, match="method"):
        es.epsilon_star_null(members, nonmembers, 0.01, method="lira")
    with pytest.raises(ValueError, match="null_quantile"):
        es.epsilon_star_with_null(members, nonmembers, 0.01, null_quantile=1.0)
    with pytest.raises(ValueError, match="too few"):
        es.epsilon_star_with_null(members, nonmembers, 0.01, permutations=10)
    with pytest.raises(ValueError, match="n_bootstrap"):
        es.epsilon_star_with_null(members, nonmembers, 0.01, n_bootstrap=-1)


def test_logit_transform_is_increasing_and_follows_app_b():
    members, nonmembers = np.array([0.0, 1.0, 2.0]), np.array([3.0, 4.0])
    tm, tn = es.logit_transform(members, nonmembers)
    x = np.concatenate([members, nonmembers]) / 4.0 + 1.0  # normalise, shift
    p = np.exp(-x)
    np.testing.assert_allclose(np.concatenate([tm, tn]), -(np.log(p) - np.log(1 - p)))
    assert np.all(np.diff(np.concatenate([tm, tn])) > 0)


def test_logit_loss_binary_and_multiclass():
    p = np.array([0.9, 0.2])
    y = np.array([1, 0])
    expected = (1 - 2 * y) * (np.log(p) - np.log(1 - p))
    np.testing.assert_allclose(es.logit_loss(p, y), expected)
    np.testing.assert_allclose(es.logit_loss(p[:, None], y), expected)
    # Two-column softmax output gives the same loss as the binary form.
    np.testing.assert_allclose(es.logit_loss(np.stack([1 - p, p], axis=1), y), expected)
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    labels = np.array([0, 2])
    np.testing.assert_allclose(es.logit_loss(probs, labels), [-math.log(0.7 / 0.3), -math.log(0.8 / 0.2)])
    np.testing.assert_allclose(es.logit_loss(probs, np.eye(3)[labels]), es.logit_loss(probs, labels))
    assert np.all(np.isfinite(es.logit_loss(np.array([0.0, 1.0]), np.array([1, 0]))))
    with pytest.raises(ValueError, match="labels"):
        es.logit_loss(probs, np.array([0, 3]))


def test_bad_losses():
    with pytest.raises(ValueError, match="member_losses"):
        es.epsilon_star_parametric(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="nonmember_losses"):
        es.epsilon_star_empirical(np.array([1.0, 2.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="delta"):
        es.epsilon_star_empirical(np.array([1.0, 2.0]), np.array([1.0, 3.0]), delta=0.7)


losses = st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False), min_size=2, max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=losses, nonmembers=losses, delta=st.floats(1e-6, 0.2))
def test_never_negative_and_finite(members, nonmembers, delta):
    for estimator in (es.epsilon_star_parametric, es.epsilon_star_empirical):
        result = estimator(np.array(members), np.array(nonmembers), delta)
        assert np.isfinite(result.epsilon_star)
        assert result.epsilon_star >= 0.0
    parametric = es.epsilon_star_parametric(np.array(members), np.array(nonmembers), delta)
    assert parametric.epsilon_star <= math.log(1 / delta)  # rates restricted to (δ, 1 − δ)
