"""Empirical ε lower bounds from what an attack achieved — and, kept apart, ε estimates.

Lower confidence bounds (valid: they exceed the true ε with probability at most 1 − ``confidence``):

* From error counts: a distinguisher with false-positive rate FPR and false-negative rate FNR
  against an (ε, δ)-DP mechanism satisfies ε ≥ max(log((1−δ−FPR)/FNR), log((1−δ−FNR)/FPR))
  (Nasr et al. 2021 Eq. 4, after Kairouz et al.). Replacing the rates by Clopper–Pearson upper
  confidence limits gives a lower confidence bound on ε (Nasr et al. 2021 Eq. 5).
* From raw attack scores: a threshold sweep. Choosing the threshold on the very trials that are
  then counted overclaims, so the default ``"split"`` chooses on one random half and counts on the
  other; ``"bonferroni"`` counts on all trials but widens every interval for the number of
  thresholds tried; ``"naive"`` (choose and count on the same trials) is offered only to show how
  much it overclaims and is flagged ``overclaims=True``.

Confidence convention (everywhere in dpaudit): ``confidence`` is the JOINT level at which the bound
holds. The bound needs two limits (FPR and FNR) to hold together, so each is a one-sided
Clopper–Pearson limit at ``limit_level`` = 1 − (1 − confidence)/2 (union bound); the Bonferroni
sweep divides (1 − confidence)/2 further by the number of thresholds. At confidence 0.95 each limit
is the upper end of a two-sided 95 % interval — Nasr et al.'s convention, which gives their
"ε ≥ 5.60 from 1000 perfect trials at δ = 0".

Estimates, NOT bounds (no confidence statement; they can exceed the true ε):

* From a membership advantage γ = TPR − FPR: log((1−δ)/(1−γ)) (Erlingsson et al. Prop. 3, the
  inverse of their Prop. 2 bound γ ≤ 1 − e^{−ε} + δe^{−ε}) — a bound only when γ itself is a lower
  confidence limit of the mechanism's advantage.
* From the DI adversary of Bernau et al. §5.3: ε′(ii) from its largest final posterior belief (via
  Eq. 10) and ε′(iii) from its identification advantage (via Thm. 2 / Eq. 15). Both plug observed
  point values into an inverse formula, and ε′(iii) also inverts a bound (Thm. 2) that RDP-calibrated
  noise can exceed: they are estimates of ε, listed in :data:`ESTIMATES`, never lower bounds.

Hand-written here: Eq. 4 and the sweeps. Clopper–Pearson limits are Beta quantiles from scipy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import beta

from dpaudit.bounds.identifiability import epsilon_from_rho_alpha

__all__ = [
    "ESTIMATES",
    "LOWER_BOUNDS",
    "THRESHOLD_METHODS",
    "EpsilonLowerBound",
    "ThresholdBound",
    "advantage_from_epsilon",
    "clopper_pearson_upper",
    "cp_cap",
    "di_advantage_from_wins",
    "epsilon_from_advantage",
    "epsilon_from_di_advantage",
    "epsilon_from_posterior_belief",
    "epsilon_from_rates",
    "epsilon_lower_from_counts",
    "epsilon_lower_from_scores",
    "limit_level",
    "select_threshold",
]

THRESHOLD_METHODS = ("split", "bonferroni", "naive")
# Functions that return valid lower confidence bounds on ε, and those that return point estimates.
LOWER_BOUNDS = ("epsilon_lower_from_counts", "epsilon_lower_from_scores")
ESTIMATES = ("epsilon_from_advantage", "epsilon_from_posterior_belief", "epsilon_from_di_advantage")
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


def limit_level(confidence: float, limits: int = 2) -> float:
    """One-sided level of each of ``limits`` Clopper–Pearson limits that hold jointly at ``confidence``.

    Union bound: 1 − (1 − confidence)/limits. Two limits (FPR and FNR) at joint 0.95 → 0.975 each.
    """
    return 1.0 - (1.0 - confidence) / limits


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


def cp_cap(per_world: int, delta: float, confidence: float = 0.95) -> float:
    """The largest ε lower bound N trials per world can certify (Nasr et al. Eqs. 4–5).

    Used to plan an audit's trial count and drawn beside its bounds (the instantiation experiment).

    A perfect test (no false positive, no false negative) with both Clopper–Pearson upper limits at
    the one-sided level 1 − (1 − c)/2 (jointly c): FPR_U = FNR_U = 1 − ((1 − c)/2)^{1/N}. At c = 0.95,
    δ = 1e-5: 3.28 / 4.21 / 4.91 / 5.60 / 7.90 / 12.51 for N = 100 / 250 / 500 / 1000 / 1e4 / 1e6.
    """
    upper = float(clopper_pearson_upper(0, int(per_world), limit_level(confidence, 2)))
    return float(epsilon_from_rates(upper, upper, delta))


@dataclass(frozen=True)
class EpsilonLowerBound:
    """ε lower confidence bound from error counts (Nasr et al. Eqs. 4–5) and its ingredients."""

    epsilon_lower: float
    epsilon_point: float  # Eq. 4 on the observed rates; inf when a rate is 0
    fpr_upper: float
    fnr_upper: float
    fpr: float
    fnr: float
    confidence: float  # joint level at which epsilon_lower is a valid lower bound
    limit_level: float  # one-sided level of each of the two Clopper–Pearson limits
    delta: float = 0.0


def epsilon_lower_from_counts(
    fp: int,
    fn: int,
    negatives: int,
    positives: int,
    delta: float,
    confidence: float = 0.95,
    *,
    per_limit_level: float | None = None,
) -> EpsilonLowerBound:
    """Lower confidence bound on ε from FP/FN counts with Clopper–Pearson limits — Nasr et al. Eq. 5.

    ``fp`` of ``negatives`` trials (mechanism run on D′) were called positive, ``fn`` of
    ``positives`` trials (run on D) were called negative. The bound holds with probability
    ≥ ``confidence`` (joint): each limit is at 1 − (1 − confidence)/2. ``per_limit_level`` overrides
    that level (the Bonferroni sweep passes a stricter one; ``confidence`` must then state the joint
    level the caller guarantees). δ = 0 (pure DP) is allowed. The bound never exceeds the point
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
    level = limit_level(confidence) if per_limit_level is None else float(per_limit_level)
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
        limit_level=level,
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

    A point ESTIMATE when γ is an observed advantage; a lower bound only if γ is a lower confidence
    limit of the mechanism's advantage. γ ≤ δ gives 0; γ = 1 returns ∞.
    """
    delta = _check_delta(delta)
    advantage = float(advantage)
    if not -1.0 <= advantage <= 1.0:
        raise ValueError(f"advantage must lie in [-1, 1], got {advantage!r}")
    if advantage >= 1.0:
        return math.inf
    return max(0.0, math.log((1.0 - delta) / (1.0 - advantage)))


def epsilon_from_posterior_belief(belief: float) -> float:
    """ε′(ii) ESTIMATE = ln(β/(1−β)) from the largest final posterior belief — Bernau §5.3 (ii), Eq. 10.

    Not a lower bound: one observed maximum belief carries no confidence statement. A belief ≤ 0.5
    (no better than the uniform prior) gives 0; a belief of 1 gives ∞.
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
    """ε′(iii) ESTIMATE from the DI adversary's advantage (inverse of Thm. 2) — Bernau §5.3 (iii), Eq. 15.

    Not a lower bound: it inverts Thm. 2, which holds for classically calibrated noise only (with
    RDP-calibrated noise the advantage can exceed it, so ε′(iii) can exceed the true ε). A
    non-positive advantage gives 0; an advantage of 1 gives ∞.
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
    confidence: float = float("nan")  # joint level claimed (not met when overclaims is True)
    limit_level: float = float("nan")  # one-sided level of each Clopper–Pearson limit actually used
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
        # Order statistics (no interpolation, so scores near ±1e308 cannot overflow).
        pooled = np.unique(pooled[np.linspace(0, pooled.size - 1, max_thresholds).round().astype(int)])
    return pooled


def threshold_counts(
    pos_sorted: np.ndarray, neg_sorted: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """FP = negatives with score ≥ t; FN = positives with score < t, at every threshold t (vectorised
    with searchsorted over the sorted scores). The one threshold sweep of the sweeps here and of the
    scores auditor's advantage (:mod:`dpaudit.bounds.strength`)."""
    fp = neg_sorted.size - np.searchsorted(neg_sorted, thresholds, side="left")
    fn = np.searchsorted(pos_sorted, thresholds, side="left")
    return fp, fn


def _bounds_at(
    fp: np.ndarray, fn: np.ndarray, n_neg: int, n_pos: int, delta: float, level: float
) -> np.ndarray:
    return epsilon_from_rates(
        clopper_pearson_upper(fp, n_neg, level), clopper_pearson_upper(fn, n_pos, level), delta
    )


def _split_scores(
    pos: np.ndarray, neg: np.ndarray, split_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A random share ``split_fraction`` of each class (at least one score, never all) to choose a
    threshold on, and the rest to count at it: (pos_select, pos_count, neg_select, neg_count).

    Sorting before the seeded permutation makes the split a function of the multiset of scores, not
    of their order.
    """
    rng = np.random.default_rng(seed)
    pos, neg = rng.permutation(np.sort(pos)), rng.permutation(np.sort(neg))
    cut_pos = min(max(int(round(pos.size * split_fraction)), 1), pos.size - 1)
    cut_neg = min(max(int(round(neg.size * split_fraction)), 1), neg.size - 1)
    return pos[:cut_pos], pos[cut_pos:], neg[:cut_neg], neg[cut_neg:]


def select_threshold(
    pos: np.ndarray,
    neg: np.ndarray,
    objective: Callable[[np.ndarray, np.ndarray, int, int, float], np.ndarray],
    method: ThresholdMethod,
    confidence: float,
    seed: int = 0,
    max_thresholds: int = 200,
    limits: int = 2,
    split_fraction: float = 0.5,
) -> tuple[float, int, int, int, int, float, int]:
    """Choose a score threshold validly and count errors at it: the machinery shared by the sweeps.

    ``objective(fp, fn, n_neg, n_pos, level)`` scores candidate thresholds (vectorised over
    them), given the one-sided level of each limit that the method uses. Returns (threshold, fp,
    fn, n_neg, n_pos, limit_level, K): the counts to turn into the final bound, the one-sided
    level of each of the ``limits`` limits, and the number K of candidate thresholds.
    ``"split"``: choose on a random share ``split_fraction`` of each class (``seed``; default a
    half), count on the rest at level
    1 − (1−c)/limits. ``"bonferroni"``: all trials, level 1 − (1−c)/(limits·K). ``"naive"``: all
    trials at 1 − (1−c)/limits — not valid.
    """
    if method == "split":
        if pos.size < 2 or neg.size < 2:
            raise ValueError("method 'split' needs at least 2 positive and 2 negative scores")
        if not 0.0 < split_fraction < 1.0:
            raise ValueError(f"split_fraction must lie in (0, 1), got {split_fraction!r}")
        parts = _split_scores(pos, neg, split_fraction, seed)
        pos_sel, pos_eval, neg_sel, neg_eval = (np.sort(part) for part in parts)
        thresholds = _candidate_thresholds(pos_sel, neg_sel, max_thresholds)
        level = limit_level(confidence, limits)
        fp, fn = threshold_counts(pos_sel, neg_sel, thresholds)
        values = objective(fp, fn, neg_sel.size, pos_sel.size, level)
        adv = np.abs((pos_sel.size - fn) / pos_sel.size - fp / neg_sel.size)
        best = int(np.lexsort((-adv, -values))[0])  # highest value, ties → largest |advantage|
        threshold = float(thresholds[best])
        fp_e, fn_e = threshold_counts(pos_eval, neg_eval, np.array([threshold]))
        return threshold, int(fp_e[0]), int(fn_e[0]), neg_eval.size, pos_eval.size, level, thresholds.size
    ps, ns = np.sort(pos), np.sort(neg)
    thresholds = _candidate_thresholds(ps, ns, max_thresholds)
    k = thresholds.size if method == "bonferroni" else 1
    level = limit_level(confidence, limits * k)
    fp, fn = threshold_counts(ps, ns, thresholds)
    values = objective(fp, fn, ns.size, ps.size, level)
    adv = np.abs((ps.size - fn) / ps.size - fp / ns.size)
    best = int(np.lexsort((-adv, -values))[0])
    return float(thresholds[best]), int(fp[best]), int(fn[best]), ns.size, ps.size, level, thresholds.size


def epsilon_lower_from_scores(
    positive_scores: np.ndarray,
    negative_scores: np.ndarray,
    delta: float,
    confidence: float = 0.95,
    method: ThresholdMethod = "split",
    seed: int = 0,
    max_thresholds: int = 200,
) -> ThresholdBound:
    """Threshold sweep over attack scores → ε lower bound (Nasr et al. Eqs. 4–5 at the chosen threshold).

    Higher score means "positive" (trial ran on D / member). ``confidence`` is the joint level of the
    bound. Methods:

    * ``"split"`` (default, valid): shuffle each class with ``seed``, choose the threshold that
      maximises the Clopper–Pearson bound on the first half, report the bound counted on the second
      half only (limits at 1 − (1−c)/2).
    * ``"bonferroni"`` (valid): all trials, each of the K candidate thresholds gets limits at
      1 − (1−c)/(2K), report the maximum.
    * ``"naive"`` (overclaims): choose and count on the same trials at 1 − (1−c)/2. Flagged with
      ``overclaims=True``; use only to show the optimism of the practice.

    At most ``max_thresholds`` candidate thresholds are tried (pooled-score order statistics).
    """
    pos = _as_scores(positive_scores, "positive_scores")
    neg = _as_scores(negative_scores, "negative_scores")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if method not in THRESHOLD_METHODS:
        raise ValueError(f"method must be one of {THRESHOLD_METHODS}, got {method!r}")
    if max_thresholds < 1:
        raise ValueError(f"max_thresholds must be >= 1, got {max_thresholds!r}")

    def objective(fp: np.ndarray, fn: np.ndarray, n_neg: int, n_pos: int, level: float) -> np.ndarray:
        return _bounds_at(fp, fn, n_neg, n_pos, delta, level)

    threshold, fp_c, fn_c, n_neg, n_pos, level, n_thresholds = select_threshold(
        pos, neg, objective, method, confidence, seed, max_thresholds
    )
    counted = epsilon_lower_from_counts(fp_c, fn_c, n_neg, n_pos, delta, confidence, per_limit_level=level)
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
        confidence=confidence,
        limit_level=level,
        n_thresholds=int(n_thresholds),
        overclaims=method == "naive",
    )
