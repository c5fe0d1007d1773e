"""Estimators ``lira_per_model`` and ``lira_pooled``: ε from a LiRA evaluation's canary decisions.

A set holds every (canary, target model) decision of one canary type: arrays ``canary`` (the
canary's index within the set, 0 … K − 1) and ``model`` (the target, 0 … M − 1), ``member`` =
the canary was in that model's training data (Aerni et al.; LiRA: Carlini et al. 2022).

- ``lira_per_model``: one decision per target model (model m decides canary m mod K), so no
  canary–model pair counts twice and each model contributes one trial;
  :func:`dpaudit.bounds.auditor.audit_scores` on them. Counted: the two assumption-free sweeps,
  plus the subsampled-Gaussian family bound (``SubsampledGaussian(q, T)``, params
  ``sampling_rate``/``steps``) where the set declares ``assumes = "subsampled-gaussian"`` (one
  canary in or out of a Poisson-subsampled DP-SGD run is exactly the pair that family bounds) and
  param ``family_bound`` = 1 (the bounds stage leaves it off where ε is too large to certify).
  GDP is reported, never counted. Sets with fewer than :data:`MIN_DECISIONS` decisions per world
  give no rows (their share of the level is still spent).
- ``lira_pooled``: all K·M decisions with the assumption-free sweeps: decisions sharing a model are
  not independent, so the count of trials is overstated — an estimate, never a bound.
"""

from __future__ import annotations

import numpy as np

from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.registry import estimator, pre_registered
from dpaudit.bounds.tradeoff import SubsampledGaussian
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow

#: Fewest in- and out-decisions an ε lower bound is computed from.
MIN_DECISIONS = 10
TAGS = {"sweep_split": "none", "sweep_bonferroni": "none", "gdp": "gaussian",
        "subsampled_gaussian": "subsampled-gaussian"}  # fmt: skip


def uses_family(s: ScoreSet) -> bool:
    return s.assumes == "subsampled-gaussian" and bool(int(s.params.get("family_bound", 0)))


def counted_bounds(s: ScoreSet) -> list[str]:
    """The assumption-free sweeps and, where the set guarantees the family, its bound, as far as the
    attack registered them."""
    allowed = ["sweep_split", "sweep_bonferroni"] + ["subsampled_gaussian"] * uses_family(s)
    return pre_registered(s, allowed, list(TAGS))


def one_per_model(s: ScoreSet) -> np.ndarray:
    """The trials where model m decides canary m mod K."""
    canary, model = s.arrays["canary"], s.arrays["model"]
    return canary == model % (int(canary.max()) + 1)


def _per_model(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    rows = one_per_model(s)
    scores, member = s.scores[rows], s.member[rows]
    if min(member.sum(), (~member).sum()) < MIN_DECISIONS:
        return []
    family = SubsampledGaussian(s.param("sampling_rate"), int(s.param("steps"))) if uses_family(s) else None
    counted = counted_bounds(s)
    result = audit_scores(
        scores[member], scores[~member], delta=s.param("delta"), confidence=confidence, mechanism=family,
        fpr_levels=(0.01,), headline=counted or None, counted_level=counted_level if counted else None,
    )  # fmt: skip
    return [
        ResultRow(s.key, "epsilon_lower", b.epsilon, f"per_model_{name}", "bound", level=b.confidence,
                  assumes=TAGS[name], counted=name in counted)
        for name, b in result.lower_bounds.items() if b.valid
    ]  # fmt: skip


def _pooled(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    if min(s.member.sum(), (~s.member).sum()) < MIN_DECISIONS:
        return []
    result = audit_scores(s.in_scores, s.out_scores, delta=s.param("delta"), confidence=confidence,
                          fpr_levels=(0.01,))  # fmt: skip
    return [ResultRow(s.key, "epsilon_estimate", result.headline.epsilon, "pooled", "estimate")]


estimator("lira_per_model", counted=lambda s: len(counted_bounds(s)))(_per_model)
estimator("lira_pooled", counted=lambda s: 0)(_pooled)
