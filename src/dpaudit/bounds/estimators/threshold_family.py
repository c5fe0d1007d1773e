"""Estimator ``threshold_family``: threshold sweeps and the subsampled-Gaussian one-threshold bound.

For score sets of a DP-SGD run whose mechanism is the Poisson-subsampled Gaussian of rate
``sampling_rate`` over ``steps`` steps (params; ``selection`` = the pre-registered sweep, ``split``
or ``bonferroni``; ``registered=()`` for sets that are evidence, not a claim, e.g. a simulation). Rows:

- the two assumption-free sweeps (Nasr et al. 2021 Eqs. 4–5; only ``sweep_<selection>`` counted),
  the family bound (one threshold's (α_U, β_U) through the family's trade-off curve, counted,
  tag ``subsampled-gaussian``), GDP (uncounted), the naive sweep as an estimate;
- with an array ``literal`` (the paper's literal Distinguisher 3 scores), its sweep (counted);
- TPR at 1 % and 5 % FPR, AUROC and advantage with intervals at the audit's confidence.

Uncounted bounds are computed at the audit's confidence, counted ones at the share the caller splits.
"""

from __future__ import annotations

from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.empirical import epsilon_lower_from_scores
from dpaudit.bounds.estimators.scores import strength_rows
from dpaudit.bounds.registry import estimator, pre_registered
from dpaudit.bounds.tradeoff import SubsampledGaussian
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow

#: Grid of the optimistic PLD that turns a noise bound into ε (``SubsampledGaussian.
#: epsilon_discretization``): its error is about T·grid/2 in ε (1e-3 cost 0.045 at T = 100).
FAMILY_EPSILON_DISCRETIZATION = 1e-4
#: ScoresAudit bound → the assumption tag it rests on.
TAGS = {
    "sweep_split": "none",
    "sweep_bonferroni": "none",
    "gdp": "gaussian",
    "subsampled_gaussian": "subsampled-gaussian",
}


def family(sampling_rate: float, steps: int) -> SubsampledGaussian:
    """The assumed mechanism family: ``steps`` Poisson-subsampled Gaussian steps at rate q."""
    return SubsampledGaussian(
        sampling_rate, steps, rtol=0.03, epsilon_discretization=FAMILY_EPSILON_DISCRETIZATION
    )


def counted_bounds(s: ScoreSet) -> list[str]:
    """The bounds of ``s`` a headline may maximise over: the selected sweep, the family bound where
    the set guarantees the family, the literal test's sweep, as far as the attack pre-registered them."""
    names = [f"sweep_{s.params['selection']}"]
    names += ["subsampled_gaussian"] * (s.assumes == "subsampled-gaussian")
    names += ["literal_sweep"] * ("literal" in s.arrays)
    return pre_registered(s, names, [*TAGS, "literal_sweep"])


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    counted = counted_bounds(s)
    scored = [n for n in counted if n in TAGS]
    result = audit_scores(
        s.in_scores,
        s.out_scores,
        delta=s.param("delta"),
        confidence=confidence,
        mechanism=family(s.param("sampling_rate"), int(s.param("steps"))),
        headline=scored or ("subsampled_gaussian",),
        counted_level=counted_level if scored else confidence,
        seed=int(s.param("seed")),
        fpr_levels=(0.01, 0.05),
    )
    rows = []
    for name, b in result.lower_bounds.items():
        if not b.valid:
            rows.append(ResultRow(s.key, "epsilon_estimate", b.epsilon, name, "estimate"))
            continue
        is_counted = name in counted
        rows.append(
            ResultRow(s.key, "epsilon_lower", b.epsilon, name, "bound", level=b.confidence,
                      assumes=TAGS[name], counted=is_counted)
        )  # fmt: skip
    if "literal" in s.arrays:
        level = counted_level if "literal_sweep" in counted else confidence
        literal = s.arrays["literal"]
        sweep = epsilon_lower_from_scores(
            literal[s.member], literal[~s.member], s.param("delta"), level,
            str(s.params["selection"]), int(s.param("seed")),  # type: ignore[arg-type]
        )  # fmt: skip
        rows.append(
            ResultRow(s.key, "epsilon_lower", sweep.epsilon_lower, "literal_sweep", "bound", level=level,
                      counted="literal_sweep" in counted)
        )  # fmt: skip
    return strength_rows(s.key, result, rows, confidence)


estimator("threshold_family", counted=lambda s: len(counted_bounds(s)))(_rows)
