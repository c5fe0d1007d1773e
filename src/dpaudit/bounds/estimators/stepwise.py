"""Estimator ``stepwise_family``: the per-step subsampled-Gaussian family bound of a canary.

:func:`dpaudit.bounds.stepwise.stepwise_family_bound` on the per-step canary projections of every
trial (Nasr et al. 2021 threat models E/F): the set's arrays ``step_sum`` and ``step_sum_squares``
hold Σ_t d_t and Σ_t d_t² per trial over ``steps`` observed steps, or, for a simulation that kept
only per-world totals, params ``in_count``/``in_total``/``in_total_squares`` and ``out_…``.
Params: ``delta``, ``sampling_rate``, ``steps``, ``known_baseline`` (1: the canary sits where no
record's gradient reaches, so world D's per-step mean is 0 by construction). Counted only where the
set declares ``assumes = "subsampled-gaussian"`` (the family law is guaranteed for its trials) and
does not withhold it (``registered=()`` marks evidence, not a claim, e.g. a simulation). Rows: the bound
(tag ``subsampled-gaussian``) and its point estimate ε(σ̂/Δ̂).
"""

from __future__ import annotations

from dpaudit.bounds.estimators.threshold_family import family
from dpaudit.bounds.registry import estimator, pre_registered
from dpaudit.bounds.stepwise import StepMoments, stepwise_family_bound
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow

NAME = "stepwise_family"


def moments(s: ScoreSet) -> tuple[StepMoments, StepMoments]:
    """(world D′, world D) moments of the per-step projections."""
    if "step_sum" not in s.arrays:
        return tuple(  # type: ignore[return-value]
            StepMoments(int(s.param(f"{w}_count")), s.param(f"{w}_total"), s.param(f"{w}_total_squares"))
            for w in ("in", "out")
        )
    steps = int(s.param("steps"))
    total, squares = s.arrays["step_sum"], s.arrays["step_sum_squares"]
    return tuple(  # type: ignore[return-value]
        StepMoments(int(rows.sum()) * steps, float(total[rows].sum()), float(squares[rows].sum()))
        for rows in (s.member, ~s.member)
    )


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    counted = _counted(s) == 1
    level = counted_level if counted else confidence
    inserted, absent = moments(s)
    bound = stepwise_family_bound(
        inserted,
        absent,
        family(s.param("sampling_rate"), int(s.param("steps"))),
        delta=s.param("delta"),
        confidence=level,
        known_baseline=0.0 if int(s.param("known_baseline")) else None,
    )
    return [
        ResultRow(s.key, "epsilon_lower", bound.epsilon, NAME, "bound", level=level,
                  assumes="subsampled-gaussian", counted=counted),
        ResultRow(s.key, "epsilon_estimate", bound.epsilon_estimate, NAME, "estimate"),
    ]  # fmt: skip


def _counted(s: ScoreSet) -> int:
    """1 when the family law is guaranteed (``assumes``) and the attack registered the bound."""
    allowed = [NAME] if s.assumes == "subsampled-gaussian" else []
    return len(pre_registered(s, allowed, [NAME]))


estimator(NAME, counted=_counted)(_rows)
