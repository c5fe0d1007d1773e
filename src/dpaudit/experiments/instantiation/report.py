"""Report section of the instantiation audit (Nasr et al. 2021, Table I and Fig. 9;
:data:`dpaudit.references.NASR_2021`): a table of every cell, ε_LB against ε per threat model, and the
Fig. 9 analogue (grouped bars at one ε with ε_PLD dashed)."""

from __future__ import annotations

import math

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.instantiation.bounds import SCORES
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import NAMES, cell_file, epsilon_key
from dpaudit.layout import Audit
from dpaudit.results import (
    AuditBlocks,
    ReportSection,
    annotate,
    audit_section,
    short_number,
)


def section(
    config: InstantiationConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's section from the bounds stage's numbers."""
    blocks = AuditBlocks(audit.name)
    ctx = result.context
    fig_eps = float(ctx["figure_epsilon"])
    pld = manifest.mechanisms[epsilon_key(fig_eps)]
    fig_pld = result.metrics[manifest.facts["threat_models"][0]][epsilon_key(fig_eps)]["epsilon_pld"]
    figures = [
        blocks.figure(
            "epsilon",
            title="ε lower bound against the target ε, per threat model (Nasr et al. Table I)",
            kind="line",
            csv="epsilon.csv",
            x="epsilon_target",
            y=["epsilon_lower_sweep", "epsilon_lower_family", "epsilon_pld", "cp_cap"],
            x_label="target ε (RDP calibration)",
            y_label="ε",
            facet="threat_model",
            diagonal=True,
            caption=(
                "Valid lower bounds at the joint level: the assumption-free sweep and the "
                "subsampled-Gaussian family bound (F, and E on inert canary coordinates: from every step's "
                "canary projection; A–D: one threshold through the family's trade-off curve); ε_PLD "
                "of the noise used and the "
                "Clopper–Pearson cap of the trial count. The diagonal is the target ε."
            ),
        ),
        blocks.figure(
            "fig9",
            title=f"All threat models at ε = {fig_eps:g} (Nasr et al. Fig. 9)",
            kind="bar",
            csv="fig9.csv",
            x="threat_model",
            y=["epsilon_lower_sweep", "epsilon_lower_family"],
            x_label="threat model",
            y_label="ε lower bound",
            hlines={"ε_PLD": round(float(fig_pld), 4)},
            caption=f"The dashed line is ε_PLD of the noise calibrated for ε = {fig_eps:g} "
            f"(z = {float(pld.noise_multiplier or 0):.3g}).",
        ),
    ]
    columns = ["threat model", "ε", "z", "ε_PLD", "sweep LB", "family LB", "naive (flagged)", "CP cap",
               "LB/ε_PLD (family)", "accuracy", "trials/world", "trials/s"]  # fmt: skip
    table_rows = []
    for tm in manifest.facts["threat_models"]:
        for eps in manifest.facts["target_epsilons"]:
            m = result.metrics[tm][epsilon_key(eps)]
            table_rows.append([
                f"{tm}: {NAMES[tm]}", eps,
                *(short_number(m[k]) for k in ("noise_multiplier", "epsilon_pld", "epsilon_lower_sweep",
                                               "epsilon_lower_family", "epsilon_estimate_naive", "cp_cap",
                                               "ratio_family", "test_accuracy")),
                int(m["trials_per_world"]),
                short_number(result.context["trials_per_second"].get(cell_file(tm, eps), 0.0)),
            ])  # fmt: skip
    tables = [
        blocks.table(
            "cells",
            title="Every threat model and target ε",
            columns=columns,
            rows=table_rows,
            caption=(
                f"Bounds hold jointly at {float(ctx['confidence']):.0%}; the sweep uses "
                f"{ctx['selection']} threshold selection; the naive sweep chooses its threshold on the "
                "trials it counts and overclaims. C and D choose max, mean or final loss (weighted "
                "Bonferroni: 10 %, 10 %, 80 % of the error budget) and E chooses 2n (Bonferroni over "
                "the sizes). F's family LB, and E's over the trials whose canary sits on inert "
                "coordinates, bound the subsampled Gaussian's noise and shift from every step's canary "
                "projection (exact χ² and binomial–normal limits; the one-threshold bound is in the "
                "metrics as epsilon_lower_family_threshold). E's per-step bound over all trials "
                "(epsilon_lower_family_stepwise) assumes the data's gradients vanish on the canary "
                "coordinates, which training breaks where they are not inert: not counted as valid."
            ),
        )
    ]
    if "simulation.csv" in result.plots:
        figures.append(
            blocks.figure(
                "simulation",
                title="F idealised: Monte Carlo TPR against the PLD oracle",
                kind="scatter",
                csv="simulation.csv",
                x="epsilon_target",
                y=["ratio_family", "ratio_family_threshold", "ratio_sweep", "pld_max_abs_z"],
                x_label="target ε",
                y_label="ε_LB/ε_PLD, max |z|",
                caption="Distinguisher 3 on the ideal subsampled Gaussian; |z| is the Monte Carlo TPR's "
                "distance from the PLD trade-off in standard errors.",
            )
        )
    checks = result.metrics["checks"]
    description = (
        f"Nasr et al.'s six adversaries on the same DP-SGD: |D| = {manifest.sizes['dataset']}, q = "
        f"{manifest.facts['sampling_rate']:g}, T = {manifest.facts['steps']}, "
        f"C = {manifest.facts['clip_norm']:g}, δ = {manifest.delta:g}, noise calibrated per target ε under "
        f"{manifest.facts['calibration_accountant']}; "
        f"{manifest.sizes['trials_per_world']} trials per world per cell (F: "
        f"{manifest.sizes['malicious_trials_per_world']}). Crafter 2 uses {manifest.sizes['shadow_models']} "
        f"shadow models; E warms up for t_o = {manifest.facts['warmup_steps']} steps and tries 2n ∈ "
        f"{manifest.facts['canary_sizes']}. {checks['valid_bounds_above_pld']} valid bound(s) exceed ε_PLD "
        f"(each of the {checks['cells']} cells' bounds may, with probability at most "
        f"{1 - float(ctx['confidence']):.0%}). "
        f"The summary rows carry the strongest threat model ({ctx['strongest']})."
    )
    summary = annotate(
        result.summary,
        f"sweep and family bound, {len(manifest.facts['threat_models'])} threat models, "
        f"{manifest.sizes['trials_per_world']} trials/world",
        float(ctx["confidence"]),
    )
    return audit_section(
        audit,
        manifest,
        title=f"Adversary instantiation (Nasr et al.) on {audit.dataset}",
        description=description,
        headline=min(
            summary,
            key=lambda r: abs(math.log(float(r.setting.split("=")[1].split(" ")[0]) / fig_eps)),
        ),  # fmt: skip
        rows=summary,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )
