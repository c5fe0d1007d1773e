"""The scores auditor: attack scores in, ε lower bounds (each labelled with its assumption) out.

Every adversary ends in "in" scores (trials on D / members / D′ with the target — the world the
attack should call positive) and "out" scores; higher score = "in". :func:`audit_scores` turns them
into:

Lower bounds (``valid=True``: exceed the true ε with probability ≤ 1 − ``confidence``, JOINTLY —
both error-rate limits, and every threshold tried, are inside that level):

* ``sweep_split``, ``sweep_bonferroni`` — the threshold sweep of Nasr et al. 2021 Eqs. 4–5 with the
  threshold chosen on a held-out half or Bonferroni-corrected (:mod:`dpaudit.bounds.empirical`).
  Assume nothing about the mechanism.
* ``gdp`` — Nasr et al. 2023 ("Tight Auditing of Differentially Private Machine Learning"):
  Clopper–Pearson upper limits (α_U, β_U) at a validly chosen threshold, μ_LB from the Gaussian
  trade-off curve Φ(Φ⁻¹(1−α) − μ) (Dong, Roth & Su 2022), then ε(δ) of μ_LB-GDP. ASSUMES a
  Gaussian trade-off curve (full-batch Gaussian mechanism); it uses the whole score distribution's
  middle instead of its δ-tail, so it is far tighter than the sweep with the same trials.
* ``subsampled_gaussian`` (with ``mechanism=SubsampledGaussian(q, T)``) — the same (α_U, β_U)
  mapped through that family's own trade-off curves: z_UB, the smallest noise multiplier whose
  curve the point rules out, then ε(δ) of (q, T, z_UB) from dp_accounting's PLD. ASSUMES the
  Poisson-subsampled Gaussian family with those q and T (its tails are lighter than its GDP fit,
  so ``gdp`` would overclaim there).
* ``one_run`` (with ``one_run=True``) — Steinke, Nasr & Jagielski 2023, for canaries included
  independently with probability 1/2 in ONE training run (:func:`one_run_lower_bound`).

An estimate (``valid=False``): ``sweep_naive`` (threshold chosen and counted on the same trials), and
every sweep when the scores are one run's canaries (``one_run=True``: the sweep needs independent runs).

The headline (:attr:`ScoresAudit.headline`, metric ``epsilon_lower``) counts only what is
guaranteed for the data at hand: the assumption-free sweeps, and a family or one-run bound only
when the caller declares that its assumption holds. It states the level the caller asked, jointly
over every bound it maximises (Bonferroni shares), so scores of unknown origin can never headline
a Gaussian-family bound: randomised response at ε = 1 gives GDP "bounds" of ∞ at δ = 0.

Attack-strength figures with intervals: TPR at fixed FPR (two-sided, with the threshold's own
uncertainty: :func:`dpaudit.bounds.strength.tpr_interval`), AUROC (sklearn; Hanley & McNeil 1982 normal
interval), advantage max(TPR − FPR) (DKW band, Massart's constant: both empirical CDFs inside
±√(ln(4/(1−c))/(2n)) jointly). Intervals are two-sided at ``confidence``.

Hand-written here: the choice of threshold, the inversions, Hanley–McNeil and DKW (closed forms);
scipy gives the quantiles, sklearn the AUROC, dp_accounting the PLDs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from dpaudit.bounds.empirical import (
    _as_scores,
    _check_confidence,
    _check_delta,
    _split_scores,
    clopper_pearson_upper,
    epsilon_lower_from_scores,
    limit_level,
    select_threshold,
)
from dpaudit.bounds.steinke import OneRunBound, one_run_lower_bound, one_run_p_value
from dpaudit.bounds.strength import advantage_interval, auroc_interval, tpr_at_fpr
from dpaudit.bounds.tradeoff import SubsampledGaussian, gdp_epsilon, gdp_mu_lower
from dpaudit.logs import progress

__all__ = [
    "ASSUMPTIONS",
    "ASSUMPTION_FREE",
    "ESTIMATORS",
    "LowerBound",
    "OneRunBound",
    "ScoresAudit",
    "SubsampledGaussian",
    "audit_scores",
    "finite",
    "gdp_lower_bound",
    "one_run_lower_bound",
    "one_run_p_value",
]

#: The attack-strength figures' former names here (experiments import them): :mod:`.strength`.
_tpr_at_fpr, _auroc, _advantage = tpr_at_fpr, auroc_interval, advantage_interval

ASSUMPTIONS = {
    "sweep_split": "none",
    "sweep_bonferroni": "none",
    "sweep_naive": "none (but the threshold is chosen on the counted trials: overclaims)",
    "gdp": "assumes a Gaussian trade-off (full-batch Gaussian mechanism)",
    "subsampled_gaussian": "assumes the Poisson-subsampled Gaussian family with q={q:g}, T={steps}",
    "one_run": "assumes canaries included independently with probability 1/2 in one training run",
}
#: What a threshold sweep is when its scores are the canaries of ONE run: Clopper–Pearson on FP/FN
#: counts needs one independent run per trial, and no theorem extends it to canaries that share a run
#: (Steinke, Nasr & Jagielski 2023 prove the guessing test of ``one_run`` instead). An estimate there.
SWEEP_ON_ONE_RUN = "an estimate: these scores share one run, and the sweep needs one run per trial"
ESTIMATORS = tuple(ASSUMPTIONS)
#: Estimators that assume nothing about the mechanism: the only ones a headline counts by default.
ASSUMPTION_FREE = ("sweep_split", "sweep_bonferroni")
# Share of trials the GDP estimators spend on choosing the threshold (the rest are counted). μ_LB is
# flat over the middle thresholds of two Gaussians, so a small share finds a good one and leaves
# most trials for the Clopper–Pearson limits. Tuned on the identifiability setting (ρβ = 0.99,
# 1000 trials per world; mean ratio to ε_PLD over 40 seeds): midpoint rule 0.82 at 2–10 %;
# maximising μ_LB on the held-out share 0.80 at 5 %, 0.79 at 20 %, 0.76 at 30 %.
GDP_SPLIT_FRACTION = 0.05
GDP_SELECTIONS = ("midpoint", "split", "bonferroni")
CAP = 1e308  # ±inf are written as ±1e308 so that every metrics leaf stays a finite number
#: The headline when no counted bound exists (nothing to maximise over).
NO_BOUND = "none"


def finite(value: float) -> float:
    """±inf → ±1e308, NaN stays NaN (callers never pass NaN to metrics)."""
    value = float(value)
    if math.isnan(value):
        return value
    return max(-CAP, min(CAP, value))


@dataclass(frozen=True)
class LowerBound:
    """One ε lower bound (or, with ``valid=False``, estimate) and what it rests on.

    ``valid``: ``epsilon`` exceeds the true ε with probability at most 1 − ``confidence`` WHEN
    ``assumption`` holds. ``counted``: the audit's headline maximises over this bound, because its
    assumption is "none" or is guaranteed by whoever called the auditor (the experiment's own
    mechanism, or a user's explicit declaration); ``confidence`` of a counted bound is its share of
    the headline's level.
    """

    epsilon: float
    estimator: str
    assumption: str
    valid: bool
    confidence: float
    details: Mapping[str, float] = field(default_factory=dict)
    counted: bool = False


@dataclass(frozen=True)
class ScoresAudit:
    """Everything :func:`audit_scores` found; ``metrics()`` flattens it.

    ``headline`` is the largest counted bound, at the level the caller asked (``confidence``),
    jointly over every counted bound (each was computed at its Bonferroni share of 1 − confidence).
    """

    lower_bounds: Mapping[str, LowerBound]
    headline: LowerBound
    tpr_at_fpr: Mapping[float, tuple[float, float, float, float]]  # fpr level → (tpr, low, high, fpr)
    auroc: tuple[float, float, float]  # value, low, high
    advantage: tuple[float, float, float]  # value, low, high
    confidence: float
    delta: float
    n_in: int
    n_out: int

    def counted_bounds(self) -> dict[str, LowerBound]:
        """The bounds the headline maximises over."""
        return {name: b for name, b in self.lower_bounds.items() if b.counted}

    def best_valid(self) -> LowerBound:
        """The headline: the largest counted bound, at the joint level ``confidence``."""
        return self.headline

    def metrics(self) -> dict[str, float]:
        """Flat dict of finite numbers with stable names (no level or count inside a key).

        ``epsilon_lower`` is the headline at ``confidence``; ``epsilon_lower_<estimator>`` each
        valid bound (``<estimator>_confidence`` its own level, ``<estimator>_counted`` 1 if the
        headline counts it); ``epsilon_estimate_<estimator>`` estimates; attack-strength figures
        with ``_low``/``_high`` two-sided intervals at ``confidence``.
        """
        out: dict[str, float] = {"delta": self.delta, "confidence": self.confidence}
        out["n_in"], out["n_out"] = float(self.n_in), float(self.n_out)
        out["epsilon_lower"] = finite(self.headline.epsilon)
        out["counted_bounds"] = float(len(self.counted_bounds()))
        for name, b in self.lower_bounds.items():
            key = f"epsilon_lower_{name}" if b.valid else f"epsilon_estimate_{name}"
            out[key] = finite(b.epsilon)
            if b.valid:
                out[f"{name}_confidence"] = b.confidence
                out[f"{name}_counted"] = float(b.counted)
            for detail, value in b.details.items():
                out[f"{name}_{detail}"] = finite(value)
        for level, (tpr, low, high, fpr) in self.tpr_at_fpr.items():
            tag = _level_tag(level)
            out[f"tpr_at_fpr_{tag}"] = tpr
            out[f"tpr_at_fpr_{tag}_low"] = low
            out[f"tpr_at_fpr_{tag}_high"] = high
            out[f"tpr_at_fpr_{tag}_achieved_fpr"] = fpr
        out["auroc"], out["auroc_low"], out["auroc_high"] = self.auroc
        out["advantage"], out["advantage_low"], out["advantage_high"] = self.advantage
        return {key: float(value) if math.isfinite(value) else finite(value) for key, value in out.items()}


def _level_tag(level: float) -> str:
    return f"{level:g}".replace(".", "p").replace("-", "m")


# ------------------------------------------------------------------------------------------- GDP


def gdp_lower_bound(
    in_scores: np.ndarray,
    out_scores: np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
    selection: str = "midpoint",
    seed: int = 0,
    max_thresholds: int = 200,
    mechanism: SubsampledGaussian | None = None,
    split_fraction: float = GDP_SPLIT_FRACTION,
) -> LowerBound:
    """GDP-based ε lower bound (Nasr et al. 2023), or its subsampled-Gaussian variant.

    The threshold is chosen on a random share ``split_fraction`` of each class, and the remaining
    trials are counted: ``selection="midpoint"`` (default) takes the midpoint of the two shares'
    medians (where α = β for a Gaussian shift, the threshold least hurt by the limits);
    ``"split"`` takes the threshold maximising μ_LB on the share. ``"bonferroni"`` instead counts all
    trials at every candidate threshold with Bonferroni-corrected limits. The counts give
    Clopper–Pearson upper limits (α_U, β_U), each at 1 − (1 − confidence)/2 (midpoint, split) or
    1 − (1 − confidence)/(2K) (Bonferroni over K thresholds).
    Without ``mechanism``: μ_LB = Φ⁻¹(1 − α_U) − Φ⁻¹(β_U) and ε(δ) of μ_LB-GDP. With ``mechanism``:
    z_UB = :meth:`SubsampledGaussian.noise_upper` and ε(δ) of (q, T, z_UB) from the PLD.
    """
    pos = _as_scores(in_scores, "in_scores")
    neg = _as_scores(out_scores, "out_scores")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    if selection not in GDP_SELECTIONS:
        raise ValueError(f"selection must be one of {GDP_SELECTIONS}, got {selection!r}")

    def objective(fp: np.ndarray, fn: np.ndarray, n_neg: int, n_pos: int, level: float) -> np.ndarray:
        return gdp_mu_lower(clopper_pearson_upper(fp, n_neg, level), clopper_pearson_upper(fn, n_pos, level))

    if selection == "midpoint":
        threshold, fp, fn, n_neg, n_pos, level = _midpoint_counts(pos, neg, confidence, seed, split_fraction)
        k = 1
    else:
        threshold, fp, fn, n_neg, n_pos, level, k = select_threshold(
            pos,
            neg,
            objective,
            selection,  # type: ignore[arg-type]
            confidence,
            seed,
            max_thresholds,
            split_fraction=split_fraction,
        )
    fpr_u = float(clopper_pearson_upper(fp, n_neg, level))
    fnr_u = float(clopper_pearson_upper(fn, n_pos, level))
    mu = float(gdp_mu_lower(fpr_u, fnr_u))
    details = {"fpr_upper": fpr_u, "fnr_upper": fnr_u, "threshold": threshold, "limit_level": level}
    details["n_thresholds"] = float(k)
    if mechanism is None:
        return LowerBound(
            gdp_epsilon(mu, delta), "gdp", ASSUMPTIONS["gdp"], True, confidence, {"mu_lower": mu, **details}
        )
    z_upper = mechanism.noise_upper(fpr_u, fnr_u)
    epsilon = mechanism.epsilon(z_upper, delta) if math.isfinite(z_upper) else 0.0
    assumption = ASSUMPTIONS["subsampled_gaussian"].format(
        q=mechanism.sampling_rate, steps=int(mechanism.steps)
    )
    return LowerBound(
        epsilon,
        "subsampled_gaussian",
        assumption,
        True,
        confidence,
        {"noise_multiplier_upper": z_upper, **details},
    )


def _midpoint_counts(
    pos: np.ndarray, neg: np.ndarray, confidence: float, seed: int, split_fraction: float
) -> tuple[float, int, int, int, int, float]:
    """Threshold = midpoint of the medians of a random share of each class; counts on the rest."""
    if pos.size < 2 or neg.size < 2:
        raise ValueError("threshold selection needs at least 2 in and 2 out scores")
    if not 0.0 < split_fraction < 1.0:
        raise ValueError(f"split_fraction must lie in (0, 1), got {split_fraction!r}")
    pos_sel, pos_eval, neg_sel, neg_eval = _split_scores(pos, neg, split_fraction, seed)
    a, b = float(np.median(pos_sel)), float(np.median(neg_sel))
    threshold = a / 2.0 + b / 2.0  # halves first: no overflow near ±1e308
    fp = int(np.sum(neg_eval >= threshold))
    fn = int(np.sum(pos_eval < threshold))
    return threshold, fp, fn, neg_eval.size, pos_eval.size, limit_level(confidence)


# ------------------------------------------------------------------------------------------ one run


def _one_run_sweep(
    in_scores: np.ndarray,
    out_scores: np.ndarray,
    delta: float,
    confidence: float,
    fractions: Sequence[float],
    seed: int,
) -> LowerBound:
    """The one-run bound, Bonferroni over the guess counts k₊ = k₋ = fraction · m/2 tried."""
    scores = np.concatenate([in_scores, out_scores])
    included = np.concatenate([np.ones(in_scores.size, bool), np.zeros(out_scores.size, bool)])
    per = 1.0 - (1.0 - confidence) / len(fractions)
    best: OneRunBound | None = None
    for fraction in fractions:
        k = max(1, min(scores.size // 2, int(round(fraction * scores.size / 2))))  # k₊ + k₋ ≤ m, m odd too
        bound = one_run_lower_bound(
            scores, included, k_positive=k, k_negative=k, delta=delta, confidence=per, seed=seed
        )
        if best is None or bound.epsilon > best.epsilon:
            best = bound
    assert best is not None
    details = {"guesses": float(best.guesses), "correct": float(best.correct), "per_k_level": per}
    return LowerBound(best.epsilon, "one_run", ASSUMPTIONS["one_run"], True, confidence, details)


# ------------------------------------------------------------------------------------- attack strength


# --------------------------------------------------------------------------------------------- auditor


def _headline_set(
    headline: Sequence[str] | None, assume_gaussian: bool, mechanism: SubsampledGaussian | None, one_run: bool
) -> tuple[str, ...]:
    """The estimators the headline maximises over; each assumption must be declared by the caller."""
    declared = {"gdp": assume_gaussian, "subsampled_gaussian": mechanism is not None, "one_run": one_run}
    sweeps = () if one_run else ASSUMPTION_FREE
    if headline is None:
        return sweeps + tuple(name for name, ok in declared.items() if ok)
    names = tuple(dict.fromkeys(headline))
    if not names:
        raise ValueError("headline must name at least one estimator")
    for name in names:
        if name not in ESTIMATORS or name == "sweep_naive":
            valid = [e for e in ESTIMATORS if e != "sweep_naive"]
            raise ValueError(f"headline estimator {name!r} is not a valid bound; choose from {valid}")
        if one_run and name in ASSUMPTION_FREE:
            what = f"headline estimator {name!r} is no bound on one run's canaries"
            raise ValueError(f"{what}: {SWEEP_ON_ONE_RUN}")
        if not declared.get(name, True):
            flags = {"gdp": "assume_gaussian=True", "subsampled_gaussian": "mechanism="}
            need = flags.get(name, "one_run=True")
            what = ASSUMPTIONS[name].split(" with")[0]
            raise ValueError(f"headline estimator {name!r} {what}: pass {need} to declare it")
    return names


def audit_scores(
    in_scores: np.ndarray,
    out_scores: np.ndarray,
    *,
    delta: float,
    confidence: float = 0.95,
    mechanism: SubsampledGaussian | None = None,
    assume_gaussian: bool = False,
    headline: Sequence[str] | None = None,
    fpr_levels: Sequence[float] = (0.001, 0.01, 0.05),
    seed: int = 0,
    gdp_selection: str = "midpoint",
    one_run: bool = False,
    one_run_fractions: Sequence[float] = (0.01, 0.05, 0.2, 1.0),
    max_thresholds: int = 200,
    show_progress: bool = False,
    counted_level: float | None = None,
) -> ScoresAudit:
    """Audit attack scores: ε lower bounds per estimator, a headline, TPR at fixed FPR, AUROC, advantage.

    ``in_scores``: one score per trial on the world with the target (D, member); ``out_scores``:
    without. Higher = "in". δ = 0 is allowed (pure DP; GDP-type bounds are then ∞ for μ_LB > 0,
    written 1e308 in metrics).

    The headline counts only bounds whose assumption is guaranteed: by default the assumption-free
    sweeps, plus ``gdp`` if ``assume_gaussian`` (the caller guarantees a full-batch Gaussian
    mechanism), ``subsampled_gaussian`` if ``mechanism=SubsampledGaussian(q, T)`` is declared, and
    ``one_run`` if ``one_run`` (the scores are canaries of ONE run, each included independently with
    probability 1/2 by the audit; k₊ = k₋ = fraction · m/2 for each of ``one_run_fractions``,
    Bonferroni over them). With ``one_run`` the sweeps become estimates (:data:`SWEEP_ON_ONE_RUN`):
    their canaries share one run, so only the one-run bound is proven. ``headline`` pre-registers a
    subset instead (e.g. ``("gdp",)``). The k
    counted bounds are each computed at 1 − (1 − confidence)/k, so their maximum holds at
    ``confidence`` (union bound); the others, and the intervals, at ``confidence``. Bounds whose
    assumption nobody declared are still reported (``counted=False``), never in the headline.
    ``counted_level`` overrides that share when a caller splits the level over more than this one
    call (:func:`dpaudit.bounds.registry.audit_score_sets`); the returned headline then states
    its own joint level, 1 − k·(1 − counted_level).
    """
    pos = _as_scores(in_scores, "in_scores")
    neg = _as_scores(out_scores, "out_scores")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    for level in fpr_levels:
        if not 0.0 < level < 1.0:
            raise ValueError(f"fpr_levels must lie in (0, 1), got {level!r}")
    counted = _headline_set(headline, assume_gaussian, mechanism, one_run)
    share = 1.0 - (1.0 - confidence) / len(counted)
    headline_level = confidence
    if counted_level is not None:
        share = _check_confidence(counted_level)
        headline_level = 1.0 - len(counted) * (1.0 - share)

    def level_of(name: str) -> float:
        return share if name in counted else confidence

    steps = ["sweep_split", "sweep_bonferroni", "sweep_naive", "gdp"]
    steps += ["subsampled_gaussian"] * (mechanism is not None) + ["one_run"] * one_run
    bar = progress(total=len(steps), desc="scores auditor", unit="estimator", disable=not show_progress)
    bounds: dict[str, LowerBound] = {}
    for method in ("split", "bonferroni", "naive"):
        name = f"sweep_{method}"
        level = level_of(name)
        sweep = epsilon_lower_from_scores(pos, neg, delta, level, method, seed, max_thresholds)  # type: ignore[arg-type]
        details = {
            "threshold": sweep.threshold,
            "fpr_upper": sweep.fpr_upper,
            "fnr_upper": sweep.fnr_upper,
            "limit_level": sweep.limit_level,
            "advantage": sweep.advantage,
        }
        valid = method != "naive" and not one_run
        assumption = SWEEP_ON_ONE_RUN if one_run and method != "naive" else ASSUMPTIONS[name]
        counts = name in counted
        bounds[name] = LowerBound(sweep.epsilon_lower, name, assumption, valid, level, details, counts)
        bar.update()
    common = {"delta": delta, "selection": gdp_selection, "seed": seed, "max_thresholds": max_thresholds}
    gdp = gdp_lower_bound(pos, neg, confidence=level_of("gdp"), **common)
    bounds["gdp"] = replace(gdp, counted="gdp" in counted)
    bar.update()
    if mechanism is not None:
        family = gdp_lower_bound(
            pos, neg, confidence=level_of("subsampled_gaussian"), mechanism=mechanism, **common
        )
        bounds["subsampled_gaussian"] = replace(family, counted="subsampled_gaussian" in counted)
        bar.update()
    if one_run:
        found = _one_run_sweep(pos, neg, delta, level_of("one_run"), one_run_fractions, seed)
        bounds["one_run"] = replace(found, counted="one_run" in counted)
        bar.update()
    bar.close()
    return ScoresAudit(
        lower_bounds=bounds,
        headline=_headline_of(bounds, counted, headline_level),
        tpr_at_fpr={float(level): tpr_at_fpr(pos, neg, float(level), confidence) for level in fpr_levels},
        auroc=auroc_interval(pos, neg, confidence),
        advantage=advantage_interval(pos, neg, confidence),
        confidence=confidence,
        delta=delta,
        n_in=pos.size,
        n_out=neg.size,
    )


def _headline_of(bounds: Mapping[str, LowerBound], counted: Sequence[str], confidence: float) -> LowerBound:
    """The largest counted bound, restated at the joint level; its details say how many it beat."""
    best = max((bounds[name] for name in counted), key=lambda b: b.epsilon)
    details = {**best.details, "counted_bounds": float(len(counted)), "share_level": best.confidence}
    return replace(best, confidence=confidence, details=details)
