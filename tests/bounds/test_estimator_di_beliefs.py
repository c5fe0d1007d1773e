"""Estimators ``di_beliefs`` and ``decision`` on known mechanisms: Gaussian log-odds and no information."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpaudit.bounds.accountants import compute_epsilon
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.scores import ScoreSet

STEPS, Z, DELTA, TRIALS = 10, 2.0, 1e-3, 4000


def gaussian_di_set(seed: int) -> ScoreSet:
    """A_DI,Gau's score set for k full-batch Gaussian steps with σ_i = z·LS_i (μ = √k/z exactly).

    Per step LLR = ξ/z ± 1/(2z²) in the true world, so the final log-odds of D are N(±k/(2z²), k/z²).
    """
    rng = np.random.default_rng(seed)
    member = np.arange(TRIALS) < TRIALS // 2
    sign = np.where(member, 1.0, -1.0)
    llr = rng.normal(size=(TRIALS, STEPS)) / Z + sign[:, None] / (2 * Z**2)
    scores = llr.sum(axis=1)
    dd = np.ones((TRIALS, STEPS))
    return ScoreSet(
        {"setting": "gauss", "attack": "di"},
        scores,
        member,
        ("scores", "decision", "di_beliefs"),
        "gaussian",
        params={"delta": DELTA, "rho_beta": 0.9, "seed": seed},
        arrays={"decision": scores >= 0, "dd": dd, "sigma": Z * np.sqrt(dd)},
    )


def test_gaussian_beliefs_match_closed_forms_and_bounds_stay_below_epsilon() -> None:
    s = gaussian_di_set(0)
    table = audit_score_sets([s], 0.95, scope=lambda x: x.key)
    group = s.key
    mu = math.sqrt(STEPS) / Z
    epsilon = compute_epsilon(Z, 1.0, STEPS, DELTA)  # the RDP accountant's ε (an upper bound)
    # ε′ (i): every effective multiplier is z, so it is that accountant's ε exactly.
    eps_ls = table.one("epsilon_estimate", group, estimator="local_sensitivity")
    assert eps_ls.value == pytest.approx(epsilon, rel=1e-6) and eps_ls.kind == "estimate"
    # δ′ = P(log-odds of the true world > ln 9): the log-odds are N(μ²/2, μ²) in the true world.
    expected = stats.norm.sf((math.log(9.0) - mu**2 / 2) / mu)
    hits = round(table.one("delta_prime", group).value * TRIALS)
    assert stats.binom.ppf(0.0005, TRIALS, expected) <= hits <= stats.binom.ppf(0.9995, TRIALS, expected)
    # Adv of the decision β ≥ 1/2 is 2Φ(μ/2) − 1; its 95 % interval covers it.
    adv = table.one("advantage", group, estimator="decision")
    assert adv.low <= 2 * stats.norm.cdf(mu / 2) - 1 <= adv.high
    # Only the scores estimator's bounds are counted, and every one stays below the true ε.
    counted = [r for r in table.select("epsilon_lower", group) if r.counted]
    assert sorted(r.estimator for r in counted) == ["gdp", "sweep_bonferroni", "sweep_split"]
    assert all(r.value <= epsilon for r in counted)
    assert 0 < table.headline([group]).value <= epsilon
    assert not any(r.counted for r in table.select("epsilon_estimate", group))


def test_no_information_gives_zero_estimates() -> None:
    """Scores of 0 (Δ = 0 every step): no belief moves, δ′ = 0, ε′ = 0, advantage only by the coin."""
    member = np.arange(400) < 200
    s = ScoreSet(
        {"setting": "null"},
        np.zeros(400),
        member,
        ("decision", "di_beliefs"),
        params={"delta": DELTA, "rho_beta": 0.75},
        arrays={"decision": np.ones(400, bool), "dd": np.zeros((400, 3)), "sigma": np.ones((400, 3))},
    )
    table = audit_score_sets([s], 0.95)
    assert table.one("delta_prime", s.key).value == 0.0
    for name in ("belief", "adv_inverse", "local_sensitivity"):
        assert table.one("epsilon_estimate", s.key, estimator=name).value == 0.0
    adv = table.one("advantage", s.key, estimator="decision")
    assert adv.value == 0.0 and adv.low < 0.0 < adv.high
    assert table.headline().value == 0.0 and table.headline().estimator == "none"
