"""One-run ε lower bounds (Steinke et al. 2023; Mahloujifar et al. 2024) on known-ε games."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpaudit.bounds.auditor import one_run_lower_bound
from dpaudit.bounds.onerun import (
    ASSUMPTIONS,
    audit_one_run,
    fdp_gaussian_mu_lower,
    gdp_mu_for_epsilon,
    guess_pairs,
    one_run_ceiling,
)
from dpaudit.bounds.tradeoff import gdp_epsilon

DELTA = 1e-5


def gaussian_game(rng: np.random.Generator, epsilon: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    included = rng.random(m) < 0.5
    return rng.normal(size=m) + gdp_mu_for_epsilon(epsilon, DELTA) * included, included


def overclaim_limit(repeats: int, level: float = 0.95) -> float:
    p = 1.0 - level
    return p + 2.0 * math.sqrt(p * (1.0 - p) / repeats)


def test_gdp_mu_for_epsilon_inverts_gdp_epsilon() -> None:
    for eps in (0.5, 2.0, 8.0):
        assert gdp_epsilon(gdp_mu_for_epsilon(eps, DELTA), DELTA) == pytest.approx(eps, rel=1e-6)
    # Known value: μ = 1 GDP is (ε ≈ 4.357, δ = 1e-5) (Dong, Roth & Su 2022, Cor. 2.13).
    assert gdp_mu_for_epsilon(gdp_epsilon(1.0, DELTA), DELTA) == pytest.approx(1.0, rel=1e-6)


@pytest.mark.parametrize("analysis", ["steinke", "fdp_gaussian"])
def test_gaussian_game_does_not_overclaim(analysis: str) -> None:
    rng = np.random.default_rng(1)
    repeats, overclaims = 40, 0
    for rep in range(repeats):
        scores, included = gaussian_game(rng, 2.0, 1000)
        audit = audit_one_run(scores, included, delta=DELTA, analysis=analysis, seed=rep)
        assert 0.0 <= audit.epsilon_lower < math.inf
        overclaims += audit.epsilon_lower > 2.0
    assert overclaims / repeats <= overclaim_limit(repeats)


def test_randomised_response_steinke_overclaims_at_most_level() -> None:
    # ε = 1 randomised response: not Gaussian, and the mechanism on which Steinke et al. are tight.
    rng = np.random.default_rng(2)
    repeats, overclaims, values = 150, 0, []
    for rep in range(repeats):
        included = rng.random(1000) < 0.5
        flip = rng.random(1000) < 1.0 / (1.0 + math.e)
        audit = audit_one_run((included ^ flip).astype(float), included, delta=DELTA, seed=rep)
        values.append(audit.epsilon_lower)
        overclaims += audit.epsilon_lower > 1.0
    assert overclaims / repeats <= overclaim_limit(repeats)
    assert np.median(values) > 0.5  # and the bound is not vacuous: it sees most of ε = 1


@pytest.mark.parametrize("analysis", ["steinke", "fdp_gaussian"])
def test_null_scores_give_epsilon_near_zero(analysis: str) -> None:
    rng = np.random.default_rng(3)
    values = [
        audit_one_run(rng.normal(size=1000), rng.random(1000) < 0.5, delta=DELTA, analysis=analysis)
        for _ in range(20)
    ]
    values = [a.epsilon_lower for a in values]
    assert np.median(values) == 0.0
    assert max(values) < 0.5


def test_fdp_gaussian_is_tighter_than_steinke_on_gaussian_games() -> None:
    for eps in (2.0, 4.0):
        steinke = one_run_ceiling(eps, DELTA, 1000, analysis="steinke", repeats=15)
        fdp = one_run_ceiling(eps, DELTA, 1000, analysis="fdp_gaussian", repeats=15)
        assert 0.0 < steinke < fdp < eps


@pytest.mark.parametrize("analysis", ["steinke", "fdp_gaussian"])
def test_bound_is_a_function_of_the_multiset(analysis: str) -> None:
    rng = np.random.default_rng(4)
    scores, included = gaussian_game(rng, 4.0, 400)
    scores = np.round(scores, 1)  # many ties, some across the in/out classes
    first = audit_one_run(scores, included, delta=DELTA, analysis=analysis, seed=7)
    assert first.epsilon_lower > 0
    for _ in range(20):
        perm = rng.permutation(scores.size)
        again = audit_one_run(scores[perm], included[perm], delta=DELTA, analysis=analysis, seed=7)
        assert again == first


def test_steinke_matches_one_run_lower_bound_at_the_bonferroni_level() -> None:
    rng = np.random.default_rng(5)
    scores, included = gaussian_game(rng, 4.0, 1000)
    audit = audit_one_run(scores, included, delta=DELTA, guess_fractions=(0.1, 0.2), seed=3)
    best = max(
        one_run_lower_bound(
            scores, included, k_positive=k, k_negative=k, delta=DELTA, confidence=0.975, seed=3
        ).epsilon
        for k in (50, 100)
    )
    assert audit.epsilon_lower == pytest.approx(best)
    assert audit.k_positive == audit.k_negative in (50, 100)
    assert audit.assumption == ASSUMPTIONS["steinke"] and "Gaussian" in ASSUMPTIONS["fdp_gaussian"]


def test_fdp_mu_lower_is_monotone_and_zero_at_chance() -> None:
    # Half of the guesses correct is what μ = 0 (perfect privacy) predicts: nothing is rejected.
    assert fdp_gaussian_mu_lower(100, 50, 1000, 0.05) == 0.0
    mus = [fdp_gaussian_mu_lower(100, v, 1000, 0.05) for v in (60, 70, 80, 90, 100)]
    assert all(a <= b for a, b in itertools.pairwise(mus)) and mus[-1] > 0
    # More canaries behind the same guesses weaken the evidence (the m·f̄(·/m) perspective grows).
    assert fdp_gaussian_mu_lower(100, 90, 10_000, 0.05) <= fdp_gaussian_mu_lower(100, 90, 1000, 0.05)


def test_fdp_recursion_matches_a_linear_programme_on_a_small_game() -> None:
    """The recursion's worst-case tail equals the LP over the tangent relaxation of the constraints.

    Variables p_0..p_r; constraints A_v ≤ m·f̄(B_{v−1}/m) for v = 0..r with f̄ replaced by the
    minimum of 400 tangents (a relaxation: the LP optimum is ≥ the exact one, and close to it).
    """
    from scipy.optimize import linprog
    from scipy.stats import norm

    from dpaudit.bounds.onerun import _fdp_rejected

    r, m, mu = 8, 20, 1.0
    xs = np.linspace(1e-6, 1 - 1e-6, 400)
    fbar = norm.cdf(norm.ppf(xs) + mu)
    slope = norm.pdf(norm.ppf(xs) + mu) / norm.pdf(norm.ppf(xs))
    j = np.arange(r + 1)
    for v in (5, 6, 7, 8):
        rows, rhs = [], []
        for w in range(r + 1):
            a_row = np.where(j >= w, j, 0.0)
            b_row = np.where(j >= max(w - 1, 0), r - j, 0.0)
            for x0, y0, s in zip(xs, fbar, slope, strict=True):
                # A_w ≤ m·(y0 + s·(B/m − x0))  ⇔  A_w − s·B ≤ m·(y0 − s·x0)
                rows.append(a_row - s * b_row)
                rhs.append(m * (y0 - s * x0))
        res = linprog(
            -(j >= v).astype(float),
            A_ub=np.array(rows),
            b_ub=np.array(rhs),
            A_eq=np.ones((1, r + 1)),
            b_eq=[1.0],
            bounds=(0, 1),
            method="highs",
        )
        tail = -res.fun
        for level, expect in ((tail * 1.02, True), (tail * 0.98, False)):
            if level < 1:
                assert bool(_fdp_rejected(np.array([mu]), r, v, m, level)[0]) is expect


def test_bad_input_is_rejected_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="analysis"):
        audit_one_run([0.0, 1.0], [0, 1], delta=DELTA, analysis="gdp")
    with pytest.raises(ValueError, match="one entry per score"):
        audit_one_run([0.0, 1.0, 2.0], [0, 1], delta=DELTA)
    with pytest.raises(ValueError, match="booleans"):
        audit_one_run([0.0, 1.0], [0, 2], delta=DELTA)
    with pytest.raises(ValueError, match="guess_fractions"):
        guess_pairs(100, (0.0,))
    with pytest.raises(ValueError, match="delta"):
        audit_one_run([0.0, 1.0], [0, 1], delta=1.5)
