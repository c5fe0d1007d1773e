"""Bounds stage of the one-run audit: ε lower bounds from ONE training run beside the claim.

The attack stage's score set names the analyses of ``bounds.analyses`` as its estimators
(:mod:`dpaudit.bounds.estimators.one_run`): ``one_run_steinke`` (Steinke, Nasr & Jagielski 2023,
Thm. 5.2, :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`; assumes only the ½ inclusion the audit
draws) and ``one_run_fdp_gaussian`` (Mahloujifar et al. 2024's f-DP analysis with the Gaussian
trade-off family; counted only where the set declares that family, full-batch DP-SGD).

:func:`dpaudit.bounds.audit.audit_score_sets` splits 1 − c over the counted analyses (Bonferroni), so
the table's headline holds at the joint level c. Beside it: every accountant's ε for the declared
mechanism (the claimed ε is the calibration accountant's), the test accuracy, each analysis' own
ceiling on the ideal Gaussian canary game at the claimed ε and the same m
(:func:`dpaudit.bounds.onerun.one_run_ceiling`), ``caught`` = the headline exceeds the claim, and
ε_LB against m over prefixes of the canaries (Steinke et al. Fig. 2; each point at its analysis'
level, evidence of how the bound grows, never maximised into the headline).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.estimators.one_run import PREFIX, one_run_audit
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.onerun.config import BREAK_KEY, OneRunConfig
from dpaudit.experiments.onerun.design import curve_sizes, setting_seed
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.logs import progress
from dpaudit.results import SummaryRow
from dpaudit.scores import ScoreSet, read_score_sets
from dpaudit.table import NO_BOUND, ResultRow, headline_metrics

#: Score keys of the summary row, with their labels (the section declares them).
SCORES = {"epsilon_claimed": "claimed ε", "ceiling": "ceiling (ideal game)", "caught": "caught"}


@functools.lru_cache(maxsize=256)
def ideal_ceiling(
    epsilon: float, delta: float, canaries: int, analysis: str, level: float, repeats: int
) -> float:
    """:func:`dpaudit.bounds.onerun.one_run_ceiling`, its Monte Carlo seeded by its own setting (the same
    ceiling for the same ε, δ, m, analysis, level and repeats, whatever run it stands beside; cached,
    as it is a deterministic function of them).

    ε is an accountant's result, a float whose last digits differ between CPUs, so it never enters the
    seed: the draws are common to every ε and the ceiling moves with ε only through the game's mean."""
    from dpaudit.bounds.onerun import one_run_ceiling

    values = {"delta": delta, "canaries": canaries, "analysis": analysis, "level": level, "repeats": repeats}
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


def audit_rows(manifest: TrainManifest, accuracy: float) -> list[ResultRow]:
    """The audit-wide rows: every accountant's ε for the declared mechanism, and the test accuracy."""
    event = manifest.mechanisms["declared"].dp_event()
    rows = [
        ResultRow("", "epsilon_upper", finite_number(v), k, "accountant")
        for k, v in epsilons_for_event(event, manifest.delta).items()
    ]
    return [*rows, ResultRow("", "utility", accuracy, "test_accuracy", "utility")]


def curve(
    s: ScoreSet, levels: dict[str, float], sizes: list[int], claimed: float, repeats: int, name: str
) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """ε_LB and ceiling of every analysis on the first m' canaries, and the full run's details."""
    rows: list[dict[str, float]] = []
    details: dict[str, dict[str, float]] = {}
    delta = s.param("delta")
    for size in progress(sizes, desc=f"bounds {name}: ε_LB against m", unit="m"):
        prefix = dataclasses.replace(s, scores=s.scores[:size], member=s.member[:size])
        row: dict[str, float] = {"canaries": float(size), "epsilon_claimed": claimed}
        for a, level in levels.items():
            r = one_run_audit(prefix, a, level)
            ceiling = ideal_ceiling(claimed, delta, size, a, level, repeats)
            row[f"epsilon_lower_{a}"] = float(r.epsilon_lower)
            row[f"ceiling_{a}"] = float(ceiling)
            if size == s.scores.size:
                details[a] = {
                    "epsilon_lower": finite_number(r.epsilon_lower),
                    "ceiling": ceiling,
                    "ratio_to_ceiling": finite_number(r.epsilon_lower / ceiling) if ceiling > 0 else 0.0,
                    "guesses": float(r.guesses),
                    "correct": float(r.correct),
                }
        rows.append(row)
    return pd.DataFrame(rows), details


def bounds(config: OneRunConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The results table, its metrics, the curve and score tables, and the summary row."""
    bp = config.bounds
    (s,) = read_score_sets(audit.scores_path)
    with open_npz(audit.losses_path) as f:
        accuracy = float(f["test_accuracy"])
    facts = manifest.facts
    claimed = float(facts["epsilon_claimed"])
    table = audit_score_sets([s], bp.confidence)
    table.extend(audit_rows(manifest, accuracy))
    best = table.headline()

    analyses = [name.removeprefix(PREFIX) for name in s.estimators]
    own = {a: table.one("epsilon_lower", s.key, estimator=PREFIX + a) for a in analyses}
    levels = {a: own[a].level for a in analyses}
    sizes = curve_sizes(bp.curve_canaries, int(s.scores.size))
    curve_frame, details = curve(s, levels, sizes, claimed, bp.ceiling_repeats, audit.name)
    best_analysis = best.estimator.removeprefix(PREFIX)
    best_ceiling = details[best_analysis]["ceiling"] if best_analysis in details else 0.0
    caught = best.value > claimed

    kind, brk = str(facts["canary_kind"]), str(facts[BREAK_KEY])
    summary_row = SummaryRow(
        setting=f"{kind} canaries, m = {s.scores.size}, break = {brk}",
        epsilon_upper={r.estimator: r.value for r in table.select("epsilon_upper", "")},
        epsilon_lower=float(best.value),
        epsilon_lower_estimator=None if best.estimator == NO_BOUND else best.estimator,
        scores={"epsilon_claimed": claimed, "ceiling": best_ceiling, "caught": float(caught)},
        utility_name="test accuracy",
        utility=accuracy,
        epsilon_lower_assumes=best.assumes,
        confidence=None if best.estimator == NO_BOUND else best.level,
    )
    plots = {
        "curve.csv": curve_frame,
        "scores.csv": pd.DataFrame({"score": s.scores, "included": np.where(s.member, "in", "out")}),
    }
    context: dict[str, Any] = {
        "analyses": analyses,
        "details": details,
        "counted": {a: own[a].counted for a in analyses},
        "levels": levels,
        "assumes": {a: own[a].assumes for a in analyses},
        "epsilon_claimed": claimed,
        "caught": caught,
        "noise_multiplier": float(manifest.mechanisms["declared"].noise_multiplier or 0.0),
        "noise_multiplier_used": float(facts["noise_multiplier_used"]),
    }
    metrics = {**table.metrics(), "headline": {"audit": headline_metrics(best)}}
    return BoundsResult(metrics, plots, [summary_row], context, table=table)
