"""The LiRA estimators and ``rates``: one decision per model counts, pooled decisions only estimate."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.estimators.lira import one_per_model
from dpaudit.scores import ScoreSet


def _set(levels: str = "0.01,0.05") -> ScoreSet:
    rng = np.random.default_rng(2)
    k, m = np.meshgrid(np.arange(5), np.arange(200), indexing="ij")
    member = rng.random(k.shape) < 0.5
    scores = rng.normal(size=k.shape) + 2.0 * member
    return ScoreSet(
        {"defence": "d", "canary_type": "mislabeled", "attack": "lira_online_logit"},
        scores.ravel(),
        member.ravel(),
        ("rates", "lira_per_model", "lira_pooled"),
        params={"delta": 1e-5, "fpr_levels": levels},
        arrays={"canary": k.ravel(), "model": m.ravel()},
    )


def test_per_model_takes_one_decision_per_model_and_counts_the_two_sweeps() -> None:
    s = _set()
    rows = one_per_model(s)
    assert rows.sum() == 200 and np.array_equal(np.sort(s.arrays["model"][rows]), np.arange(200))
    assert np.array_equal(s.arrays["canary"][rows], s.arrays["model"][rows] % 5)
    table = audit_score_sets([s], 0.95)
    counted = [r for r in table.rows if r.counted]
    assert sorted(r.estimator for r in counted) == ["per_model_sweep_bonferroni", "per_model_sweep_split"]
    assert all(r.level == pytest.approx(0.975) for r in counted)
    one, member = s.scores[rows], s.member[rows]
    direct = audit_scores(one[member], one[~member], delta=1e-5, confidence=0.95, fpr_levels=(0.01,))
    assert table.headline().value == pytest.approx(direct.headline.epsilon) and table.headline().value > 0.5
    (pooled,) = table.select("epsilon_estimate", estimator="pooled")
    assert pooled.value > table.headline().value  # 1000 correlated decisions overstate the evidence
    assert {r.quantity for r in table.select(estimator="threshold")} == {"tpr_at_fpr_0p01", "tpr_at_fpr_0p05"}


def test_rates_refuse_an_fpr_without_a_quantity_name() -> None:
    with pytest.raises(ValueError, match="quantity"):
        audit_score_sets([_set("0.2")], 0.95)
