"""Bounds stage of the instantiation audit: every threat model's score sets audited into one table.

Per threat model and target ε (Nasr et al. 2021 §V, Table I, Fig. 9; :data:`dpaudit.references.NASR_2021`)
the attack stage's score sets name their estimators (:mod:`dpaudit.bounds.estimators`):

- ``threshold_family``: the assumption-free threshold sweeps (Eqs. 4–5; ``bounds.selection``, Bonferroni
  over thresholds or a held-out half, is the one counted), the mechanism-family bound (assumes the
  Poisson-subsampled Gaussian with the run's q and T: one threshold's (α_U, β_U) through the family's
  trade-off curve), Distinguisher 3's literal test, the naive sweep as an estimate, TPR, AUROC;
- ``stepwise_family``: F's bound of the family's noise σ and canary shift Δ from all the per-step canary
  projections (:func:`dpaudit.bounds.stepwise.stepwise_family_bound`; baseline known to be 0 where the
  canary's coordinates carry no data mass), and E's over the trials whose canary sits on inert
  coordinates; E's over every trial is reported, never counted (the data's gradients answer the canary
  in world D′ only, so the family law is not guaranteed there).

One level split (:func:`dpaudit.bounds.audit.audit_score_sets`, scope = the target ε): every counted
bound of every threat model, statistic (C, D: max, mean, final loss) and canary size (E) at ε shares
1 − c equally, so the summary row's headline, the largest of them, holds at c jointly. Beside them:
ε_RDP, ε_PLD, ε_naive and ε_advanced of the noise used, the test accuracy of the models trained on the
real data, and the Clopper–Pearson cap for N trials per world. The simulation of the ideal mechanism
(F, per ε) is evidence about that mechanism, audited at c and never counted.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.empirical import cp_cap
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import NAMES, SIMULATION, cell_file, epsilon_key, manifest_cells
from dpaudit.experiments.instantiation.design.registry import ORDER, REGISTRY
from dpaudit.experiments.instantiation.design.registry import strongest as strongest_of
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow
from dpaudit.scores import ScoreSet, group_key, parse_group, read_score_sets
from dpaudit.table import ResultRow, ResultsTable, headline_metrics

SCORES = {"epsilon_lower_ratio": "ε_LB / ε_PLD (headline)"}
#: The family bounds (one threshold; every step) a cell's "family LB" is the largest counted one of.
FAMILY_ESTIMATORS = ("subsampled_gaussian", "stepwise_family")


def _prefix(setting: str, threat_model: str | None = None) -> str:
    return group_key(setting=setting, threat_model=threat_model)


def _in(group: str, prefix: str) -> bool:
    parts = parse_group(group)
    return parse_group(prefix).items() <= parts.items() and parts.get("attack") != SIMULATION


def _largest(table: ResultsTable, prefix: str, quantity: str, estimators: tuple[str, ...],
             counted_only: bool = False) -> float:  # fmt: skip
    values = [
        r.value for r in table.select(quantity) if _in(r.group, prefix) and r.estimator in estimators
        and (r.counted or not counted_only)
    ]  # fmt: skip
    return max(values, default=0.0)


def with_selection(sets: list[ScoreSet], selection: str) -> list[ScoreSet]:
    """The sets with the config's pre-registered sweep (``bounds.selection``) among their params."""
    return [dataclasses.replace(s, params={**s.params, "selection": selection}) for s in sets]


def audit_sets(sets: list[ScoreSet], confidence: float) -> ResultsTable:
    """Every set's estimators; the counted bounds of one ε (scope ``setting``) share 1 − ``confidence``."""
    return audit_score_sets(sets, confidence, scope=lambda s: s.group["setting"])


def audit_rows(manifest: TrainManifest, accuracy: dict[str, float]) -> list[ResultRow]:
    """Every ε's accountants and every real-data cell's test accuracy."""
    rows = []
    for eps in manifest.facts["target_epsilons"]:
        key = epsilon_key(eps)
        event = manifest.mechanisms[key].dp_event()
        for name, value in epsilons_for_event(event, manifest.delta).items():
            rows.append(ResultRow(_prefix(key), "epsilon_upper", finite_number(value), name, "accountant"))
    for cell in manifest_cells(manifest):
        if REGISTRY[cell.threat_model].trains_on_real_data:
            value = accuracy[f"{cell.file}__test_accuracy"]
            rows.append(ResultRow(_prefix(cell.setting, cell.threat_model), "utility", value, "test_accuracy",
                                  "utility"))  # fmt: skip
    return rows


def cell_frame(table: ResultsTable, sets: list[ScoreSet], manifest: TrainManifest, selection: str,
               confidence: float, accuracy: dict[str, float]) -> pd.DataFrame:  # fmt: skip
    """One row per cell: the largest counted sweep and family bound, the naive estimate, the accountants."""
    rows = []
    for cell in manifest_cells(manifest):
        prefix = _prefix(cell.setting, cell.threat_model)
        upper = {r.estimator: r.value for r in table.select("epsilon_upper", _prefix(cell.setting))}
        cell_sets = [s for s in sets if _in(s.key, prefix) and "threshold_family" in s.estimators]
        per_world = min(int(s.member.sum()) for s in cell_sets)
        family = _largest(table, prefix, "epsilon_lower", FAMILY_ESTIMATORS, counted_only=True)
        rows.append({
            "threat_model": f"{cell.threat_model}: {NAMES[cell.threat_model]}",
            "tm": cell.threat_model,
            "epsilon_target": cell.target_epsilon,
            "noise_multiplier": cell.noise_multiplier,
            "epsilon_lower_sweep": _largest(table, prefix, "epsilon_lower", (f"sweep_{selection}",)),
            "epsilon_lower_family": family,
            "epsilon_estimate_naive": _largest(table, prefix, "epsilon_estimate", ("sweep_naive",)),
            "epsilon_pld": upper["pld"],
            "epsilon_rdp": upper["rdp"],
            "cp_cap": cp_cap(per_world, manifest.delta, confidence),
            "ratio_family": family / upper["pld"],
            "test_accuracy": accuracy.get(f"{cell.file}__test_accuracy", math.nan),
            "trials_per_world": float(per_world),
        })  # fmt: skip
    return pd.DataFrame(rows)


def simulation_frame(table: ResultsTable, sets: list[ScoreSet]) -> pd.DataFrame:
    """Per ε, the simulated ideal mechanism's bounds against ε_PLD and its agreement with the PLD."""
    rows = []
    for s in sets:
        if s.group.get("attack") != SIMULATION:
            continue
        pld = table.one("epsilon_upper", _prefix(s.group["setting"]), estimator="pld").value
        bound = {r.estimator: r.value for r in table.select("epsilon_lower", s.key)}
        rows.append({
            "setting": s.group["setting"],
            "ratio_family": bound["stepwise_family"] / pld,
            "ratio_family_threshold": bound["subsampled_gaussian"] / pld,
            "ratio_sweep": max(bound["sweep_split"], bound["sweep_bonferroni"]) / pld,
            "pld_max_abs_z": s.param("pld_max_abs_z"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def bounds(config: InstantiationConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The results table, its metrics, the figure tables and one summary row per ε."""
    bp = config.bounds
    confidence, selection = bp.confidence, bp.selection
    sets = with_selection(read_score_sets(audit.scores_path), selection)
    timings = json.loads((audit.train_dir / "timings.json").read_text())
    with open_npz(audit.losses_path) as lf:
        accuracy = {k: float(np.mean(lf[k])) for k in lf.files if k.endswith("__test_accuracy")}
    table = audit_sets(sets, confidence)
    table.extend(audit_rows(manifest, accuracy))
    frame = cell_frame(table, sets, manifest, selection, confidence, accuracy)
    trials_per_second = {}
    for cell in manifest_cells(manifest):
        seconds = float(timings["seconds"].get(cell.file, 0.0))
        trials = sum(s.scores.size for s in sets if _in(s.key, _prefix(cell.setting, cell.threat_model))
                     and "threshold_family" in s.estimators)  # fmt: skip
        trials_per_second[cell.file] = trials / seconds if seconds > 0 else 0.0
    counted_above = [
        r for r in table.rows if r.counted and r.value > table.one(
            "epsilon_upper", _prefix(parse_group(r.group)["setting"]), estimator="pld").value + 1e-9
    ]  # fmt: skip
    targets = [float(e) for e in manifest.facts["target_epsilons"]]
    fig_eps = min(targets, key=lambda e: abs(math.log(e / bp.figure_epsilon)))
    plots = {
        "epsilon.csv": frame[["threat_model", "epsilon_target", "epsilon_lower_sweep", "epsilon_lower_family",
                              "epsilon_estimate_naive", "epsilon_pld", "epsilon_rdp", "cp_cap"]],
        "fig9.csv": frame[frame["epsilon_target"] == fig_eps][
            ["threat_model", "epsilon_lower_sweep", "epsilon_lower_family", "epsilon_pld"]],
        "cells.csv": frame,
    }  # fmt: skip
    simulation = simulation_frame(table, sets)
    if len(simulation):
        eps_of = {epsilon_key(e): e for e in targets}
        plots["simulation.csv"] = simulation.assign(epsilon_target=simulation["setting"].map(eps_of)).drop(
            columns="setting"
        )
    # Utility is that of models trained on the real data: a model trained on a crafted,
    # random-looking dataset says nothing about the audited training.
    threat_models = list(manifest.facts["threat_models"])
    real_data = next((t for t in ORDER if REGISTRY[t].trains_on_real_data and t in threat_models), None)
    summary, headlines = [], {}
    for eps in targets:
        key = epsilon_key(eps)
        groups = [g for g in table.groups() if _in(g, _prefix(key))]
        best = table.headline(groups)
        headlines[key] = headline_metrics(best)
        winner = max((r for r in table.rows if r.counted and r.group in groups), key=lambda r: r.value,
                     default=None)  # fmt: skip
        upper = {r.estimator: r.value for r in table.select("epsilon_upper", _prefix(key))}
        z = float(manifest.mechanisms[key].noise_multiplier or 0.0)
        tm = parse_group(winner.group)["threat_model"] if winner else None
        summary.append(
            SummaryRow(
                setting=f"ε={eps:g} (z={z:.3g})",
                epsilon_upper=upper,
                epsilon_lower=best.value,
                epsilon_lower_estimator=f"{tm} {NAMES[tm]}: {best.estimator}" if tm else None,
                scores={"epsilon_lower_ratio": best.value / upper["pld"]},
                utility_name="test accuracy" if real_data else None,
                utility=accuracy[f"{cell_file(real_data, eps)}__test_accuracy"] if real_data else None,
                epsilon_lower_assumes=best.assumes,
                confidence=None if winner is None else best.level,
            )
        )
    context: dict[str, Any] = {
        "figure_epsilon": fig_eps,
        "figure_index": targets.index(fig_eps),
        "strongest": strongest_of(threat_models),
        "confidence": confidence,
        "selection": selection,
        "trials_per_second": trials_per_second,
        "counted_bounds": sum(r.counted for r in table.rows) // max(len(targets), 1),
        "counted_above_pld": len(counted_above),
    }
    metrics = {**table.metrics(), "headline": headlines}
    return BoundsResult(metrics, plots, summary, context, table=table)
