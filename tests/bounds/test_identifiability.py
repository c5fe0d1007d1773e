"""Bernau et al. identifiability scores against the paper's parameter table (§6.2)."""

from __future__ import annotations

import itertools
import math

import pytest

from dpaudit.bounds import identifiability as ident

# Bernau et al. §6.2, last table: ρβ → ε, and ρα at δ = 0.001 and δ = 0.01, at the printed precision.
TABLE = [
    # rho_beta, epsilon (printed), rho_alpha at δ=1e-3, rho_alpha at δ=1e-2
    (0.52, 0.08, 0.01, 0.01),
    (0.75, 1.1, 0.12, 0.14),
    (0.90, 2.2, 0.23, 0.28),
    (0.99, 4.6, 0.46, 0.54),
]


@pytest.mark.parametrize(("rho_beta", "epsilon", "alpha_3", "alpha_2"), TABLE)
def test_bernau_parameter_table(rho_beta, epsilon, alpha_3, alpha_2):
    eps = ident.epsilon_from_rho_beta(rho_beta)
    decimals = len(str(epsilon).split(".")[1])
    assert round(eps, decimals) == epsilon
    assert round(ident.rho_alpha_from_epsilon(eps, 1e-3), 2) == alpha_3
    assert round(ident.rho_alpha_from_epsilon(eps, 1e-2), 2) == alpha_2


def test_acceptance_numbers():
    eps = ident.epsilon_from_rho_beta(0.9)
    assert eps == pytest.approx(math.log(9))  # 2.1972…
    assert f"{eps:.3f}" == "2.197"
    assert ident.rho_alpha_from_epsilon(eps, 1e-3) == pytest.approx(0.2289, abs=1e-4)


@pytest.mark.parametrize("epsilon", [0.0, 0.08, 1.0, 2.2, 4.6, 10.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-3, 1e-2])
def test_round_trips(epsilon, delta):
    rho_beta = ident.rho_beta_from_epsilon(epsilon)
    assert ident.epsilon_from_rho_beta(rho_beta) == pytest.approx(epsilon, abs=1e-12)
    rho_alpha = ident.rho_alpha_from_epsilon(epsilon, delta)
    assert ident.epsilon_from_rho_alpha(rho_alpha, delta) == pytest.approx(epsilon, abs=1e-9)


def test_rdp_form_is_gaussian_advantage():
    # A Gaussian with sensitivity/σ = μ has ε_RDP(α) = α μ²/2, so ρα = 2Φ(μ/2) − 1 at every order (§4.4).
    from scipy.stats import norm

    mu = 0.8
    for order in (2.0, 8.0, 32.0):
        assert ident.rho_alpha_from_rdp(order * mu**2 / 2, order) == pytest.approx(2 * norm.cdf(mu / 2) - 1)
    assert ident.rho_alpha_from_rdp(0.0, 2.0) == 0.0


def test_scores_are_monotone_and_bounded():
    values = [ident.rho_beta_from_epsilon(e) for e in (0.0, 0.5, 1.0, 5.0)]
    assert values[0] == 0.5 and all(a < b < 1 for a, b in itertools.pairwise(values))
    assert ident.rho_alpha_from_epsilon(0.0, 1e-3) == 0.0
    assert ident.rho_alpha_from_epsilon(1.0, 1e-5) < ident.rho_alpha_from_epsilon(1.0, 1e-2)


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda: ident.epsilon_from_rho_beta(0.4), "rho_beta"),
        (lambda: ident.epsilon_from_rho_beta(1.0), "rho_beta"),
        (lambda: ident.rho_beta_from_epsilon(-1.0), "epsilon"),
        (lambda: ident.rho_alpha_from_epsilon(1.0, 0.0), "delta"),
        (lambda: ident.epsilon_from_rho_alpha(1.0, 1e-3), "rho_alpha"),
        (lambda: ident.rho_alpha_from_rdp(1.0, 1.0), "order"),
    ],
)
def test_bad_input(call, word):
    with pytest.raises(ValueError, match=word):
        call()
