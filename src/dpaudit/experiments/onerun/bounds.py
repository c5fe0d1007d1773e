"""Bounds stage of the one-run audit: ε lower bounds from ONE training run beside the claim.

Each analysis of :func:`dpaudit.bounds.onerun.audit_one_run` turns the canaries' scores and inclusion
bits into an ε lower bound: ``steinke`` (Steinke, Nasr & Jagielski 2023, Thm. 5.2,
:data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`; assumes only the ½ inclusion the audit draws) and
``fdp_gaussian`` (Mahloujifar et al. 2024's f-DP analysis with the Gaussian trade-off family; counted
only where that family is the declared mechanism's, full-batch DP-SGD,
:func:`.design.analysis_counts`).

Pre-registered level split: the headline ``epsilon_lower`` is the largest COUNTED bound, and every
analysis of ``bounds.analyses`` runs at 1 − (1 − c)/len(analyses) (Bonferroni), so the headline holds
at the joint level c. Beside it: the claimed ε of the declared configuration (the accountant it was
calibrated with), every accountant's ε for the same mechanism
(:func:`dpaudit.bounds.accountants.epsilons_for_event`), each analysis' own ceiling on the ideal
Gaussian canary game at the claimed ε and the same m (:func:`dpaudit.bounds.onerun.one_run_ceiling`),
``caught`` = 1 when the headline exceeds the claim, and ε_LB against m over prefixes of the canaries
(Steinke et al. Fig. 2; each point at the same per-analysis level, evidence of how the bound grows,
never maximised into the headline).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.onerun.config import BREAK_KEY, OneRunConfig
from dpaudit.experiments.onerun.design import SCORES_FILE, analysis_counts, curve_sizes, setting_seed
from dpaudit.layout import Audit
from dpaudit.logs import progress
from dpaudit.results import SummaryRow

#: Score keys of the summary row, with their labels (the section declares them).
SCORES = {"epsilon_claimed": "claimed ε", "ceiling": "ceiling (ideal game)", "caught": "caught"}
#: What the fdp_gaussian bound assumes, and why the headline may count it here.
GAUSSIAN_FAMILY = "assumes the Gaussian trade-off family (true of full-batch DP-SGD's own Gaussian mechanism)"


def analysis_level(confidence: float, analyses: list[str]) -> float:
    """Each analysis' level: its Bonferroni share of the joint level of the headline."""
    return 1.0 - (1.0 - confidence) / len(analyses)


def audit_analyses(
    scores: np.ndarray,
    included: np.ndarray,
    *,
    delta: float,
    confidence: float,
    analyses: list[str],
    seed: int,
) -> dict[str, Any]:
    """``audit_one_run`` of every analysis at its Bonferroni share of ``confidence``."""
    from dpaudit.bounds.onerun import audit_one_run

    level = analysis_level(confidence, analyses)
    return {
        a: audit_one_run(scores, included, delta=delta, confidence=level, analysis=a, seed=seed)  # type: ignore[arg-type]
        for a in analyses
    }


def headline(audits: dict[str, Any], sampling_rate: float) -> tuple[float, str, str]:
    """(ε_LB, analysis, assumption) of the largest counted bound; (0, "none", "none") if none counts."""
    counted = {a: r for a, r in audits.items() if analysis_counts(a, sampling_rate)}
    if not counted:
        return 0.0, "none", "none"
    best = max(counted, key=lambda a: float(counted[a].epsilon_lower))
    assumption = str(counted[best].assumption)
    if best == "fdp_gaussian":
        assumption = f"{assumption}; {GAUSSIAN_FAMILY}"
    return float(counted[best].epsilon_lower), best, assumption


@functools.lru_cache(maxsize=256)
def ideal_ceiling(
    epsilon: float, delta: float, canaries: int, analysis: str, level: float, repeats: int
) -> float:
    """:func:`dpaudit.bounds.onerun.one_run_ceiling`, its Monte Carlo seeded by its own setting (the same
    ceiling for the same ε, δ, m, analysis, level and repeats, whatever run it stands beside; cached,
    as it is a deterministic function of them)."""
    from dpaudit.bounds.onerun import one_run_ceiling

    values = {"epsilon": epsilon, "delta": delta, "canaries": canaries, "analysis": analysis, "level": level,
              "repeats": repeats}  # fmt: skip
    return float(
        one_run_ceiling(
            epsilon,
            delta,
            canaries,
            analysis=analysis,
            confidence=level,
            repeats=repeats,
            seed=setting_seed(values),
        )
    )


def bounds(config: OneRunConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """Metrics (numbers only), the curve and score tables, and the summary row."""
    bp = config.bounds
    analyses = list(bp.analyses)
    with np.load(audit.attack_dir / SCORES_FILE) as f:
        scores, included = f["score"].astype(np.float64), f["included"].astype(bool)
    with np.load(audit.losses_path) as f:
        accuracy = float(f["test_accuracy"])
    facts = manifest.facts
    delta, q = manifest.delta, float(facts["sampling_rate"])
    claimed = float(facts["epsilon_claimed"])
    seed = int(manifest.seeds["setting_seed"])
    level = analysis_level(bp.confidence, analyses)
    m = int(scores.size)
    mechanism = manifest.mechanisms["declared"]
    upper = {k: finite_number(v) for k, v in epsilons_for_event(mechanism.dp_event(), delta).items()}

    sizes = curve_sizes(bp.curve_canaries, m)
    curve_rows: list[dict[str, float]] = []
    full: dict[str, Any] = {}
    ceilings: dict[str, float] = {}
    for size in progress(sizes, desc=f"bounds {audit.name}: ε_LB against m", unit="m"):
        audits = audit_analyses(
            scores[:size],
            included[:size],
            delta=delta,
            confidence=bp.confidence,
            analyses=analyses,
            seed=seed,
        )
        row: dict[str, float] = {"canaries": float(size), "epsilon_claimed": claimed}
        for a, r in audits.items():
            ceiling = ideal_ceiling(claimed, delta, size, a, level, bp.ceiling_repeats)
            row[f"epsilon_lower_{a}"] = float(r.epsilon_lower)
            row[f"ceiling_{a}"] = float(ceiling)
            if size == m:
                ceilings[a] = float(ceiling)
        curve_rows.append(row)
        if size == m:
            full = audits
    best, best_analysis, assumption = headline(full, q)
    best_ceiling = ceilings.get(best_analysis, 0.0)

    per_analysis: dict[str, dict[str, float]] = {}
    for a, r in full.items():
        per_analysis[a] = {
            "epsilon_lower": finite_number(r.epsilon_lower),
            "ceiling": finite_number(ceilings[a]),
            "ratio_to_ceiling": finite_number(r.epsilon_lower / ceilings[a]) if ceilings[a] > 0 else 0.0,
            "counted": float(analysis_counts(a, q)),
            "confidence": float(r.confidence),
            "guesses": float(r.guesses),
            "correct": float(r.correct),
            "k_positive": float(r.k_positive),
            "k_negative": float(r.k_negative),
        }
    caught = best > claimed
    metrics: dict[str, Any] = {
        "epsilon_lower": finite_number(best),
        "epsilon_claimed": finite_number(claimed),
        "caught": float(caught),
        "ratio_to_claimed": finite_number(best / claimed),
        "ceiling": finite_number(best_ceiling),
        "epsilon_upper": upper,
        "analyses": per_analysis,
        "confidence": float(bp.confidence),
        "delta": float(delta),
        "canaries": float(m),
        "included": float(included.sum()),
        "noise_multiplier": float(mechanism.noise_multiplier or 0.0),
        "noise_multiplier_used": float(facts["noise_multiplier_used"]),
        "test_accuracy": accuracy,
    }
    kind, brk = str(facts["canary_kind"]), str(facts[BREAK_KEY])
    summary_row = SummaryRow(
        setting=f"{kind} canaries, m = {m}, break = {brk}",
        epsilon_upper=upper,
        epsilon_lower=float(best),
        epsilon_lower_estimator=f"one_run_{best_analysis}" if best_analysis != "none" else None,
        scores={"epsilon_claimed": claimed, "ceiling": best_ceiling, "caught": float(caught)},
        utility_name="test accuracy",
        utility=accuracy,
        epsilon_lower_assumes=assumption,
    )
    plots = {
        "curve.csv": pd.DataFrame(curve_rows),
        "scores.csv": pd.DataFrame({"score": scores, "included": np.where(included, "in", "out")}),
    }
    context = {
        "analyses": analyses,
        "analysis_level": level,
        "best_analysis": best_analysis,
        "assumptions": {a: str(r.assumption) for a, r in full.items()},
        "estimators": {a: str(r.estimator) for a, r in full.items()},
    }
    return BoundsResult(metrics, plots, [summary_row], context, csv_float_format="%.6g")
