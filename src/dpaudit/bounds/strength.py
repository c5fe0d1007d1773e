"""Attack-strength figures with intervals, from "in" and "out" scores (higher = "in"): TPR at a fixed
FPR with an interval that accounts for the threshold's own estimation (:func:`tpr_interval`), AUROC
(Hanley & McNeil 1982) and the advantage max(TPR − FPR) (DKW band, Massart's constant)."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.stats import beta as beta_dist
from scipy.stats import binom

from dpaudit.bounds.empirical import threshold_counts

__all__ = ["advantage_interval", "auroc_interval", "quantile_ranks", "tpr_at_fpr", "tpr_interval"]


@lru_cache(maxsize=256)
def quantile_ranks(m: int, fpr: float, miss_low: float, miss_high: float) -> tuple[int | None, int | None]:
    """Ranks (1-based, ascending) of the order statistics of m negatives that bracket the negatives'
    (1 − ``fpr``) quantile q = inf{x : F(x) ≥ 1 − fpr}: ``(i, j)`` with P(X_(i) > q) ≤ ``miss_high``
    and P(X_(j) < q) ≤ ``miss_low``, whatever the distribution F, ties and atoms included.

    X_(j) < q means at least j negatives lie below q, and #{X < q} ~ Bin(m, F(q−)) with F(q−) ≤ 1 − fpr,
    so P(X_(j) < q) ≤ P(Bin(m, 1 − fpr) ≥ j): ``j`` is the smallest rank where that tail is ≤
    ``miss_low``. X_(i) > q means at most i − 1 negatives lie at or below q, and #{X ≤ q} ~
    Bin(m, F(q)) with F(q) ≥ 1 − fpr, so P(X_(i) > q) ≤ P(Bin(m, 1 − fpr) ≤ i − 1): ``i`` is the largest
    rank where that tail is ≤ ``miss_high``. ``None`` where no rank qualifies (too few negatives for the
    level: the limit it serves is then the trivial 0 or 1). The classical distribution-free interval for
    a quantile (Thompson 1936; David & Nagaraja, *Order Statistics*, 3rd ed., §7.1), one end at a time.
    """
    p = 1.0 - fpr
    j: int | None = None
    if miss_low > 0:
        x = int(binom.ppf(1.0 - miss_low, m, p))  # smallest x with P(Bin ≤ x) ≥ 1 − miss_low
        while x > 0 and binom.sf(x - 1, m, p) <= miss_low:  # guard the ppf's rounding: smallest x
            x -= 1
        while binom.sf(x, m, p) > miss_low:
            x += 1
        j = x + 1 if x + 1 <= m else None  # P(Bin ≥ x + 1) = sf(x) ≤ miss_low
    i: int | None = None
    if miss_high > 0 and binom.cdf(0, m, p) <= miss_high:
        x = max(0, int(binom.ppf(miss_high, m, p)))  # smallest x with P(Bin ≤ x) ≥ miss_high
        while x > 0 and binom.cdf(x, m, p) > miss_high:
            x -= 1
        while x + 1 <= m and binom.cdf(x + 1, m, p) <= miss_high:
            x += 1
        i = min(x + 1, m)  # P(Bin ≤ i − 1) = cdf(x) ≤ miss_high
    return i, j


def tpr_interval(
    pos: np.ndarray, neg: np.ndarray, fpr: float, miss_low: float, miss_high: float
) -> tuple[float, float, float, float]:
    """TPR at a target FPR with limits that account for the threshold's estimation:
    ``(value, low, high, achieved fpr)``; ``low`` misses (lies above the true TPR) with probability
    at most ``miss_low``, ``high`` (below it) at most ``miss_high``; a miss of 0 gives the trivial limit.

    **What is estimated.** A test says "in" when the score is ≥ a threshold t; FPR(t) = P(X ≥ t) for
    a negative's score X, TPR(t) = P(Y ≥ t) for a positive's Y. The true TPR at FPR f is the best TPR
    of a deterministic threshold whose true FPR is at most f, T(f) = sup{TPR(t) : FPR(t) ≤ f}. With
    q = inf{x : F(x) ≥ 1 − f} the negatives' (1 − f) quantile, the thresholds with FPR(t) ≤ f are all
    t > q (and t = q when F has no atom across 1 − f), so T(f) is P(Y > q) or P(Y ≥ q); for continuous
    scores it is the TPR at the threshold t_f with P(X ≥ t_f) = f exactly.

    **Point estimate** (unchanged): the threshold just above the (m − ⌊f m⌋)-th smallest negative (the
    largest TPR with empirical FPR ≤ f); ``achieved fpr`` is that threshold's empirical FPR. Using the
    same negatives to set the threshold and then treating it as fixed, as a plain Clopper–Pearson
    interval on the hits does, ignores the threshold's own error: on Gaussian scores that interval
    covered T(f) in about half of the repeats (issue 47).

    **Interval.** Each limit spends half of its miss on the threshold and half on the hits
    (:func:`quantile_ranks` for the ranks, Clopper & Pearson 1934 for the hits):

    - lower: with X_(j) the order statistic at or above q except with probability ``miss_low``/2, the
      threshold "score > X_(j)" has FPR ≤ f, so T(f) ≥ P(Y > X_(j)); the positives are independent of
      the negatives, so given X_(j) the hits #{Y > X_(j)} are Binomial(n, P(Y > X_(j))), and their
      one-sided Clopper–Pearson lower limit at ``miss_low``/2 lies above P(Y > X_(j)) with probability
      at most ``miss_low``/2;
    - upper: with X_(i) ≤ q except with probability ``miss_high``/2, every threshold with FPR ≤ f is
      ≥ q ≥ X_(i), so T(f) ≤ P(Y ≥ X_(i)); the Clopper–Pearson upper limit on #{Y ≥ X_(i)} at
      ``miss_high``/2 lies below it with probability at most ``miss_high``/2.

    By the union bound each limit misses with probability at most its share, and the interval misses
    with probability at most ``miss_low + miss_high``, for any distributions of X and Y, ties included
    (the counts use > at the lower end and ≥ at the upper end, the conservative side of each). With
    too few negatives for a limit (e.g. at f = 0.1 %, fewer than ln(2/miss)/f ≈ 4,400 negatives for a
    lower limit at miss 2.5 %) that limit is the trivial 0 or 1: no threshold is then known to keep FPR
    ≤ f. The limits are widened to contain the point estimate if they ever exclude it.

    Written by hand: scipy supplies the binomial and beta quantiles, but no maintained library gives a
    confidence interval for the TPR at an FPR that is itself estimated from the same negatives (the
    usual tools are the bootstrap, which has no finite-sample guarantee at low FPR).
    """
    pos = np.asarray(pos, dtype=np.float64)
    neg_sorted = np.sort(np.asarray(neg, dtype=np.float64))
    pos_sorted = np.sort(pos)
    m, n = neg_sorted.size, pos_sorted.size
    if m == 0 or n == 0:
        raise ValueError(f"tpr_interval needs positives and negatives, got {n} and {m}")
    if not (0.0 <= miss_low < 1.0 and 0.0 <= miss_high < 1.0):
        raise ValueError(f"misses must lie in [0, 1), got {miss_low} and {miss_high}")
    allowed = int(math.floor(fpr * m))  # at most this many negatives may score ≥ threshold
    threshold = -math.inf if allowed >= m else float(np.nextafter(neg_sorted[m - allowed - 1], math.inf))
    fp, fn = threshold_counts(pos_sorted, neg_sorted, np.array([threshold]))
    tp = n - int(fn[0])
    value = tp / n
    i, j = quantile_ranks(m, float(fpr), miss_low / 2.0, miss_high / 2.0)
    low, high = 0.0, 1.0
    if j is not None:
        hits = n - int(np.searchsorted(pos_sorted, neg_sorted[j - 1], side="right"))  # Y > X_(j)
        low = 0.0 if hits == 0 else float(beta_dist.ppf(miss_low / 2.0, hits, n - hits + 1))
    if i is not None:
        hits = n - int(np.searchsorted(pos_sorted, neg_sorted[i - 1], side="left"))  # Y ≥ X_(i)
        high = 1.0 if hits == n else float(beta_dist.isf(miss_high / 2.0, hits + 1, n - hits))
    return value, min(low, value), max(high, value), int(fp[0]) / m


def tpr_at_fpr(
    pos: np.ndarray, neg: np.ndarray, level: float, confidence: float
) -> tuple[float, float, float, float]:
    """TPR at FPR ``level`` with a two-sided interval at ``confidence`` (each limit misses with
    probability at most (1 − confidence)/2): :func:`tpr_interval`. Returns (tpr, low, high, achieved
    FPR of the point estimate's threshold)."""
    half = (1.0 - confidence) / 2.0
    return tpr_interval(pos, neg, level, half, half)


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
