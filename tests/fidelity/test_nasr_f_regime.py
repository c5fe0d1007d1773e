"""Threat model F in the paper's regime: the chunked simulation, the exact law and Eq. 5's ceiling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from dpaudit.attacks.gradient_canary import compare_simulation_with_pld, pld_tradeoff_tpr_at_fpr
from dpaudit.bounds.empirical import cp_cap, epsilon_from_rates
from dpaudit.bounds.tradeoff import gdp_epsilon
from dpaudit.fidelity.nasr_f_regime import (
    ExactLaw,
    bonferroni_level,
    eq5_ceiling,
    eq5_simulated_audits,
    exact_law,
    gaussian_law,
    paper_regime,
    simulate_distinguisher3,
)


def test_paper_regime_steps_and_rdp_noise() -> None:
    """60 epochs of 60000/256 steps; z calibrated so RDP gives ε = 4 and PLD a little less."""
    r = paper_regime()
    assert r.steps == 14062
    assert r.sampling_rate == pytest.approx(256 / 60000)
    assert r.noise_multiplier == pytest.approx(0.8792, abs=2e-4)
    assert 3.5 < r.epsilon_pld() < 4.0


def test_chunked_simulation_matches_pld_oracle_and_is_reproducible() -> None:
    """Blocks of 1500 of 6000 trials: same draws for the same seed; TPR within 4 s.e. of the PLD."""
    kwargs = {"sampling_rate": 0.2, "steps": 30, "noise_multiplier": 1.0}
    game = simulate_distinguisher3(6000, seed=3, block=1500, **kwargs)
    again = simulate_distinguisher3(6000, seed=3, block=1500, **kwargs)
    np.testing.assert_array_equal(game.scores_dprime, again.scores_dprime)
    assert game.scores_d.shape == (6000,) and game.steps_d.count == 6000 * 30
    rows = compare_simulation_with_pld(game.scores_d, game.scores_dprime, [0.01, 0.1, 0.5], **kwargs)
    assert max(abs(r.z_score) for r in rows) < 4.0


def test_exact_law_matches_the_pld_tradeoff_and_the_gaussian_closed_form() -> None:
    """The law's (FPR, TPR) lie on the PLD oracle's curve; at q = 1 they are Φ(Φ⁻¹(α) + √T/z)."""
    law = exact_law(0.2, 30, 1.0)
    assert law.mass_d.sum() == pytest.approx(1.0)
    assert law.mass_dprime.sum() + law.top_dprime == pytest.approx(1.0, abs=1e-9)
    pick = np.searchsorted(-law.fpr, -np.array([0.3, 0.05, 0.005]))
    oracle = pld_tradeoff_tpr_at_fpr(law.fpr[pick], sampling_rate=0.2, steps=30, noise_multiplier=1.0)
    np.testing.assert_allclose(law.tpr[pick], oracle, atol=2e-3)
    full = exact_law(1.0, 4, 2.0)  # μ = √4/2 = 1
    pick = np.searchsorted(-full.fpr, -np.array([0.2, 0.02, 0.002]))
    np.testing.assert_allclose(full.tpr[pick], norm.cdf(norm.ppf(full.fpr[pick]) + 1.0), atol=2e-3)


def test_ceiling_of_a_perfect_test_is_the_clopper_pearson_cap() -> None:
    """A law with a threshold of FPR = FNR = 0: Eq. 5 at N = 1000 gives the paper's 5.60."""
    law = ExactLaw(np.array([0.0, 1.0]), np.array([1.0, 0.0]), np.array([0.0, 1.0]))
    c = eq5_ceiling(law, 1000, 1e-5)
    assert c.epsilon == pytest.approx(cp_cap(1000, 1e-5)) and c.epsilon == pytest.approx(5.60, abs=0.005)
    assert (c.fpr, c.fnr) == (0.0, 0.0)


def test_ceiling_of_one_threshold_by_hand() -> None:
    """One threshold with FPR 0.01, FNR 0.5 at N = 10⁴: both CP limits are Beta quantiles at 0.975."""
    law = ExactLaw(np.array([-math.inf, 0.0]), np.array([0.99, 0.01]), np.array([0.5, 0.5]))
    from scipy.stats import beta

    fpr_u, fnr_u = beta.ppf(0.975, 101, 9900), beta.ppf(0.975, 5001, 5000)
    by_hand = math.log((1 - 1e-5 - fnr_u) / fpr_u)
    assert eq5_ceiling(law, 10_000, 1e-5).epsilon == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(math.log(0.49 / 0.0123), abs=0.03)


@pytest.mark.parametrize("mu", [0.5, 1.0, 2.0])
def test_gaussian_ceiling_never_exceeds_true_epsilon_and_grows_with_trials(mu: float) -> None:
    """On G_μ the Eq. 5 ceiling rises with N, stays below ε(δ) of μ-GDP, and at N → ∞ tends to Eq. 4's
    supremum over thresholds (itself ≤ ε)."""
    t = np.linspace(-8, 12, 1001)
    law = gaussian_law(mu, t)
    np.testing.assert_allclose(law.fpr[1:], norm.sf(t), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(law.fnr[1:], norm.cdf(t - mu), rtol=1e-9, atol=1e-300)
    eps_true = gdp_epsilon(mu, 1e-5)
    values = [eq5_ceiling(law, n, 1e-5).epsilon for n in (10**3, 10**4, 10**6, 10**9)]
    assert all(a < b for a, b in itertools.pairwise(values))
    assert values[-1] <= eps_true
    supremum = float(np.max(epsilon_from_rates(norm.sf(t), norm.cdf(t - mu), 1e-5)))
    assert supremum == pytest.approx(eps_true, abs=1e-3)  # G_μ touches the (ε, δ) line
    assert supremum - values[-1] < 0.25 * eps_true
    assert eq5_ceiling(law, 10**4, 1e-5, bonferroni_level(200)).epsilon < values[1]


def test_simulated_audits_around_the_ceiling() -> None:
    """Audits drawn from G_1 at N = 10⁴: the Bonferroni sweep's median sits near its plug-in ceiling;
    choosing the threshold on the counted trials (naive) lands above the ceiling, still below ε."""
    law = gaussian_law(1.0, np.linspace(-6, 8, 801))
    levels = {"naive": 0.975, "bonf": bonferroni_level(200)}
    runs = eq5_simulated_audits(law, 10_000, 1e-5, levels, audits=30, seed=1)
    again = eq5_simulated_audits(law, 10_000, 1e-5, levels, audits=30, seed=1)
    np.testing.assert_array_equal(runs["naive"], again["naive"])
    ceiling = eq5_ceiling(law, 10_000, 1e-5, levels["bonf"]).epsilon
    assert abs(np.median(runs["bonf"]) - ceiling) < 0.2
    assert np.all(runs["bonf"] < runs["naive"])
    assert np.median(runs["naive"]) > eq5_ceiling(law, 10_000, 1e-5).epsilon
    assert np.max(runs["naive"]) < gdp_epsilon(1.0, 1e-5)


def test_subsampled_ceiling_stays_below_the_accountant() -> None:
    """On the subsampled Gaussian's own law the ceiling rises with N and never passes ε_PLD."""
    from dpaudit.bounds.accountants import epsilon_pld

    law = exact_law(0.2, 30, 1.0)
    values = [eq5_ceiling(law, n, 1e-5).epsilon for n in (10**3, 10**5, 10**8)]
    assert values[0] < values[1] < values[2] < epsilon_pld(1.0, 0.2, 30, 1e-5)
