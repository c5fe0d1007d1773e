"""Estimators ``loss_threshold`` and ``epsilon_star`` on known mechanisms: Gaussian canaries and nulls."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.tradeoff import gdp_epsilon
from dpaudit.scores import ScoreSet

DELTA = 1e-5


def one_run_set(
    mu: float, m: int, seed: int, registered: tuple[str, ...] | None = None, **params: float
) -> ScoreSet:
    """m candidates, each in with probability ½; its score is N(μ·in, 1): a μ-GDP release per candidate."""
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    scores = rng.normal(size=m) + mu * member
    base = {"delta": DELTA, "seed": seed, "inclusion_probability": 0.5, "selection": "split"}
    return ScoreSet(
        {"setting": f"mu{mu:g}", "attack": "loss-0"},
        scores,
        member,
        ("loss_threshold", "epsilon_star"),
        "one-run",
        params={**base, **params},
        registered=registered,
    )


@pytest.mark.parametrize("mu", [1.0, 3.0])
def test_one_run_bound_stays_below_the_gaussian_epsilon(mu: float) -> None:
    s = one_run_set(mu, 4000, seed=int(mu))
    table = audit_score_sets([s], 0.95)
    bound = table.one("epsilon_lower", s.key, estimator="one_run")
    assert bound.counted and bound.assumes == "one-run" and bound.level == pytest.approx(0.95)
    assert 0.0 < bound.value <= gdp_epsilon(mu, DELTA)
    assert table.headline().value == bound.value
    # Estimates and rates are never counted; TPR at each fixed FPR has its interval.
    assert [r.estimator for r in table.rows if r.counted] == ["one_run"]
    for tag in ("0p001", "0p01", "0p05"):
        tpr = table.one(f"tpr_at_fpr_{tag}", s.key)
        assert tpr.low <= tpr.value <= tpr.high
    star = table.one("epsilon_star", s.key, estimator="parametric")
    assert star.value > table.one("epsilon_star", s.key, estimator="null_high").value


def test_null_scores_give_no_bound_and_chance_rates() -> None:
    s = one_run_set(0.0, 4000, seed=7)
    table = audit_score_sets([s], 0.95)
    assert table.one("epsilon_lower", s.key, estimator="one_run").value == pytest.approx(0.0, abs=0.05)
    assert table.one("epsilon_estimate", s.key, estimator="per_model_test").value == pytest.approx(
        0.0, abs=0.1
    )
    tpr = table.one("tpr_at_fpr_0p05", s.key)
    assert tpr.low <= tpr.value <= tpr.high and abs(tpr.value - 0.05) < 0.02  # TPR ≈ FPR: no signal
    auroc = table.one("auroc", s.key)
    assert auroc.low <= 0.5 <= auroc.high
    assert abs(table.one("advantage", s.key, estimator="yeom").value) < 0.1


def test_epsilon_star_on_null_scores_rarely_exceeds_its_null_level() -> None:
    """One distribution: Epsilon* exceeds its permutation null's 95th percentile with probability
    ≤ 5/101, so at most one of five independent null sets may (binomial tail < 3 %)."""
    above = 0
    for seed in range(5):
        s = one_run_set(0.0, 1000, seed=100 + seed, n_bootstrap=5)
        table = audit_score_sets([s], 0.95)
        star = table.one("epsilon_star", s.key, estimator="parametric")
        above += star.value > table.one("epsilon_star", s.key, estimator="null_high").value
        assert star.kind == "estimate" and not star.counted
    assert above <= 1


def test_a_set_not_pre_registered_reports_its_bound_uncounted() -> None:
    s = one_run_set(3.0, 2000, seed=3, registered=())
    table = audit_score_sets([s], 0.95)
    bound = table.one("epsilon_lower", s.key, estimator="one_run")
    assert not bound.counted and bound.value > 0 and bound.level == pytest.approx(0.95)
    assert table.headline().estimator == "none"
    # Not a one-run design: no bound at all.
    other = ScoreSet(
        s.group, s.scores, s.member, ("loss_threshold",), params={**s.params, "inclusion_probability": 0.3}
    )
    assert not audit_score_sets([other], 0.95).select("epsilon_lower")
