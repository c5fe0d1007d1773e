"""Empirical ε lower bounds: Nasr et al.'s numbers, Clopper–Pearson coverage, valid threshold sweeps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpaudit.bounds import empirical as emp
from dpaudit.bounds.accountants import gaussian_epsilon


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_nasr_perfect_attack_caps_at_5_60(delta):
    # Nasr et al. §III-C: 1000 trials per class, no errors, 95% Clopper–Pearson (two-sided, so each
    # limit at 0.975 — the joint 95 % of dpaudit's convention) → ε ≥ 5.60 at most; δ = 0 allowed.
    bound = emp.epsilon_lower_from_counts(0, 0, 1000, 1000, delta=delta, confidence=0.95)
    assert round(bound.epsilon_lower, 2) == 5.60
    assert bound.fpr_upper == pytest.approx(1 - 0.025 ** (1 / 1000))  # CP upper limit for k = 0
    assert math.isinf(bound.epsilon_point)
    assert bound.confidence == 0.95 and bound.limit_level == pytest.approx(0.975)
    # A caller guaranteeing joint 0.90 only may ask for the per-limit level directly.
    loose = emp.epsilon_lower_from_counts(0, 0, 1000, 1000, delta=1e-5, confidence=0.90, per_limit_level=0.95)
    limit = 1 - 0.05 ** (1 / 1000)
    assert loose.epsilon_lower == pytest.approx(math.log((1 - 1e-5 - limit) / limit))


def test_eq4_point_estimate():
    # ε = max(log((1−δ−FPR)/FNR), log((1−δ−FNR)/FPR)) with FPR = 0.1, FNR = 0.2.
    bound = emp.epsilon_lower_from_counts(10, 20, 100, 100, delta=0.01)
    assert bound.epsilon_point == pytest.approx(math.log((1 - 0.01 - 0.2) / 0.1))
    assert bound.fpr == 0.1 and bound.fnr == 0.2


def test_chance_level_counts_give_zero():
    for fp, fn in [(500, 500), (300, 700), (1000, 0), (0, 1000)]:
        bound = emp.epsilon_lower_from_counts(fp, fn, 1000, 1000, delta=1e-5)
        assert bound.epsilon_lower == 0.0
    assert emp.epsilon_lower_from_counts(500, 500, 1000, 1000, delta=1e-5).epsilon_point == 0.0


def test_bound_never_exceeds_point_estimate():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n_neg, n_pos = rng.integers(1, 400, size=2)
        fp, fn = rng.integers(0, n_neg + 1), rng.integers(0, n_pos + 1)
        for confidence in (0.8, 0.95):
            b = emp.epsilon_lower_from_counts(int(fp), int(fn), int(n_neg), int(n_pos), 1e-5, confidence)
            assert 0.0 <= b.epsilon_lower <= b.epsilon_point
            assert b.fpr <= b.fpr_upper and b.fnr <= b.fnr_upper


def test_clopper_pearson_coverage():
    # The one-sided 95% upper limit must cover the true rate in ≥ 95% of binomial draws.
    rng = np.random.default_rng(1)
    reps = 20_000
    for n, p in [(50, 0.1), (200, 0.3), (1000, 0.02)]:
        k = rng.binomial(n, p, reps)
        miss = np.mean(emp.clopper_pearson_upper(k, n, 0.95) < p)
        assert miss <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / reps)
    assert emp.clopper_pearson_upper(5, 5, 0.95) == 1.0


@pytest.mark.parametrize(("mu", "delta"), [(0.5, 0.01), (1.0, 0.01)])
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_gaussian_mechanism_coverage(mu, delta, confidence):
    """Attack on a Gaussian mechanism (scores N(0,1) on D′, N(μ,1) on D) at its best threshold.

    The true ε(δ) is the analytic Gaussian curve (Balle & Wang 2018); the lower bound may exceed it in
    at most 1 − confidence (joint) of the repetitions.
    """
    true_eps = gaussian_epsilon(mu, delta)
    tau = np.linspace(-6, 6, 24001)
    per_threshold = emp.epsilon_from_rates(norm.sf(tau), norm.cdf(tau - mu), delta)
    best = int(np.argmax(per_threshold))
    assert per_threshold[best] == pytest.approx(true_eps, rel=1e-3)  # a threshold test attains ε(δ)
    fpr, fnr = norm.sf(tau[best]), norm.cdf(tau[best] - mu)
    rng = np.random.default_rng(2)
    reps, n = 20_000, 1000
    fp, fn = rng.binomial(n, fpr, reps), rng.binomial(n, fnr, reps)
    level = 1 - (1 - confidence) / 2
    bounds = emp.epsilon_from_rates(
        emp.clopper_pearson_upper(fp, n, level), emp.clopper_pearson_upper(fn, n, level), delta
    )
    first = emp.epsilon_lower_from_counts(int(fp[0]), int(fn[0]), n, n, delta, confidence)
    assert first.epsilon_lower == pytest.approx(bounds[0])  # the vectorised path is the public one
    allowed = 1.0 - first.confidence
    assert np.mean(bounds > true_eps) <= allowed + 4 * math.sqrt(allowed * (1 - allowed) / reps)
    assert np.mean(bounds) > 0.15 * true_eps  # and the bound is not vacuous


def test_erlingsson_advantage_formulas():
    assert emp.advantage_from_epsilon(1.0, 1e-5) == pytest.approx(1 - math.exp(-1) + 1e-5 * math.exp(-1))
    assert emp.epsilon_from_advantage(0.5, 0.0) == pytest.approx(math.log(2))
    for eps in (0.1, 1.0, 3.0):
        assert emp.epsilon_from_advantage(emp.advantage_from_epsilon(eps, 1e-5), 1e-5) == pytest.approx(eps)
    assert emp.epsilon_from_advantage(0.0, 1e-5) == 0.0
    assert emp.epsilon_from_advantage(1.0, 1e-5) == math.inf


def test_bernau_empirical_epsilons():
    assert emp.epsilon_from_posterior_belief(0.9) == pytest.approx(math.log(9))
    assert emp.epsilon_from_posterior_belief(0.4) == 0.0
    assert emp.di_advantage_from_wins(614, 1000) == pytest.approx(0.228)
    # Inverse of Thm. 2: the advantage bound ρα = 0.2289 at δ = 1e-3 maps back to ε = ln 9.
    assert emp.epsilon_from_di_advantage(0.22887916402, 1e-3) == pytest.approx(math.log(9), rel=1e-9)
    assert emp.epsilon_from_di_advantage(-0.1, 1e-3) == 0.0


def test_null_scores_default_method_is_valid_and_naive_overclaims():
    rng = np.random.default_rng(3)
    reps, n = 300, 100
    shares = {}
    for method in ("split", "naive"):
        positive = [
            emp.epsilon_lower_from_scores(
                rng.normal(size=n), rng.normal(size=n), 1e-5, method=method, seed=r
            ).epsilon_lower
            > 0
            for r in range(reps)
        ]
        shares[method] = float(np.mean(positive))
    # Default (split) at joint 95 %: zero in ≥ 95 % of repetitions.
    assert shares["split"] <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / reps)
    assert shares["naive"] > shares["split"]


def test_threshold_sweep_methods_on_separated_scores():
    rng = np.random.default_rng(4)
    pos, neg = rng.normal(2.0, 1.0, 1000), rng.normal(0.0, 1.0, 1000)
    true_eps = gaussian_epsilon(2.0, 1e-3)
    split = emp.epsilon_lower_from_scores(pos, neg, 1e-3)
    assert split.method == "split" and not split.overclaims
    assert split.positives == 500 and split.negatives == 500  # counted on the held-out half
    bonf = emp.epsilon_lower_from_scores(pos, neg, 1e-3, method="bonferroni")
    assert bonf.limit_level == pytest.approx(1 - 0.05 / (2 * bonf.n_thresholds))
    assert bonf.confidence == split.confidence == 0.95
    naive = emp.epsilon_lower_from_scores(pos, neg, 1e-3, method="naive")
    assert naive.overclaims
    for result in (split, bonf, naive):
        assert 1.0 < result.epsilon_lower < true_eps
        tpr = 1 - result.fn / result.positives
        assert result.advantage == pytest.approx(tpr - result.fp / result.negatives)
    assert naive.epsilon_lower >= bonf.epsilon_lower  # same trials, narrower intervals
    # The ε-optimal threshold sits in the tail (few false positives), so its advantage is below the best
    # possible 2Φ(μ/2) − 1 = 0.68 of the threshold at μ/2.
    assert 0.0 < split.advantage < 2 * norm.cdf(1.0) - 1


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"fp": -1}, "fp"),
        ({"fp": 11}, "fp"),
        ({"fn": 2.5}, "fn"),
        ({"delta": 1.0}, "delta"),
        ({"confidence": 1.0}, "confidence"),
        ({"negatives": 0}, "negatives"),
    ],
)
def test_bad_counts(kwargs, word):
    args = {"fp": 1, "fn": 1, "negatives": 10, "positives": 10, "delta": 1e-5, "confidence": 0.95} | kwargs
    with pytest.raises(ValueError, match=word):
        emp.epsilon_lower_from_counts(**args)


def test_bad_scores():
    with pytest.raises(ValueError, match="positive_scores"):
        emp.epsilon_lower_from_scores([1.0, np.nan], [0.0, 1.0], 1e-5)
    with pytest.raises(ValueError, match="method"):
        emp.epsilon_lower_from_scores([1.0, 2.0], [0.0, 1.0], 1e-5, method="best")
