"""Attack-strength figures with intervals, from "in" and "out" scores (higher = "in"): TPR at a fixed
FPR (two-sided Clopper–Pearson on the TPR), AUROC (Hanley & McNeil 1982) and the advantage
max(TPR − FPR) (DKW band, Massart's constant)."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta as beta_dist

from dpaudit.bounds.empirical import threshold_counts

__all__ = ["advantage_interval", "auroc_interval", "tpr_at_fpr"]


def tpr_at_fpr(
    pos: np.ndarray, neg: np.ndarray, level: float, confidence: float
) -> tuple[float, float, float, float]:
    """TPR at the threshold with empirical FPR ≤ level, with a two-sided CP interval on that TPR."""
    neg_sorted = np.sort(neg)
    allowed = int(math.floor(level * neg.size))  # at most this many negatives may score ≥ threshold
    threshold = float(np.nextafter(neg_sorted[neg.size - allowed - 1], math.inf))
    tp = int(np.sum(pos >= threshold))
    fpr = float(np.sum(neg >= threshold)) / neg.size
    n = pos.size
    a = 1.0 - confidence
    low = 0.0 if tp == 0 else float(beta_dist.ppf(a / 2, tp, n - tp + 1))
    high = 1.0 if tp == n else float(beta_dist.ppf(1 - a / 2, tp + 1, n - tp))
    return tp / n, low, high, fpr


def auroc_interval(pos: np.ndarray, neg: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """AUROC (sklearn.metrics.roc_auc_score) with the Hanley & McNeil (1982) normal interval."""
    from scipy.stats import norm
    from sklearn.metrics import roc_auc_score

    labels = np.concatenate([np.ones(pos.size), np.zeros(neg.size)])
    auc = float(roc_auc_score(labels, np.concatenate([pos, neg])))
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (pos.size - 1) * (q1 - auc * auc) + (neg.size - 1) * (q2 - auc * auc)) / (
        pos.size * neg.size
    )
    half = float(norm.isf((1 - confidence) / 2)) * math.sqrt(max(var, 0.0))
    return auc, max(0.0, auc - half), min(1.0, auc + half)


def advantage_interval(pos: np.ndarray, neg: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """max_t (TPR − FPR) with a DKW interval (Massart 1990), both CDFs jointly at ``confidence``."""
    ps, ns = np.sort(pos), np.sort(neg)
    thresholds = np.concatenate([np.unique(np.concatenate([ps, ns])), [math.inf]])
    fp, fn = threshold_counts(ps, ns, thresholds)
    tpr = 1.0 - fn / ps.size
    fpr = 1.0 - (ns.size - fp) / ns.size  # as 1 − (negatives below)/n: the same floats as before
    adv = float(np.max(tpr - fpr))
    a = (1.0 - confidence) / 2.0  # per CDF

    def band(n: int) -> float:
        return math.sqrt(math.log(2.0 / a) / (2.0 * n))

    width = band(ps.size) + band(ns.size)
    return adv, max(0.0, adv - width), min(1.0, adv + width)
