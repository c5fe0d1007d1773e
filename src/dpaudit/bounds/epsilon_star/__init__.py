"""Epsilon* (Negoescu et al.): an empirical privacy score of ONE trained model from its losses.

For a loss threshold τ the membership test "member if loss ≤ τ" has false-positive rate t
(non-members below τ, Eq. 5) and false-negative rate η (members above τ, Eq. 6). Epsilon* is
log of the largest of (1−δ−η)/t, (1−δ−t)/η, (η−δ)/(1−t), (t−δ)/(1−η) and 1 over thresholds
(Def. 2, Eq. 7), a lower bound on ε of the model's empirical privacy (Def. 1, App. A).

Two estimators of (t, η):

* :func:`epsilon_star_empirical` — empirical CDFs at every distinct loss (sort-based sweep).
* :func:`epsilon_star_parametric` — App. B: normalise losses to [0, 1], shift by 1, p = e^{−loss},
  φ = logit(p), fit one normal per group, evaluate the fitted CDFs densely, take the supremum
  (§3.1). A Kolmogorov–Smirnov p-value reports how normal φ is.

Band handling (``variant``):

* ``"band"`` (default) — App. B's rule: thresholds whose rates t or η leave the band are dropped
  ((0.001, 0.999) for the empirical estimator, (δ, 1 − δ) for the parametric one), "for numerical
  stability". A consequence the paper accepts: two groups that do not overlap at all have no
  threshold inside the band and score 0.
* ``"floor"`` — dpaudit's earlier variant: keep every threshold and floor each ratio's denominator
  (t, η, 1 − t, 1 − η) at the band's lower edge. It scores separated groups high, but it is NOT the
  paper's number and it does not agree with ``"band"`` where thresholds lie inside the band (the
  out-of-band thresholds it keeps can dominate): 3.37 against 1.92 on one data set.

Either is an estimate of one model's empirical privacy with no confidence statement, and it is far
from 0 on two samples of ONE distribution at finite n. So :func:`epsilon_star_with_null` puts every
value beside its **null level at the same n**: the Epsilon* that identical member and non-member
distributions give, from permutations of the same pooled losses (member/non-member labels shuffled,
group sizes kept, the same estimator recomputed; Good 2005, "Permutation, Parametric and Bootstrap
Tests of Hypotheses", ch. 3). It reports the permutation mean, the 95th percentile (as the Monte
Carlo test's critical value), the permutation p-value and ``above_null`` (value > 95th percentile,
a false alarm at most 5 % of the time on identical distributions). It also gives a percentile **bootstrap
spread**. Its measured coverage of the population Epsilon* at a nominal 95 % is 0 % on identical
distributions, 49–79 % at a 0.5-sd shift and 66–99 % at 1 sd (n = 200 and 1000 per side, both
estimators; ``benchmarks/epsilon_star_coverage.py``), so it is NOT a confidence interval and is
never called one.

Nothing here exists in a library; the sweep and the supremum are hand-written with numpy/scipy.

Modules: :mod:`.estimators` (the two estimators and their sweep) and :mod:`.null` (the null level
and the bootstrap spread); every name is importable from ``dpaudit.bounds.epsilon_star``.
"""

from __future__ import annotations

from dpaudit.bounds.accountants import default_delta
from dpaudit.bounds.epsilon_star.estimators import (
    EMPIRICAL_RATE_FLOOR,
    NULL_PERMUTATIONS,
    NULL_QUANTILE,
    VARIANTS,
    EpsilonStar,
    epsilon_star_empirical,
    epsilon_star_from_rates,
    epsilon_star_gaussian,
    epsilon_star_parametric,
    logit_loss,
    logit_transform,
)
from dpaudit.bounds.epsilon_star.null import epsilon_star_null, epsilon_star_with_null, null_critical_rank

__all__ = [
    "NULL_PERMUTATIONS",
    "NULL_QUANTILE",
    "EMPIRICAL_RATE_FLOOR",
    "VARIANTS",
    "EpsilonStar",
    "default_delta",
    "epsilon_star_empirical",
    "epsilon_star_from_rates",
    "epsilon_star_gaussian",
    "epsilon_star_parametric",
    "epsilon_star_null",
    "epsilon_star_with_null",
    "logit_loss",
    "null_critical_rank",
    "logit_transform",
]
