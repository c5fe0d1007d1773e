"""Empirical ε lower bounds from what an attack achieved.

* From error counts: a distinguisher with false-positive rate FPR and false-negative rate FNR
  against an (ε, δ)-DP mechanism satisfies ε ≥ max(log((1−δ−FPR)/FNR), log((1−δ−FNR)/FPR))
  (Nasr et al. Eq. 4, after Kairouz et al.). Replacing the rates by Clopper–Pearson upper
  confidence limits gives a lower confidence bound on ε (Nasr et al. Eq. 5).
* From a membership advantage γ = TPR − FPR: ε ≥ log((1−δ)/(1−γ)) (Erlingsson et al. Prop. 3, the
  inverse of their Prop. 2 bound γ ≤ 1 − e^{−ε} + δe^{−ε}).
* From the DI adversary of Bernau et al. §5.3: its largest final posterior belief (via Eq. 10) and
  its identification advantage (via Thm. 2 / Eq. 15).
* From raw attack scores: a threshold sweep. Choosing the threshold on the very trials that are
  then counted overclaims, so the default ``"split"`` chooses on one random half and counts on the
  other; ``"bonferroni"`` counts on all trials but widens every interval for the number of
  thresholds tried; ``"naive"`` (choose and count on the same trials) is offered only to show how
  much it overclaims.

Confidence convention: ``confidence`` is the level of each Clopper–Pearson limit, as in Nasr et al.
With ``two_sided=True`` each limit is the upper end of a two-sided interval at that level (this
reproduces Nasr's "5.60 from 1000 perfect trials"), so both limits hold — and the ε bound is valid —
with probability ≥ ``confidence``. With one-sided limits the union bound gives ≥ 1 − 2(1 − c).
:attr:`EpsilonLowerBound.joint_confidence` reports that level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import beta

from dpaudit.bounds.identifiability import epsilon_from_rho_alpha

__all__ = [
    "THRESHOLD_METHODS",
    "EpsilonLowerBound",
    "ThresholdBound",
    "advantage_from_epsilon",
    "clopper_pearson_upper",
    "di_advantage_from_wins",
    "epsilon_from_advantage",
    "epsilon_from_di_advantage",
    "epsilon_from_posterior_belief",
    "epsilon_from_rates",
    "epsilon_lower_from_counts",
    "epsilon_lower_from_scores",
    "joint_confidence",
]

THRESHOLD_METHODS = ("split", "bonferroni", "naive")
ThresholdMethod = Literal["split", "bonferroni", "naive"]


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}")
    return delta


def _check_confidence(confidence: float) -> float:
    confidence = float(confidence)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    return confidence


def clopper_pearson_upper(successes: np.ndarray | int, trials: np.ndarray | int, level: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper limit at ``level`` for a binomial proportion (vectorised).

    The exact limit is the ``level`` quantile of Beta(k + 1, n − k) (Clopper & Pearson 1934); it is
    1 when k = n. scipy's beta distribution does the work.
    """
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    k, n = np.broadcast_arrays(k, n)
    full = k >= n
    upper = beta.ppf(level, k + 1.0, np.where(full, 1.0, n - k))
    return np.where(full, 1.0, upper)


def joint_confidence(confidence: float, two_sided: bool) -> float:
    """Level at which the FPR and FNR limits hold together (union bound), hence the ε bound."""
    return confidence if two_sided else 1.0 - 2.0 * (1.0 - confidence)


def _limit_level(confidence: float, two_sided: bool) -> float:
    """One-sided quantile used for each limit: the upper end of a two-sided interval sits at (1 + c)/2."""
    return (1.0 + confidence) / 2.0 if two_sided else confidence


def epsilon_from_rates(fpr: np.ndarray | float, fnr: np.ndarray | float, delta: float) -> np.ndarray:
    """ε = max(log((1−δ−FPR)/FNR), log((1−δ−FNR)/FPR), 0) — Nasr et al. Eq. 4 (vectorised).

    A zero rate with a positive numerator gives ε = ∞ (no finite ε explains a perfect test).
    """
    fpr = np.asarray(fpr, dtype=float)
    fnr = np.asarray(fnr, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(1.0 - delta - fpr > 0, np.log(np.maximum(1.0 - delta - fpr, 1e-300) / fnr), -np.inf)
        b = np.where(1.0 - delta - fnr > 0, np.log(np.maximum(1.0 - delta - fnr, 1e-300) / fpr), -np.inf)
    return np.maximum(np.maximum(a, b), 0.0)


@dataclass(frozen=True)
class EpsilonLowerBound:
    """ε lower confidence bound from error counts (Nasr et al. Eqs. 4–5) and its ingredients."""

    epsilon_lower: float
    epsilon_point: float  # Eq. 4 on the observed rates; inf when a rate is 0
    fpr_upper: float
    fnr_upper: float
    fpr: float
    fnr: float
    confidence: float  # level of each Clopper–Pearson limit
    two_sided: bool = False
    joint_confidence: float = float("nan")  # level at which epsilon_lower is a valid bound
    delta: float = 0.0


def epsilon_lower_from_counts(
    fp: int,
    fn: int,
    negatives: int,
    positives: int,
    delta: float,
    confidence: float = 0.95,
    two_sided: bool = False,
) -> EpsilonLowerBound:
    """Lower confidence bound on ε from FP/FN counts with Clopper–Pearson limits — Nasr et al. Eq. 5.

    ``fp`` of ``negatives`` trials (mechanism run on D′) were called positive, ``fn`` of
    ``positives`` trials (run on D) were called negative. The bound never exceeds the point
    estimate, and is 0 when the attack does no better than chance.
    """
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    for name, value in (("fp", fp), ("fn", fn), ("negatives", negatives), ("positives", positives)):
        if int(value) != value or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    if negatives == 0 or positives == 0:
        raise ValueError(
            f"negatives and positives must be > 0, got negatives={negatives}, positives={positives}"
        )
    if fp > negatives:
        raise ValueError(f"fp={fp} exceeds negatives={negatives}")
    if fn > positives:
        raise ValueError(f"fn={fn} exceeds positives={positives}")
    level = _limit_level(confidence, two_sided)
    fpr_upper = float(clopper_pearson_upper(fp, negatives, level))
    fnr_upper = float(clopper_pearson_upper(fn, positives, level))
    fpr, fnr = fp / negatives, fn / positives
    return EpsilonLowerBound(
        epsilon_lower=float(epsilon_from_rates(fpr_upper, fnr_upper, delta)),
        epsilon_point=float(epsilon_from_rates(fpr, fnr, delta)),
        fpr_upper=fpr_upper,
        fnr_upper=fnr_upper,
        fpr=fpr,
        fnr=fnr,
        confidence=confidence,
        two_sided=bool(two_sided),
        joint_confidence=joint_confidence(confidence, two_sided),
        delta=delta,
    )


def advantage_from_epsilon(epsilon: float, delta: float) -> float:
    """Largest membership advantage under (ε, δ)-DP: 1 − e^{−ε} + δe^{−ε} — Erlingsson et al. Prop. 2."""
    delta = _check_delta(delta)
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return 1.0 - math.exp(-epsilon) + delta * math.exp(-epsilon)


def epsilon_from_advantage(advantage: float, delta: float) -> float:
    """ε ≥ log((1−δ)/(1−γ)) for a membership advantage γ — Erlingsson et al. Prop. 3.

    γ ≤ δ proves nothing (returns 0); γ = 1 returns ∞.
    """
    delta = _check_delta(delta)
    advantage = float(advantage)
    if not -1.0 <= advantage <= 1.0:
        raise ValueError(f"advantage must lie in [-1, 1], got {advantage!r}")
    if advantage >= 1.0:
        return math.inf
    return max(0.0, math.log((1.0 - delta) / (1.0 - advantage)))


def epsilon_from_posterior_belief(belief: float) -> float:
    """Empirical ε′ = ln(β/(1−β)) from the largest final posterior belief — Bernau et al. §5.3 (ii), Eq. 10.

    A belief ≤ 0.5 (no better than the uniform prior) gives 0; a belief of 1 gives ∞.
    """
    belief = float(belief)
    if not 0.0 <= belief <= 1.0:
        raise ValueError(f"belief must lie in [0, 1], got {belief!r}")
    if belief >= 1.0:
        return math.inf
    return max(0.0, math.log(belief / (1.0 - belief)))


def di_advantage_from_wins(wins: int, experiments: int) -> float:
    """Adv^{DI,Gau} = 2·n_win/n_exp − 1, the DI adversary's estimated advantage — Bernau et al. §5.3 (iii)."""
    if experiments <= 0 or not 0 <= wins <= experiments:
        raise ValueError(
            f"need 0 <= wins <= experiments and experiments > 0, got wins={wins}, "
            f"experiments={experiments}"
        )
    return 2.0 * wins / experiments - 1.0


def epsilon_from_di_advantage(advantage: float, delta: float) -> float:
    """Empirical ε′ from the DI adversary's advantage (inverse of Thm. 2) — Bernau et al. §5.3 (iii), Eq. 15.

    A non-positive advantage gives 0; an advantage of 1 gives ∞.
    """
    advantage = float(advantage)
    if not -1.0 <= advantage <= 1.0:
        raise ValueError(f"advantage must lie in [-1, 1], got {advantage!r}")
    if advantage <= 0.0:
        return 0.0
    if advantage >= 1.0:
        return math.inf
    return epsilon_from_rho_alpha(advantage, delta)


@dataclass(frozen=True)
class ThresholdBound:
    """Best valid ε lower bound over score thresholds ("positive" = score ≥ threshold)."""

    epsilon_lower: float
    threshold: float
    fp: int
    fn: int
    negatives: int
    positives: int
    method: str
    advantage: float  # TPR − FPR at the chosen threshold on the counted trials
    epsilon_point: float = float("nan")
    fpr_upper: float = float("nan")
    fnr_upper: float = float("nan")
    confidence: float = float("nan")  # level of each Clopper–Pearson limit actually used
    joint_confidence: float = float("nan")  # level at which epsilon_lower is valid (nan: not valid)
    n_thresholds: int = 0
    overclaims: bool = False  # True for "naive": threshold chosen on the counted trials


def _as_scores(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _candidate_thresholds(pos: np.ndarray, neg: np.ndarray, max_thresholds: int) -> np.ndarray:
    pooled = np.unique(np.concatenate([pos, neg]))
    if pooled.size > max_thresholds:
        pooled = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, max_thresholds)))
    return pooled


def _counts(
    pos_sorted: np.ndarray, neg_sorted: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """FP = negatives with score ≥ t; FN = positives with score < t (vectorised with searchsorted)."""
    fp = neg_sorted.size - np.searchsorted(neg_sorted, thresholds, side="left")
    fn = np.searchsorted(pos_sorted, thresholds, side="left")
    return fp, fn


def _bounds_at(
    fp: np.ndarray, fn: np.ndarray, n_neg: int, n_pos: int, delta: float, level: float
) -> np.ndarray:
    return epsilon_from_rates(
        clopper_pearson_upper(fp, n_neg, level), clopper_pearson_upper(fn, n_pos, level), delta
    )


def epsilon_lower_from_scores(
    positive_scores: np.ndarray,
    negative_scores: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    method: ThresholdMethod = "split",
    seed: int = 0,
    two_sided: bool = False,
    max_thresholds: int = 200,
) -> ThresholdBound:
    """Threshold sweep over attack scores → ε lower bound (Nasr et al. Eqs. 4–5 at the chosen threshold).

    Higher score means "positive" (trial ran on D / member). Methods:

    * ``"split"`` (default, valid): shuffle each class with ``seed``, choose the threshold that
      maximises the Clopper–Pearson bound on the first half, report the bound counted on the second
      half only.
    * ``"bonferroni"`` (valid): all trials, every one of the K candidate thresholds gets limits at
      level 1 − (1−c)/K, report the maximum.
    * ``"naive"`` (overclaims): choose and count on the same trials at level c. Flagged with
      ``overclaims=True``; use only to show the optimism of the practice.

    At most ``max_thresholds`` candidate thresholds are tried (pooled-score quantiles).
    """
    pos = _as_scores(positive_scores, "positive_scores")
    neg = _as_scores(negative_scores, "negative_scores")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if method not in THRESHOLD_METHODS:
        raise ValueError(f"method must be one of {THRESHOLD_METHODS}, got {method!r}")
    if max_thresholds < 1:
        raise ValueError(f"max_thresholds must be >= 1, got {max_thresholds!r}")
    level = _limit_level(confidence, two_sided)

    if method == "split":
        if pos.size < 2 or neg.size < 2:
            raise ValueError("method 'split' needs at least 2 positive and 2 negative scores")
        rng = np.random.default_rng(seed)
        pos, neg = rng.permutation(pos), rng.permutation(neg)
        pos_sel, pos_eval = pos[: pos.size // 2], pos[pos.size // 2 :]
        neg_sel, neg_eval = neg[: neg.size // 2], neg[neg.size // 2 :]
        thresholds = _candidate_thresholds(pos_sel, neg_sel, max_thresholds)
        ps, ns = np.sort(pos_sel), np.sort(neg_sel)
        fp, fn = _counts(ps, ns, thresholds)
        sel_bounds = _bounds_at(fp, fn, ns.size, ps.size, delta, level)
        sel_adv = np.abs((ps.size - fn) / ps.size - fp / ns.size)
        best = int(np.lexsort((-sel_adv, -sel_bounds))[0])  # highest bound, ties → largest |advantage|
        threshold = float(thresholds[best])
        eval_pos, eval_neg = np.sort(pos_eval), np.sort(neg_eval)
        fp_e, fn_e = _counts(eval_pos, eval_neg, np.array([threshold]))
        fp_c, fn_c, n_pos, n_neg = int(fp_e[0]), int(fn_e[0]), eval_pos.size, eval_neg.size
        used_confidence = confidence
        n_thresholds = thresholds.size
    else:
        thresholds = _candidate_thresholds(pos, neg, max_thresholds)
        ps, ns = np.sort(pos), np.sort(neg)
        fp, fn = _counts(ps, ns, thresholds)
        used_confidence = 1.0 - (1.0 - confidence) / thresholds.size if method == "bonferroni" else confidence
        bounds = _bounds_at(fp, fn, ns.size, ps.size, delta, _limit_level(used_confidence, two_sided))
        adv = np.abs((ps.size - fn) / ps.size - fp / ns.size)
        best = int(np.lexsort((-adv, -bounds))[0])
        threshold = float(thresholds[best])
        fp_c, fn_c, n_pos, n_neg = int(fp[best]), int(fn[best]), ps.size, ns.size
        n_thresholds = thresholds.size

    counted = epsilon_lower_from_counts(fp_c, fn_c, n_neg, n_pos, delta, used_confidence, two_sided)
    valid_level = joint_confidence(confidence, two_sided) if method != "naive" else float("nan")
    return ThresholdBound(
        epsilon_lower=counted.epsilon_lower,
        threshold=threshold,
        fp=fp_c,
        fn=fn_c,
        negatives=n_neg,
        positives=n_pos,
        method=method,
        advantage=(n_pos - fn_c) / n_pos - fp_c / n_neg,
        epsilon_point=counted.epsilon_point,
        fpr_upper=counted.fpr_upper,
        fnr_upper=counted.fnr_upper,
        confidence=used_confidence,
        joint_confidence=valid_level,
        n_thresholds=int(n_thresholds),
        overclaims=method == "naive",
    )
