"""Estimator ``epsilon_star``: Negoescu et al.'s Epsilon* with its permutation null, an *estimate*.

Fed by a score set of one model's negated losses on its members and non-members (the logit loss
of Negoescu's footnote 1, on which their normal fit of App. B is defined); params ``delta`` and
``seed``, optionally ``n_bootstrap`` (bootstrap resamples of the spread, default 50). Emits, all of
kind "estimate" and never counted (:data:`dpaudit.references.NEGOESCU`):

- ``parametric``: App. B's band rule, with the bootstrap percentile spread at the audit's
  confidence as ``low``/``high`` (a spread, not a confidence interval: the estimator is biased up);
- ``empirical``: Eq. 7 over every loss threshold;
- ``null_mean`` / ``null_high``: Epsilon* over 100 label permutations of the pooled losses (what
  identical distributions give at this n) — a value not above ``null_high`` is no evidence of a leak.
"""

from __future__ import annotations

from dpaudit.bounds.epsilon_star import epsilon_star_empirical, epsilon_star_with_null
from dpaudit.bounds.registry import estimator
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    members, nonmembers = -s.in_scores, -s.out_scores
    delta = s.param("delta")
    star = epsilon_star_with_null(
        members,
        nonmembers,
        delta,
        method="parametric",
        spread_level=confidence,
        n_bootstrap=int(s.params.get("n_bootstrap", 50)),
        seed=int(s.param("seed")),
    )
    empirical = epsilon_star_empirical(members, nonmembers, delta)
    return [
        ResultRow(
            s.key,
            "epsilon_star",
            float(star.epsilon_star),
            "parametric",
            "estimate",
            low=float(star.spread_low),
            high=float(star.spread_high),
        ),
        ResultRow(s.key, "epsilon_star", float(empirical.epsilon_star), "empirical", "estimate"),
        ResultRow(s.key, "epsilon_star", float(star.null_mean), "null_mean", "estimate"),
        ResultRow(s.key, "epsilon_star", float(star.null_high), "null_high", "estimate"),
    ]


estimator("epsilon_star", counted=lambda s: 0)(_rows)
