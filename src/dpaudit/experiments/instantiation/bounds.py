"""Bounds stage of the instantiation audit: every cell's ε lower bounds beside the accountants' ε.

Per threat model and target ε (Nasr et al. 2021 §V, Table I, Fig. 9; :data:`dpaudit.references.NASR_2021`),
from the scores auditor (:func:`dpaudit.bounds.auditor.audit_scores`, joint level ``confidence``):

- the assumption-free threshold sweep (Eqs. 4–5; ``bounds.selection``: Bonferroni over thresholds or
  a held-out half), both variants reported;
- the mechanism-family bound (assumes the Poisson-subsampled Gaussian with the run's q and T): (α_U, β_U)
  of one threshold mapped through the family's trade-off curve (``epsilon_lower_family_threshold``).
  F sees every step's release of a model that does not move (learning rate 0), so its family bound
  instead bounds the family's noise σ and canary shift Δ from all the per-step canary projections
  (:func:`dpaudit.bounds.stepwise.stepwise_family_bound`). Crafter 5 zeroes a few input features of an
  MLP, so its canary sits on coordinates that no record's gradient reaches (``data_mass_at_canary`` is
  exactly 0) and the baseline is known to be 0 (``family_known_baseline`` = 1); otherwise (a CNN) the
  shift is measured against world D's mean, so that what the dataset adds on the canary coordinates in
  both worlds is not read as privacy loss. E's model trains, so the same bound holds for E only over the
  trials whose canary sits on inert coordinates (``canary_inert``: weights that no record of D can
  move or be moved by; ``train.canary_placement: inert`` puts canaries there first). That is E's family
  bound (every canary size pooled, over its T − t_o canary steps, baseline known to be 0 there;
  one-threshold without inert trials).
  Over all trials it is reported as ``epsilon_lower_family_stepwise``, not counted as valid: where the
  data's gradients reach the canary they answer it in world D′ only;
- the naive sweep (threshold chosen on the counted trials), flagged as an estimate;
- the Clopper–Pearson cap for N trials per world, ε_RDP and ε_PLD of the noise used, ε_LB/ε_PLD and
  test accuracy.

Selections that are not thresholds are accounted for by Bonferroni: Distinguisher 2 (C, D) audits each
of its statistics (max, mean and final loss, :data:`DISTINGUISHER2_STATISTICS`) on all trials at
1 − w·(1 − c), with the weights :data:`DISTINGUISHER2_SHARES`, and keeps the largest bound
(``statistic_index`` says which). The final-model loss is B's statistic and C's view contains B's, so it
leads with 80 % of the error budget: equal thirds cost C 0.08–0.18 in ε against B on average over six
seeds where the final loss was the best statistic, 80 % costs 0.04 (``benchmarks/README.md``). E's
canary size 2n is chosen among G sizes, each with its own trials, at 1 − (1 − c)/G per size. Every
reported bound holds at the joint level c. (A held-out selection half, the earlier design, halved the
trials that C and D count, so C came out below B although its view contains B's.)
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.bounds.auditor import ScoresAudit, _level_tag, audit_scores
from dpaudit.bounds.empirical import epsilon_lower_from_scores
from dpaudit.bounds.stepwise import StepMoments, StepwiseBound, stepwise_family_bound
from dpaudit.bounds.tradeoff import SubsampledGaussian
from dpaudit.experiments.base import FAMILY_ASSUMES, BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import (
    NAMES,
    SIMULATION,
    Cell,
    cp_cap,
    epsilon_key,
    manifest_cells,
)
from dpaudit.experiments.instantiation.design.registry import ORDER, REGISTRY
from dpaudit.experiments.instantiation.design.registry import strongest as strongest_of
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow

#: The metrics group of the simulated distinguisher (``F_simulation``).
SIMULATION_METRICS = next(f"{k}_{SIMULATION}" for k, tm in REGISTRY.items() if tm.simulated)
SCORES = {"epsilon_lower_ratio": "ε_LB / ε_PLD (strongest threat model)"}

#: Grid of the optimistic PLD that turns z_UB into ε for the family bounds
#: (``SubsampledGaussian.epsilon_discretization``). Its discretisation error is about T·grid/2 in ε:
#: 1e-3 cost F and E 0.045 of every bound, i.e. 5 % of ε at ε = 1; 1e-4 takes 0.1–0.5 s per z_UB on
#: 2 cores. Where its bias passes 1 % of ε (ε < 0.5 at T = 100) the family takes the accountants'
#: adaptive optimistic ε instead (``epsilon_pld(..., pessimistic=False)``, within 1 %).
FAMILY_EPSILON_DISCRETIZATION = 1e-4


def family(sampling_rate: float, steps: int) -> SubsampledGaussian:
    """The assumed mechanism family of a cell: T steps (E: the T − t_o canary steps) at rate q."""
    return SubsampledGaussian(
        sampling_rate, steps, rtol=0.03, epsilon_discretization=FAMILY_EPSILON_DISCRETIZATION
    )


#: Distinguisher 2's statistics, in the order of ``statistic_index``, and each one's share of the
#: error budget 1 − c (weighted Bonferroni; fixed before the data, so they sum to 1).
DISTINGUISHER2_STATISTICS = ("max", "mean", "final")
DISTINGUISHER2_SHARES = (0.1, 0.1, 0.8)
#: The bounds kept at their largest over Bonferroni candidates.
BOUND_KEYS = (
    "epsilon_lower_sweep",
    "epsilon_lower_family",
    "epsilon_lower_family_threshold",
    "epsilon_lower_literal_sweep",
    "epsilon_lower_sweep_split",
    "epsilon_lower_sweep_bonferroni",
)


def _audit(scores: np.ndarray, inserted: np.ndarray, delta: float, confidence: float,
           mechanism: SubsampledGaussian, seed: int) -> ScoresAudit:  # fmt: skip
    return audit_scores(
        scores[inserted == 1], scores[inserted == 0], delta=delta, confidence=confidence,
        mechanism=mechanism, headline=("subsampled_gaussian",), seed=seed, fpr_levels=(0.01, 0.05),
    )  # fmt: skip


def _bounds_of(
    audit: ScoresAudit, selection: str, family_key: str = "epsilon_lower_family"
) -> dict[str, float]:
    lb = audit.lower_bounds
    return {
        "epsilon_lower_sweep": lb[f"sweep_{selection}"].epsilon,
        "epsilon_lower_sweep_split": lb["sweep_split"].epsilon,
        "epsilon_lower_sweep_bonferroni": lb["sweep_bonferroni"].epsilon,
        family_key: lb["subsampled_gaussian"].epsilon,
        "epsilon_estimate_naive": lb["sweep_naive"].epsilon,
        "auroc": audit.auroc[0],
        "tpr_at_fpr_0p01": audit.tpr_at_fpr[0.01][0],
    }


def _keep_best(
    best: dict[str, float], found: dict[str, float], tag: str, choice_key: str, choice: float,
    chosen_by: str = "epsilon_lower_family",
) -> None:  # fmt: skip
    """Merge one Bonferroni candidate (a statistic or a canary size) into ``best``: all its values
    under ``<key>_<tag>``, and per bound the largest so far; the winner of ``chosen_by`` also sets
    ``choice_key`` and the estimate, AUROC and TPR reported beside it."""
    for key, value in found.items():
        best[f"{key}_{tag}"] = value
    for key in BOUND_KEYS:
        if key in found and found[key] >= best.get(key, -1.0):
            best[key] = found[key]
            if key == chosen_by:
                best[choice_key] = choice
                for k in ("epsilon_estimate_naive", "auroc", "tpr_at_fpr_0p01"):
                    best[k] = found[k]


def _step_moments(attack: dict[str, np.ndarray], rows: np.ndarray) -> StepMoments:
    steps = int(attack["steps_observed"])
    return StepMoments(
        int(rows.sum()) * steps,
        float(attack["step_sum"][rows].sum()),
        float(attack["step_sum_squares"][rows].sum()),
    )


def _stepwise(bound: StepwiseBound) -> dict[str, float]:
    return {
        "epsilon_lower_family": bound.epsilon,
        "epsilon_estimate_family": bound.epsilon_estimate,
        "family_noise_multiplier_upper": bound.noise_multiplier_upper,
        "family_baseline_z": bound.baseline_z,
    }


def audit_cell(
    cell: Cell, attack: dict[str, np.ndarray], delta: float, confidence: float, selection: str,
    mechanism: SubsampledGaussian, seed: int,
) -> dict[str, float]:  # fmt: skip
    """The bounds of one cell (see the module docstring for the selections it accounts for)."""
    inserted = attack["inserted"]
    tm = REGISTRY[cell.threat_model]
    if tm.distinguisher == 2:
        best: dict[str, float] = {}
        weighted = zip(DISTINGUISHER2_STATISTICS, DISTINGUISHER2_SHARES, strict=True)
        for index, (name, share) in enumerate(weighted):
            level = 1.0 - share * (1.0 - confidence)
            found = _bounds_of(
                _audit(attack[f"scores_{name}"], inserted, delta, level, mechanism, seed), selection
            )
            found["confidence"] = level
            _keep_best(best, found, name, "statistic_index", float(index))
        best["counted_per_world"] = float(np.sum(inserted == 1))
        return best
    if tm.distinguisher == 3:
        # The canary is present in the steps each trial observes (E: the T − t_o after warm-up).
        observed = family(mechanism.sampling_rate, int(attack["steps_observed"]))
        sizes = attack["canary_size"]
        groups = np.unique(sizes)
        level = 1.0 - (1.0 - confidence) / len(groups)
        best = {}
        for size in groups:
            rows = sizes == size
            found = _bounds_of(
                _audit(attack["scores"][rows], inserted[rows], delta, level, observed, seed), selection,
                family_key="epsilon_lower_family_threshold",
            )  # fmt: skip
            lit = attack["scores_literal"]
            literal = epsilon_lower_from_scores(
                lit[rows & (inserted == 1)], lit[rows & (inserted == 0)], delta, level, selection, seed
            )
            found["epsilon_lower_literal_sweep"] = literal.epsilon_lower
            _keep_best(best, found, f"2n{int(size)}", "best_canary_size", float(size),
                       chosen_by="epsilon_lower_family_threshold")  # fmt: skip
        best["per_size_confidence"] = level
        best["counted_per_world"] = float(np.sum(rows & (inserted == 1)))
        # Every size's projections follow the same family (unit canary direction, noise σ, shift C),
        # so the per-step bound pools them all, decided before the data: no choice to pay for.
        # The baseline is known (0) only where no record's gradient reaches the canary: F's canary on
        # coordinates of exactly zero data mass (θ never moves), E's on inert coordinates.
        def per_step(rows: np.ndarray, zero_baseline: bool = False) -> dict[str, float]:
            return _stepwise(stepwise_family_bound(
                _step_moments(attack, rows & (inserted == 1)), _step_moments(attack, rows & (inserted == 0)),
                observed, delta=delta, confidence=confidence, known_baseline=0.0 if zero_baseline else None,
            ))  # fmt: skip

        if tm.frozen_model:
            zero_mass = float(attack.get("data_mass_at_canary", np.nan)) == 0.0
            best.update(per_step(np.ones(len(inserted), dtype=bool), zero_baseline=zero_mass))
            best["family_known_baseline"] = float(zero_mass)
            return best
        every_trial = per_step(np.ones(len(inserted), dtype=bool))
        # E trains: a canary's own updates move the weights it sits on, and where the data's gradients
        # reach them they answer in world D′ only, so the per-step law is not the family's (D′ means up
        # to 2.8 s.e. above q·C, bounds above ε_PLD). Over every trial it is reported, not counted; the
        # valid per-step bound pools the trials whose canary sits on inert coordinates, and without
        # any E keeps the one-threshold bound.
        best["epsilon_lower_family_stepwise"] = every_trial.pop("epsilon_lower_family")
        best["epsilon_estimate_family_stepwise"] = every_trial.pop("epsilon_estimate_family")
        best.update(every_trial)
        best["epsilon_lower_family"] = best["epsilon_lower_family_threshold"]
        inert = attack.get("canary_inert", np.zeros(len(inserted), dtype=bool)).astype(bool)
        best["inert_trials_per_world"] = float(np.sum(inert & (inserted == 1)))
        if np.any(inert & (inserted == 1)) and np.any(inert & (inserted == 0)):
            best.update(per_step(inert, zero_baseline=True))
        return best
    out = _bounds_of(_audit(attack["scores"], inserted, delta, confidence, mechanism, seed), selection)
    out["counted_per_world"] = float(np.sum(inserted == 1))
    return out


def audit_simulation(audit: Audit, key: str, delta: float, confidence: float, selection: str,
                     mechanism: SubsampledGaussian, seed: int) -> dict[str, float] | None:  # fmt: skip
    """The F simulation of one ε: its bounds and its agreement with the PLD oracle (max |z|)."""
    path = audit.attack_dir / f"{SIMULATION}-{key}.npz"
    if not path.exists():
        return None
    with np.load(path) as f:
        sim = {k: f[k] for k in f.files}
    result = audit_scores(
        sim["scores_dprime"].astype(np.float64), sim["scores_d"].astype(np.float64), delta=delta,
        confidence=confidence, mechanism=mechanism, headline=("subsampled_gaussian",), seed=seed,
        fpr_levels=(0.01,),
    )  # fmt: skip
    out = _bounds_of(result, selection, family_key="epsilon_lower_family_threshold")
    steps_d, steps_dprime = (
        StepMoments(int(v[0]), float(v[1]), float(v[2])) for v in (sim["steps_d"], sim["steps_dprime"])
    )
    # The simulated mechanism has no other records: its baseline is 0 by construction.
    bound = stepwise_family_bound(
        steps_dprime, steps_d, mechanism, delta=delta, confidence=confidence, known_baseline=0.0
    )
    out.update(_stepwise(bound))
    out["trials_per_world"] = float(sim["scores_d"].size)
    out["cp_cap"] = cp_cap(int(sim["scores_d"].size), delta, confidence)
    out["pld_max_abs_z"] = float(np.max(np.abs(sim["z_score"])))
    for fpr, mc, pld in zip(sim["fpr"], sim["tpr_mc"], sim["tpr_pld"], strict=True):
        out[f"tpr_mc_at_fpr_{_level_tag(float(fpr))}"] = float(mc)
        out[f"tpr_pld_at_fpr_{_level_tag(float(fpr))}"] = float(pld)
    return out


def bounds(config: InstantiationConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """Metrics per threat model and ε, the figure tables, one summary row per ε."""
    bp = config.bounds
    delta, confidence, selection = manifest.delta, bp.confidence, bp.selection
    q, steps = float(manifest.facts["sampling_rate"]), int(manifest.facts["steps"])
    mechanism = family(q, steps)
    seed = int(manifest.seeds["seed"])
    timings = json.loads((audit.train_dir / "timings.json").read_text())
    with np.load(audit.losses_path) as lf:
        accuracy = {k: float(np.mean(lf[k])) for k in lf.files if k.endswith("__test_accuracy")}
    metrics: dict[str, Any] = {}
    trials_per_second: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    upper_of: dict[str, dict[str, float]] = {}
    for eps in manifest.facts["target_epsilons"]:
        key = epsilon_key(eps)
        upper_of[key] = {
            k: finite_number(v)
            for k, v in epsilons_for_event(manifest.mechanisms[key].dp_event(), delta).items()
        }
    for cell in manifest_cells(manifest):
        with np.load(audit.attack_dir / f"{cell.file}.npz") as f:
            attack = {k: f[k] for k in f.files}
        found = audit_cell(cell, attack, delta, confidence, selection, mechanism, seed)
        upper = upper_of[cell.setting]
        per_world = int(np.sum(attack["inserted"] == 1))
        if "canary_size" in attack:  # N trials per world for each canary size (E's G sizes; F's one)
            per_world = per_world // max(1, len(np.unique(attack["canary_size"])))
        seconds = float(timings["seconds"].get(cell.file, 0.0))
        entry = {
            "epsilon_target": cell.target_epsilon,
            "noise_multiplier": cell.noise_multiplier,
            "epsilon_rdp": upper["rdp"],
            "epsilon_pld": upper["pld"],
            "cp_cap": cp_cap(per_world, delta, confidence),
            **found,
            "ratio_sweep": found["epsilon_lower_sweep"] / upper["pld"],
            "ratio_family": found["epsilon_lower_family"] / upper["pld"],
            "test_accuracy": accuracy[f"{cell.file}__test_accuracy"],
            "trials_per_world": float(per_world),
        }
        # Speed goes to the report's provenance (context), never into versioned metrics or plots.
        trials_per_second[cell.file] = len(attack["inserted"]) / seconds if seconds > 0 else 0.0
        metrics.setdefault(cell.threat_model, {})[cell.setting] = {
            k: finite_number(v) for k, v in entry.items()
        }
        label = f"{cell.threat_model}: {NAMES[cell.threat_model]}"
        rows.append({"threat_model": label, "tm": cell.threat_model,
                     **entry})  # fmt: skip
    sim_rows: list[dict[str, Any]] = []
    for i, eps in enumerate(manifest.facts["target_epsilons"]):
        key = epsilon_key(eps)
        sim = audit_simulation(audit, key, delta, confidence, selection, mechanism, seed + i)
        if sim is None:
            continue
        pld = upper_of[key]["pld"]
        sim["epsilon_pld"] = pld
        sim["ratio_family"] = sim["epsilon_lower_family"] / pld
        sim["ratio_family_threshold"] = sim["epsilon_lower_family_threshold"] / pld
        sim["ratio_sweep"] = sim["epsilon_lower_sweep"] / pld
        metrics.setdefault(SIMULATION_METRICS, {})[key] = {k: finite_number(v) for k, v in sim.items()}
        sim_rows.append({"epsilon_target": eps, **sim})
    frame = pd.DataFrame(rows)
    valid_cols = [
        c for c in ("epsilon_lower_sweep_split", "epsilon_lower_sweep_bonferroni", "epsilon_lower_family",
                    "epsilon_lower_family_threshold") if c in frame
    ]  # fmt: skip
    above = int(sum((frame[c] > frame["epsilon_pld"] + 1e-9).sum() for c in valid_cols)) if len(frame) else 0
    metrics["checks"] = {"valid_bounds_above_pld": above, "cells": len(frame)}
    # Figures: ε_LB against ε per threat model; the Fig. 9 analogue at one ε.
    epsilon_plot = frame[
        ["threat_model", "epsilon_target", "epsilon_lower_sweep", "epsilon_lower_family",
         "epsilon_estimate_naive", "epsilon_pld", "epsilon_rdp", "cp_cap"]
    ].replace([np.inf], 1e308)  # fmt: skip
    targets = list(manifest.facts["target_epsilons"])
    fig_eps = min(targets, key=lambda e: abs(math.log(e / bp.figure_epsilon)))
    fig9 = frame[frame["epsilon_target"] == fig_eps][
        ["threat_model", "epsilon_lower_sweep", "epsilon_lower_family", "epsilon_pld"]
    ]
    plots = {"epsilon.csv": epsilon_plot, "fig9.csv": fig9}
    if sim_rows:
        plots["simulation.csv"] = pd.DataFrame(sim_rows)
    strongest = strongest_of(manifest.facts["threat_models"])
    # Utility is that of models trained on the real data (A–E): F's model trains on a crafted,
    # random-looking dataset, so its accuracy says nothing about the audited training.
    real_data = next(
        (t for t in ORDER if REGISTRY[t].trains_on_real_data and t in manifest.facts["threat_models"]), None
    )
    summary = []
    for eps in targets:
        key = epsilon_key(eps)
        m = metrics[strongest][key]
        every_step = REGISTRY[strongest].frozen_model or bool(m.get("inert_trials_per_world"))
        summary.append(
            SummaryRow(
                setting=f"ε={eps:g} (z={m['noise_multiplier']:.3g}), strongest: {strongest}",
                epsilon_upper=upper_of[key],
                epsilon_lower=m["epsilon_lower_family"],
                epsilon_lower_estimator=(
                    f"{strongest} {NAMES[strongest]}: subsampled-Gaussian family bound"
                    f"{' from every step' if every_step else ''}, "
                    f"{confidence:.0%} joint (sweep: {m['epsilon_lower_sweep']:.3g})"
                ),
                scores={"epsilon_lower_ratio": m["ratio_family"]},
                utility_name="test accuracy" if real_data else None,
                epsilon_lower_assumes=FAMILY_ASSUMES,
                utility=metrics[real_data][key]["test_accuracy"] if real_data else None,
            )
        )
    return BoundsResult(
        metrics=metrics,
        plots=plots,
        summary=summary,
        context={"figure_epsilon": fig_eps, "strongest": strongest, "confidence": confidence,
                 "selection": selection, "trials_per_second": trials_per_second},
        csv_float_format="%.6g",
    )  # fmt: skip
