"""Per-model attack analysis and the aggregation behind the membership audit's outputs.

For one model's member and non-member losses, :func:`analyse_model` runs Yeom et al.'s
loss-threshold attack (average training loss as threshold), reads the TPR at a fixed FPR
(Erlingsson §4), turns the best-threshold advantage into an ε lower bound (Erlingsson Prop. 3) —
once with the bounds library's valid threshold selection and once as the naive same-data maximum —
and computes Epsilon* (Negoescu Def. 2) parametrically and empirically with the KS p-value of the
normal fit (Negoescu App. B, §8.2). :func:`pareto_frontier` marks the privacy–utility frontier of
Negoescu §4.2.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

import numpy as np

from dpaudit.attacks.membership import (
    best_threshold_advantage,
    loss_threshold_attack,
    membership_scores,
    tpr_at_fpr,
)


@dataclass(frozen=True)
class ModelAttack:
    """Every attack number for one model instance (all at the audit's δ)."""

    yeom_threshold: float
    yeom_tpr: float
    yeom_fpr: float
    yeom_advantage: float
    yeom_epsilon: float  # Prop. 3 at the average-loss threshold's advantage (point estimate)
    tpr_at_fpr: float
    valid_advantage: float  # advantage of the validly selected threshold on the held-out half
    epsilon_lower_valid: float  # Clopper–Pearson ε lower bound at that threshold (valid)
    epsilon_heldout_prop3: float  # Prop. 3 at the held-out advantage: a point estimate, not a bound
    naive_advantage: float  # best TPR − FPR over thresholds on the same data (optimistic)
    epsilon_lower_naive: float  # Prop. 3 on the naive advantage: NOT a valid bound
    epsilon_star_parametric: float
    epsilon_star_empirical: float
    ks_pvalue: float
    epsilon_star_control: float  # parametric Epsilon* between two random halves of the non-members

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def analyse_model(
    member_ce: np.ndarray,
    nonmember_ce: np.ndarray,
    member_logit: np.ndarray,
    nonmember_logit: np.ndarray,
    delta: float,
    fpr: float = 0.05,
    confidence: float = 0.95,
    selection: str = "split",
    seed: int = 0,
) -> ModelAttack:
    """All attack numbers of one model from its losses on members and non-members.

    The loss-threshold attacks use cross-entropy (Yeom et al.); Epsilon* uses the logit loss of
    Negoescu's footnote 1, on which their normal fit (App. B) is defined. As a control, Epsilon*
    is also computed between two random halves of the non-members: both come from one
    distribution, so its value is the estimator's finite-sample floor for this model.
    """
    from dpaudit.bounds.empirical import epsilon_from_advantage, epsilon_lower_from_scores
    from dpaudit.bounds.epsilon_star import epsilon_star_empirical, epsilon_star_parametric

    yeom = loss_threshold_attack(member_ce, nonmember_ce)
    naive = best_threshold_advantage(member_ce, nonmember_ce)
    valid = epsilon_lower_from_scores(
        membership_scores(member_ce),
        membership_scores(nonmember_ce),
        delta,
        confidence=confidence,
        method=selection,  # type: ignore[arg-type]
        seed=seed,
    )
    star_param = epsilon_star_parametric(member_logit, nonmember_logit, delta)
    star_emp = epsilon_star_empirical(member_logit, nonmember_logit, delta)
    shuffled = np.random.default_rng(seed).permutation(np.asarray(nonmember_logit, dtype=np.float64))
    half = shuffled.size // 2
    control = epsilon_star_parametric(shuffled[:half], shuffled[half:], delta)
    return ModelAttack(
        yeom_threshold=yeom.threshold,
        yeom_tpr=yeom.tpr,
        yeom_fpr=yeom.fpr,
        yeom_advantage=yeom.advantage,
        yeom_epsilon=epsilon_from_advantage(max(yeom.advantage, 0.0), delta),
        tpr_at_fpr=tpr_at_fpr(member_ce, nonmember_ce, fpr),
        valid_advantage=float(valid.advantage),
        epsilon_lower_valid=float(valid.epsilon_lower),
        epsilon_heldout_prop3=epsilon_from_advantage(min(max(float(valid.advantage), 0.0), 1.0), delta),
        naive_advantage=naive.advantage,
        epsilon_lower_naive=epsilon_from_advantage(max(naive.advantage, 0.0), delta),
        epsilon_star_parametric=float(star_param.epsilon_star),
        epsilon_star_empirical=float(star_emp.epsilon_star),
        ks_pvalue=float(star_param.ks_pvalue),
        epsilon_star_control=float(control.epsilon_star),
    )


def pareto_frontier(privacy_loss: np.ndarray, utility: np.ndarray) -> np.ndarray:
    """Boolean mask of the convex privacy–utility Pareto frontier (Negoescu §4.2).

    A strategy is on the frontier when no other strategy, nor any convex combination of two
    others, has at most its privacy loss and at least its utility with one strictly better: the
    upper-left convex hull of the non-dominated points. Hand-written (a monotone-chain hull over
    a handful of points); NaN points are never on the frontier.
    """
    loss = np.asarray(privacy_loss, dtype=float)
    util = np.asarray(utility, dtype=float)
    if loss.shape != util.shape or loss.ndim != 1:
        raise ValueError(
            f"privacy_loss and utility must be 1-d of equal length, got {loss.shape}, {util.shape}"
        )
    mask = np.zeros(loss.shape, dtype=bool)
    finite = np.flatnonzero(np.isfinite(loss) & np.isfinite(util))
    if finite.size == 0:
        return mask
    order = finite[np.lexsort((-util[finite], loss[finite]))]  # by loss ascending, utility descending
    staircase: list[int] = []  # non-dominated: more utility than every point with less privacy loss
    for i in order:
        if not staircase or util[i] > util[staircase[-1]]:
            staircase.append(int(i))
    hull: list[int] = []
    for i in staircase:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (loss[b] - loss[a]) * (util[i] - util[a]) - (util[b] - util[a]) * (loss[i] - loss[a])
            if cross >= 0:  # b lies on or below the segment a→i: dominated by a convex combination
                hull.pop()
            else:
                break
        hull.append(i)
    mask[hull] = True
    return mask


def summarise(values: Iterable[float]) -> dict[str, float]:
    """Mean, min and max of the finite values (an empty dict when there are none)."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if arr.size == 0:
        return {}
    return {"mean": float(arr.mean()), "min": float(arr.min()), "max": float(arr.max())}


def finite_items(mapping: Mapping[str, float]) -> dict[str, float]:
    """Drop non-finite values (metrics leaves must be numbers; ∞ is said in the report instead)."""
    return {k: float(v) for k, v in mapping.items() if v is not None and math.isfinite(float(v))}
