"""A_DI,Gau (Bernau Algorithm 1, Lemma 1) on the trainer: closed forms and the Gaussian advantage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.attacks import di
from dpaudit.bounds.accountants import calibrate_noise_multiplier, compute_epsilon
from dpaudit.bounds.estimators import di_beliefs
from dpaudit.experiments.identifiability.bounds import rho_alpha_rdp_for
from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd.difference import di_observer


def test_llr_equals_gaussian_log_density_ratio() -> None:
    """The recorded form ⟨ξ,Δ⟩/σ ± ‖Δ‖²/(2σ²) equals log N(r; μ_D, σ²I) − log N(r; μ_D′, σ²I)."""
    rng = np.random.default_rng(0)
    dim, sigma = 7, 1.3
    mu_d, delta = rng.normal(size=dim), rng.normal(size=dim)
    mu_dp = mu_d - delta
    for world in (1, 0):
        xi = rng.normal(size=dim)
        r = (mu_d if world else mu_dp) + sigma * xi
        cov = sigma**2 * np.eye(dim)
        expected = stats.multivariate_normal(mu_d, cov).logpdf(r) - stats.multivariate_normal(
            mu_dp, cov
        ).logpdf(r)
        got = di.log_likelihood_ratios(
            np.array([[xi @ delta]]), np.array([[delta @ delta]]), np.array([[sigma]]), np.array([world])
        )
        assert math.isclose(got[0, 0], expected, rel_tol=1e-9)


def test_degenerate_steps() -> None:
    llr = di.log_likelihood_ratios(
        np.array([[0.0, 0.0], [0.0, 0.0]]),
        np.array([[0.0, 1.0], [0.0, 1.0]]),
        np.zeros((2, 2)),
        np.array([1, 0]),
    )
    assert llr[0, 0] == 0 and llr[0, 1] == math.inf and llr[1, 1] == -math.inf


def tiny_run(eps: float, trials: int, steps: int, seed: int, delta: float = 1e-3):
    """Bounded-DP full-batch trials on a tiny MLP with local-sensitivity noise at target ε."""
    rng = np.random.default_rng(seed)
    N = 21
    X = rng.normal(size=(N, 5)).astype(np.float32)
    y = rng.integers(0, 2, N)
    z = calibrate_noise_multiplier(eps, delta, 1.0, steps)
    world = rng.integers(0, 2, trials)
    mask = np.ones((trials, N), bool)
    mask[:, -1] = False
    mask[world == 0, 0] = False
    mask[world == 0, -1] = True
    cfg = dpsgd.DPSGDConfig(1.0, z, 0.5, steps, noise_scale="local", normalizer=20.0)
    res = dpsgd.train_trials(
        models.mlp("tiny", 5, 2, (4,)), X, y, mask, cfg, seed=seed,
        tracked=dpsgd.TrackedRecords((0, N - 1), (1.0, -1.0)), observers={"di": di_observer()},
        jit_compile=False,
    )  # fmt: skip
    return z, world, res.records


def test_local_sensitivity_advantage_matches_gaussian_closed_form() -> None:
    """With σ_i = z·LS_i each step's LLR is that of a Gaussian mechanism with μ = 1/z, so over k
    steps Adv = 2Φ(√k/(2z)) − 1 (= ρα under RDP, Bernau §4.4): the empirical Adv of 600 trials
    lies in its 99.9 % Clopper–Pearson interval, and does not exceed ρα beyond sampling error."""
    steps, delta = 10, 1e-3
    z, world, rec = tiny_run(2.2, 600, steps, seed=3, delta=delta)
    outcome = di.run_di(rec["di.dot"], rec["di.dd"], rec["di.sigma"], world, rho_beta=0.9, confidence=0.999)
    expected = di.expected_advantage_local(z, steps)
    assert outcome.adv.low <= expected <= outcome.adv.high
    rho_alpha = rho_alpha_rdp_for(z, steps, delta)
    assert math.isclose(rho_alpha, expected, rel_tol=1e-9)
    assert outcome.adv.low <= rho_alpha
    # ε′ from local sensitivities reproduces the target ε exactly (every z_eff = z).
    eps_ls, _ = di_beliefs.epsilon_from_sensitivities(rec["di.sigma"], rec["di.dd"], delta)
    assert math.isclose(eps_ls, compute_epsilon(z, 1.0, steps, delta), rel_tol=1e-6)
    assert eps_ls <= 2.2 + 1e-6
    # δ′ (beliefs above ρβ = 0.9, i.e. log-odds > ε = 2.2) within the 99.9 % binomial range of its
    # exact value Φ((μ²/2 − ε)/μ) = 0.0017, μ = √k/z, and ≤ δ = 0.001 up to sampling error. (The
    # exact value exceeds δ slightly: (ε, δ)-DP bounds a divergence, not P(privacy loss > ε).)
    p = di.expected_delta_prime_local(z, steps, 2.2)
    assert 0.001 < p < 0.002
    hits = round(outcome.delta_prime * 600)
    assert stats.binom.ppf(0.0005, 600, p) <= hits <= stats.binom.ppf(0.9995, 600, p)
    assert hits <= stats.binom.ppf(0.999, 600, delta)


def test_beliefs_finite_and_bounded_at_epsilon_50() -> None:
    z, world, rec = tiny_run(50.0, 40, 5, seed=1)
    outcome = di.run_di(rec["di.dot"], rec["di.dd"], rec["di.sigma"], world, rho_beta=0.99)
    assert np.all(np.isfinite(outcome.final_true_log_odds))
    beliefs = outcome.final_beliefs
    assert np.all((beliefs >= 0) & (beliefs <= 1)) and not np.any(np.isnan(beliefs))
    assert outcome.adv.advantage == 1.0  # z ≈ 0.29: the adversary always wins
    # Mean final log-odds k/(2z²) ≈ 30; the largest exceeds 37, where 1 − β < 1e-16 rounds β to 1.0
    # in float64: only log space keeps ε′ (ii) finite and exact.
    eps_b = di_beliefs.epsilon_from_beliefs(outcome.final_true_log_odds)
    assert 37 < eps_b < math.inf
    assert abs(outcome.final_true_log_odds.mean() - 5 / (2 * z**2)) < 5.0


def test_epsilon_prime_from_sensitivities_global_noise() -> None:
    """§5.3 (i): with σ = z·2C and LS = C in every step, z_eff = 2z; the max is over trials."""
    z, k, delta = 1.5, 30, 1e-3
    sigma = np.full((3, k), z * 2 * 3.0)
    dd = np.full((3, k), 9.0)
    dd[1, :5] = 36.0  # trial 1 has five steps at LS = 2C
    eps, worst = di_beliefs.epsilon_from_sensitivities(sigma, dd, delta)
    assert worst == 1
    from dpaudit.bounds.accountants import epsilon_rdp_heterogeneous

    assert math.isclose(eps, epsilon_rdp_heterogeneous([z] * 5 + [2 * z] * 25, delta))
    assert eps < compute_epsilon(z, 1.0, k, delta)


def test_advantage_interval_and_other_estimates() -> None:
    adv = di.advantage(384, 600, 0.95)
    ci = stats.binomtest(384, 600).proportion_ci(0.95, "exact")
    assert math.isclose(adv.advantage, 0.28) and math.isclose(adv.low, 2 * ci.low - 1)
    assert math.isclose(di_beliefs.epsilon_from_beliefs(np.array([-3.0, math.log(9.0)])), math.log(9.0))
    assert di_beliefs.epsilon_prime_from_advantage(-0.1, 1e-3) == 0.0
    # ρα = 0.23 ↔ ε = 2.2 at δ = 1e-3 (Bernau Table 2 f, Thm. 2 inverse)
    assert abs(di_beliefs.epsilon_prime_from_advantage(0.23, 1e-3) - 2.2) < 0.05
    mi = di.yeom_membership(np.array([0.1, 2.0, 0.2, 0.3]), np.array([0.5] * 4), np.array([1, 0, 0, 1]))
    assert mi.wins == 3 and math.isclose(mi.advantage, 0.5)


def test_no_information_gives_chance_advantage():
    """With Δ = 0 at every step the adversary learns nothing: its guess must be right about half the time."""
    from dpaudit.attacks.di import run_di

    trials, steps = 400, 5
    world = np.random.default_rng(3).integers(0, 2, trials)
    zeros = np.zeros((trials, steps))
    outcome = run_di(zeros, zeros, np.ones((trials, steps)), world, rho_beta=0.9)
    assert outcome.adv.advantage == pytest.approx(2 * np.mean(world == 1) - 1)
    assert outcome.adv.low <= 0.0 <= outcome.adv.high
