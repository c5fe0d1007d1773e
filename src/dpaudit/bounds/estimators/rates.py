"""Estimator ``rates``: attack-strength figures only — TPR at fixed FPR, AUROC and advantage.

For score sets whose ``member`` bits were NOT drawn by the audit (e.g. one model trained on a
user's own member list): a threshold sweep there is evidence about this model and these records,
no bound on the training algorithm's ε, so this estimator emits no ε at all and nothing counted.
Per set, at the audit's confidence (each interval two-sided on its own, :mod:`dpaudit.bounds.strength`):
TPR at each FPR of the param ``fpr_levels`` (comma-separated, default ``0.001,0.01,0.05``) with an
interval that accounts for the threshold being set on the same negatives
(:func:`~dpaudit.bounds.strength.tpr_interval`: order statistics for the negatives' quantile, then
Clopper–Pearson on the hits), AUROC (Hanley–McNeil) and the advantage max(TPR − FPR) (DKW band).
"""

from __future__ import annotations

from dpaudit.bounds.registry import estimator
from dpaudit.bounds.strength import advantage_interval, auroc_interval, tpr_at_fpr
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow, fpr_tag

DEFAULT_FPR_LEVELS = "0.001,0.01,0.05"


def fpr_levels(s: ScoreSet) -> list[float]:
    """The FPR levels a set asks for (param ``fpr_levels``, comma-separated)."""
    return [float(x) for x in str(s.params.get("fpr_levels", DEFAULT_FPR_LEVELS)).split(",")]


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    pos, neg = s.in_scores, s.out_scores
    rows = []
    for level in fpr_levels(s):
        tpr, low, high, _achieved = tpr_at_fpr(pos, neg, level, confidence)
        rows.append(
            ResultRow(s.key, f"tpr_at_fpr_{fpr_tag(level)}", tpr, "threshold", "rate", confidence, low, high)
        )
    for quantity, interval in (("auroc", auroc_interval), ("advantage", advantage_interval)):
        value, low, high = interval(pos, neg, confidence)
        rows.append(ResultRow(s.key, quantity, value, "scores", "rate", confidence, low, high))
    return rows


estimator("rates", counted=lambda s: 0)(_rows)
