"""Gradient canaries (Nasr et al. 2021, Crafter 4 / Distinguisher 3), the simulator and the PLD oracle."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from dpaudit.attacks.gradient_canary import (
    compare_simulation_with_pld,
    distinguisher3_literal_scores,
    distinguisher3_scores,
    gaussian_tradeoff_tpr_at_fpr,
    mc_tpr_at_fpr,
    pld_tradeoff_tpr_at_fpr,
    simulate_subsampled_gaussian_scores,
)
from dpaudit.training.gradient_canary import (
    canary_gradient,
    canary_projection,
    canary_signs,
    smallest_update_coordinates,
)

# ---------------------------------------------------------------------------------------------
# Crafter 4
# ---------------------------------------------------------------------------------------------


def test_smallest_update_coordinates_orders_and_breaks_ties_by_index():
    sums = np.array([0.5, 0.0, 3.0, 0.0, 0.1, 0.0])
    np.testing.assert_array_equal(smallest_update_coordinates(sums, 4), [1, 3, 5, 4])
    # learning rate 0 (Crafter 5): every update is zero, the choice is still deterministic
    np.testing.assert_array_equal(smallest_update_coordinates(np.zeros(10), 3), [0, 1, 2])
    # one row per trial
    rows = np.array([[3.0, 1.0, 2.0], [1.0, 2.0, 0.0]])
    np.testing.assert_array_equal(smallest_update_coordinates(rows, 2), [[1, 2], [2, 0]])
    with pytest.raises(ValueError, match="count must be in 1..6"):
        smallest_update_coordinates(sums, 7)


@pytest.mark.parametrize("count", [1, 2, 20, 200])
@pytest.mark.parametrize("seed", [None, 3])
def test_canary_gradient_has_norm_c(count, seed):
    coordinates = np.random.default_rng(0).choice(1000, size=count, replace=False)
    gradient = canary_gradient(1000, coordinates, 0.7, seed=seed)
    assert np.linalg.norm(gradient) == pytest.approx(0.7, rel=1e-12)
    assert np.count_nonzero(gradient) == count
    np.testing.assert_allclose(np.abs(gradient[coordinates]), 0.7 / np.sqrt(count))
    # clipping at C leaves it unchanged
    assert min(1.0, 0.7 / np.linalg.norm(gradient)) == pytest.approx(1.0)


def test_canary_signs_alternate_as_in_crafter_4_or_are_seeded():
    np.testing.assert_array_equal(canary_signs(5), [1, -1, 1, -1, 1])
    np.testing.assert_array_equal(canary_signs(50, seed=1), canary_signs(50, seed=1))
    assert set(np.unique(canary_signs(50, seed=1))) == {-1.0, 1.0}
    gradient = canary_gradient(6, np.array([4, 0, 2]), 3.0)
    np.testing.assert_allclose(gradient, [-np.sqrt(3), 0, np.sqrt(3), 0, np.sqrt(3), 0])


def test_canary_gradient_rejects_bad_coordinates():
    with pytest.raises(ValueError, match="distinct"):
        canary_gradient(5, np.array([1, 1]), 1.0)
    with pytest.raises(ValueError, match="0..4"):
        canary_gradient(5, np.array([5]), 1.0)


def test_projection_recovers_the_canary_norm():
    coordinates = np.array([7, 2, 9, 4])
    signs = canary_signs(4)
    gradient = canary_gradient(10, coordinates, 1.5)
    assert canary_projection(gradient[coordinates], signs) == pytest.approx(1.5)


# ---------------------------------------------------------------------------------------------
# Distinguisher 3
# ---------------------------------------------------------------------------------------------


def test_distinguisher3_matches_the_spec_parametrisation():
    """Σ log[(1−q) + q exp((μ D − μ²/2)/v)], D = √(2n) d, μ = √(2n) C, v = 2n σ² (specs/instantiation.md)."""
    rng = np.random.default_rng(1)
    two_n, c, sigma, q = 20, 1.3, 0.9, 0.2
    values = rng.normal(size=(5, 8, two_n)) * sigma
    signs = canary_signs(two_n)
    dots = canary_projection(values, signs)
    sign_aligned = values @ signs
    mu, v = np.sqrt(two_n) * c, two_n * sigma**2
    spec = np.log((1 - q) + q * np.exp((mu * sign_aligned - mu**2 / 2) / v)).sum(axis=1)
    ours = distinguisher3_scores(dots, sampling_rate=q, noise_std=sigma, canary_norm=c)
    np.testing.assert_allclose(ours, spec, rtol=1e-10)


def test_distinguisher3_is_stable_at_extremes():
    d = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    scores = distinguisher3_scores(d, sampling_rate=0.1, noise_std=1e-8, canary_norm=1.0)
    assert np.all(np.isfinite(scores))
    assert scores[1] == pytest.approx(3 * np.log(0.9))
    assert scores[0] == pytest.approx(2 * (np.log(0.1) + 0.5e16) + np.log(0.9), rel=1e-12)
    # q = 1: the plain Gaussian log-likelihood ratio, linear in Σ d
    full = distinguisher3_scores(d, sampling_rate=1.0, noise_std=2.0, canary_norm=1.0)
    np.testing.assert_allclose(full, (d.sum(axis=1) - 1.5) / 4.0)
    with pytest.raises(ValueError, match="noise_std"):
        distinguisher3_scores(d, sampling_rate=0.1, noise_std=0.0, canary_norm=1.0)


def test_literal_distinguisher_is_eq6_as_printed():
    d = np.array([[0.5, 2.0]])
    two_n, c, sigma = 4, 1.0, 0.8
    n = two_n / 2
    eq6 = np.exp(-((d - c) ** 2) / (2 * sigma**2)) / (2 * np.sqrt(np.pi * n * sigma**2))
    literal = distinguisher3_literal_scores(d, num_coordinates=two_n, clip_norm=c, noise_std=sigma)
    assert literal[0] == pytest.approx(np.log(eq6).sum())


def test_noiseless_limit_separates_perfectly():
    """z → 0: every trial of D′ in which the canary was sampled scores above every trial of D."""
    q, steps = 0.1, 100
    scores_d, scores_dp = simulate_subsampled_gaussian_scores(
        5_000, sampling_rate=q, steps=steps, noise_multiplier=1e-6, seed=2
    )
    threshold = scores_d.max()
    tpr = np.mean(scores_dp > threshold)
    assert tpr == pytest.approx(1 - (1 - q) ** steps, abs=4e-4)  # only canary-free D′ runs are missed
    # with q = 1 the canary is in every step: perfect separation, which reaches the CP cap
    scores_d, scores_dp = simulate_subsampled_gaussian_scores(
        2_000, sampling_rate=1.0, steps=5, noise_multiplier=1e-6, seed=3
    )
    assert scores_dp.min() > scores_d.max()


# ---------------------------------------------------------------------------------------------
# Simulation vs exact trade-offs
# ---------------------------------------------------------------------------------------------


def test_simulation_is_reproducible_and_chunk_sized():
    a = simulate_subsampled_gaussian_scores(1_000, sampling_rate=0.1, steps=10, noise_multiplier=1.0, seed=4)
    b = simulate_subsampled_gaussian_scores(1_000, sampling_rate=0.1, steps=10, noise_multiplier=1.0, seed=4)
    c = simulate_subsampled_gaussian_scores(
        1_000, sampling_rate=0.1, steps=10, noise_multiplier=1.0, seed=4, chunk=300
    )
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert c[0].shape == (1_000,) and c[1].shape == (1_000,)


def test_pld_oracle_with_q_one_is_the_gaussian_tradeoff():
    fprs = np.array([1e-3, 1e-2, 0.05, 0.2])
    oracle = pld_tradeoff_tpr_at_fpr(fprs, sampling_rate=1.0, steps=25, noise_multiplier=5.0)
    np.testing.assert_allclose(oracle, gaussian_tradeoff_tpr_at_fpr(fprs, 1.0), atol=2e-4)


@pytest.mark.parametrize("num_trials", [2_000, 20_000])
def test_distinguisher3_with_q_one_approaches_the_gaussian_tradeoff(num_trials):
    """Issue 13: with q = 1, Distinguisher 3's ROC is the Gaussian mechanism's Φ(Φ⁻¹(α) + √T/z)."""
    steps, z = 100, 10.0
    scores_d, scores_dp = simulate_subsampled_gaussian_scores(
        num_trials, sampling_rate=1.0, steps=steps, noise_multiplier=z, seed=5
    )
    for fpr in (0.01, 0.05, 0.2):
        exact = float(gaussian_tradeoff_tpr_at_fpr(fpr, np.sqrt(steps) / z))
        tpr = mc_tpr_at_fpr(scores_d, scores_dp, fpr)
        # binomial error of the TPR plus the threshold's (slope ≤ 10 on this range), 4 standard errors
        se = np.sqrt(exact * (1 - exact) / num_trials + 10**2 * fpr * (1 - fpr) / num_trials)
        assert abs(tpr - exact) < 4 * se


@pytest.mark.parametrize(("q", "z"), [(0.1, 1.0), (0.1, 0.6), (0.5, 2.0)])
def test_simulated_roc_agrees_with_the_pld_oracle(q, z):
    steps = 50
    scores_d, scores_dp = simulate_subsampled_gaussian_scores(
        20_000, sampling_rate=q, steps=steps, noise_multiplier=z, seed=6
    )
    rows = compare_simulation_with_pld(
        scores_d, scores_dp, [0.01, 0.05, 0.2], sampling_rate=q, steps=steps, noise_multiplier=z
    )
    for row in rows:
        assert abs(row.z_score) < 4, row
    # the add/remove envelope a DP accountant reports is never below the exact (REMOVE) curve
    envelope = pld_tradeoff_tpr_at_fpr(
        np.array([0.01, 0.05, 0.2]), sampling_rate=q, steps=steps, noise_multiplier=z, direction="both"
    )
    for row, upper in zip(rows, envelope, strict=True):
        assert upper >= row.tpr_pld - 1e-6  # both are grid searches over ε
        assert row.tpr_mc <= upper + 4 * row.std_error


def test_no_test_beats_the_oracle_not_even_the_literal_one():
    """Any statistic's ROC lies below the exact trade-off; the literal Eq. 6 test is far below it."""
    q, steps, z, n = 0.1, 50, 0.8, 20_000
    rng = np.random.default_rng(7)
    two_n = 4
    noise = lambda: rng.normal(scale=z, size=(n, steps, two_n))  # noqa: E731
    signs = canary_signs(two_n)
    canary = signs / np.sqrt(two_n)  # C = 1
    g_d = noise()
    g_dp = noise() + (rng.random((n, steps, 1)) < q) * canary
    kwargs = {"num_coordinates": two_n, "clip_norm": 1.0, "noise_std": z}
    literal_d = distinguisher3_literal_scores(g_d @ signs, **kwargs)
    literal_dp = distinguisher3_literal_scores(g_dp @ signs, **kwargs)
    lr_d = distinguisher3_scores(canary_projection(g_d, signs), sampling_rate=q, noise_std=z, canary_norm=1.0)
    lr_dp = distinguisher3_scores(
        canary_projection(g_dp, signs), sampling_rate=q, noise_std=z, canary_norm=1.0
    )
    fpr = 0.01
    oracle = float(pld_tradeoff_tpr_at_fpr(fpr, sampling_rate=q, steps=steps, noise_multiplier=z))
    for scores_d, scores_dp in ((literal_d, literal_dp), (lr_d, lr_dp)):
        hits = int(np.sum(scores_dp > np.sort(scores_d)[::-1][int(fpr * n)]))
        assert binomtest(hits, n).proportion_ci(0.9999).low <= oracle
    assert mc_tpr_at_fpr(literal_d, literal_dp, fpr) < mc_tpr_at_fpr(lr_d, lr_dp, fpr) - 0.05


def test_the_statistic_is_the_exact_log_likelihood_ratio():
    """If Λ = log dQ/dP then E_Q[e^{−Λ}] = 1 and E_Q[1{Λ > τ} e^{−Λ}] = P(Λ > τ) (importance sampling)."""
    q, steps, z, n = 0.1, 50, 1.0, 20_000
    scores_d, scores_dp = simulate_subsampled_gaussian_scores(
        n, sampling_rate=q, steps=steps, noise_multiplier=z, seed=8
    )
    weights = np.exp(-scores_dp)
    assert abs(weights.mean() - 1) < 4 * weights.std() / np.sqrt(n)
    tau = np.quantile(scores_d, 0.95)
    importance = weights * (scores_dp > tau)
    assert abs(importance.mean() - 0.05) < 4 * np.hypot(importance.std(), np.sqrt(0.05 * 0.95)) / np.sqrt(n)
