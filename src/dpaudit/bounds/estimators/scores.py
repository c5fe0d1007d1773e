"""Built-in estimator ``scores``: :func:`dpaudit.bounds.auditor.audit_scores` on a score set.

Threshold sweeps (assume nothing), GDP (counted only for sets whose mechanism is guaranteed
Gaussian), the subsampled-Gaussian family bound (sets tagged ``subsampled-gaussian``, with
``sampling_rate`` and ``steps`` params), the one-run bound (``one-run``; the sweeps of such a set are
estimates, since its canaries share one run), the naive sweep as an estimate, and TPR at 0.1/1/5 % FPR,
AUROC and advantage with two-sided intervals.
"""

from __future__ import annotations

import math

from dpaudit.bounds.auditor import ScoresAudit, audit_scores
from dpaudit.bounds.registry import estimator, pre_registered
from dpaudit.bounds.tradeoff import SubsampledGaussian
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow, fpr_tag

#: ScoresAudit estimator → (assumption tag its bound rests on, set tag that makes it counted).
_SCORE_BOUNDS = {
    "sweep_split": "none",
    "sweep_bonferroni": "none",
    "gdp": "gaussian",
    "subsampled_gaussian": "subsampled-gaussian",
    "one_run": "one-run",
}


def _counted_score_bounds(s: ScoreSet) -> list[str]:
    """The bounds a headline may count: those whose assumption the set guarantees, as far as the
    attack pre-registered them (:func:`dpaudit.bounds.registry.pre_registered`)."""
    free = ("none",) if s.assumes != "one-run" else ()  # one run's canaries: the sweeps are estimates
    allowed = [name for name, tag in _SCORE_BOUNDS.items() if tag in (*free, s.assumes)]
    return pre_registered(s, allowed, list(_SCORE_BOUNDS))


def _scores_rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    counted = _counted_score_bounds(s)
    mechanism = None
    if s.assumes == "subsampled-gaussian":
        mechanism = SubsampledGaussian(s.param("sampling_rate"), int(s.param("steps")))
    result = audit_scores(
        s.in_scores,
        s.out_scores,
        delta=s.param("delta"),
        confidence=confidence,
        mechanism=mechanism,
        assume_gaussian=s.assumes == "gaussian",
        one_run=s.assumes == "one-run",
        headline=counted or None,  # nothing registered: the auditor's default split, nothing counted
        counted_level=counted_level if counted else None,
        seed=int(s.params.get("seed", 0)),
    )
    rows = []
    for name, b in result.lower_bounds.items():
        if b.valid:
            tag = _SCORE_BOUNDS[name]
            rows.append(
                ResultRow(
                    s.key,
                    "epsilon_lower",
                    b.epsilon,
                    name,
                    "bound",
                    level=b.confidence,
                    assumes=tag,
                    counted=name in counted,
                )
            )
        else:
            rows.append(ResultRow(s.key, "epsilon_estimate", b.epsilon, name, "estimate"))
    return strength_rows(s.key, result, rows, confidence)


def strength_rows(
    group: str, result: ScoresAudit, rows: list[ResultRow], confidence: float
) -> list[ResultRow]:
    """``rows`` plus the attack-strength rows of an auditor result (TPR at each FPR, AUROC, advantage,
    two-sided intervals at ``confidence``), without NaN values."""
    rows = list(rows)
    for fpr, (tpr, low, high, _achieved) in result.tpr_at_fpr.items():
        rows.append(
            ResultRow(group, f"tpr_at_fpr_{fpr_tag(fpr)}", tpr, "threshold", "rate", confidence, low, high)
        )
    for quantity, (value, low, high) in (("auroc", result.auroc), ("advantage", result.advantage)):
        rows.append(ResultRow(group, quantity, value, "scores", "rate", confidence, low, high))
    return [r for r in rows if not math.isnan(r.value)]


estimator("scores", counted=lambda s: len(_counted_score_bounds(s)))(_scores_rows)
