"""Report section of the instantiation audit (Nasr et al. 2021, Table I and Fig. 9;
:data:`dpaudit.references.NASR_2021`): a table of every cell, ε_LB against ε per threat model, and the
Fig. 9 analogue (grouped bars at one ε with ε_PLD dashed)."""

from __future__ import annotations

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.instantiation.bounds import SCORES
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import cell_file, epsilon_key
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
    cells = result.plots["cells.csv"]
    fig_pld = float(cells[cells["epsilon_target"] == fig_eps]["epsilon_pld"].iloc[0])
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
                "Counted lower bounds, each at its share of the joint level: the assumption-free sweep "
                "and the largest subsampled-Gaussian family bound (from every step's canary projection "
                "where the family law holds per step; otherwise one threshold through the family's "
                "trade-off curve); ε_PLD "
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
    for rec in cells.to_dict("records"):
        table_rows.append([
            rec["threat_model"], rec["epsilon_target"],
            *(short_number(rec[k]) for k in ("noise_multiplier", "epsilon_pld", "epsilon_lower_sweep",
                                             "epsilon_lower_family", "epsilon_estimate_naive", "cp_cap",
                                             "ratio_family", "test_accuracy")),
            int(rec["trials_per_world"]),
            short_number(ctx["trials_per_second"].get(cell_file(rec["tm"], rec["epsilon_target"]), 0.0)),
        ])  # fmt: skip
    tables = [
        blocks.table(
            "cells",
            title="Every threat model and target ε",
            columns=columns,
            rows=table_rows,
            caption=(
                f"All {ctx['counted_bounds']} counted bounds of one ε (every threat model, C and D's "
                "max, mean and final loss, E's canary sizes) share 1 − "
                f"{float(ctx['confidence']):.0%} equally, so their maximum, the summary's headline, "
                f"holds at {float(ctx['confidence']):.0%} jointly; the sweep uses "
                f"{ctx['selection']} threshold selection; the naive sweep chooses its threshold on the "
                "trials it counts and overclaims. F's family LB, and E's over the trials whose canary "
                "sits on inert coordinates, bound the subsampled Gaussian's noise and shift from every "
                "step's canary projection (exact χ² and binomial–normal limits). E's per-step bound "
                "over all trials assumes the data's gradients vanish on the canary coordinates, which "
                "training breaks where they are not inert: reported in the results table, not counted."
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
    description = (
        f"Nasr et al.'s six adversaries on the same DP-SGD: |D| = {manifest.sizes['dataset']}, q = "
        f"{manifest.facts['sampling_rate']:g}, T = {manifest.facts['steps']}, "
        f"C = {manifest.facts['clip_norm']:g}, δ = {manifest.delta:g}, noise calibrated per target ε under "
        f"{manifest.facts['calibration_accountant']}; "
        f"{manifest.sizes['trials_per_world']} trials per world per cell (F: "
        f"{manifest.sizes['malicious_trials_per_world']}). Crafter 2 uses {manifest.sizes['shadow_models']} "
        f"shadow models; E warms up for t_o = {manifest.facts['warmup_steps']} steps and tries 2n ∈ "
        f"{manifest.facts['canary_sizes']}. {ctx['counted_above_pld']} counted bound(s) exceed ε_PLD "
        f"(all of one ε together may, with probability at most {1 - float(ctx['confidence']):.0%}). "
        "Each summary row's headline is the largest counted bound of its ε over every threat model."
    )
    summary = [
        annotate([row], f"sweep and family bounds, {len(manifest.facts['threat_models'])} threat models, "
                 f"{manifest.sizes['trials_per_world']} trials/world", row.confidence)[0]
        for row in result.summary
    ]  # fmt: skip
    return audit_section(
        audit,
        manifest,
        title=f"Adversary instantiation (Nasr et al.) on {audit.dataset}",
        description=description,
        headline=summary[int(ctx["figure_index"])],
        rows=summary,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )
