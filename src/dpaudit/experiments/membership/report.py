"""Report section of the membership audit: text, tables and figures.

Only presentation lives here, so editing it reruns at most the ``bounds`` and ``report`` stages:
Erlingsson et al.'s region of privacy (Fig. 2) and rotated table (Table 1,
:data:`dpaudit.references.ERLINGSSON`), Negoescu et al.'s privacy–utility plot (Figs. 1–2,
:data:`dpaudit.references.NEGOESCU`) and the findings of the sanity checks.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.membership.bounds import ACCOUNTANT_ORDER
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import Strategy, manifest_strategies
from dpaudit.layout import Audit
from dpaudit.report.spec import FigureSpec, ReportSection, TableSpec

#: Headline score of this experiment: Negoescu et al.'s Epsilon* (Def. 2).
SCORES = {"epsilon_star": "Epsilon*"}


def headline_index(strategies: list[Strategy], target: float) -> int:
    """The calibrated DP strategy whose target ε is closest to ``target`` (log scale), else the first DP."""
    targets = [
        (abs(math.log(s.target_epsilon / target)), i) for i, s in enumerate(strategies) if s.target_epsilon
    ]
    if targets:
        return min(targets)[1]
    dp = [i for i, s in enumerate(strategies) if s.kind == "dp"]
    return dp[0] if dp else 0


def _fmt(value: float) -> float | str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if math.isinf(value):
        return "∞"
    return float(f"{value:.3g}")


def section(
    config: MembershipConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's report section from the bounds stage's numbers."""
    ctx = result.context
    strategies = manifest_strategies(manifest)
    frame = pd.DataFrame(ctx["frame"])
    rotated = pd.DataFrame(ctx["rotated"])
    checks: dict[str, int] = ctx["checks"]
    utility_name = str(ctx["utility_name"])
    delta = manifest.delta
    rows = result.summary
    fpr_pct = f"{100 * float(ctx['fpr']):g}%"
    base = f"plots/{audit.name}"
    figures = [
        FigureSpec(
            id=f"{audit.name}-region",
            title="Region of privacy: attack lower bounds vs. accountants' upper bounds",
            kind="line",
            data=f"{base}/region.csv",
            x="noise_multiplier",
            y=[
                "epsilon_lower_valid",
                "epsilon_lower_naive",
                "epsilon_star_parametric",
                *(f"epsilon_{a}" for a in ACCOUNTANT_ORDER),
            ],
            x_label="noise multiplier z",
            y_label="ε (mean over repeats)",
            x_log=True,
            y_log=True,
            caption=(
                "Erlingsson et al. Fig. 2: the true ε of each model lies between the best attack's lower "
                "bound and the tightest accountant (RDP/PLD). Zero lower bounds are not drawn on the log "
                "axis. epsilon_lower_naive picks the threshold on the data it scores and overclaims."
            ),
        ),
        FigureSpec(
            id=f"{audit.name}-privacy-utility",
            title="Privacy–utility: Epsilon* vs. utility per strategy",
            kind="scatter",
            data=f"{base}/privacy_utility.csv",
            x="epsilon_star_parametric",
            y=["utility"],
            x_label="Epsilon* (parametric, mean over repeats)",
            y_label=f"{utility_name} on held-out data",
            group="kind",
            highlight="pareto",
            caption="Negoescu et al. Figs. 1–2; the highlighted points form the convex Pareto frontier.",
        ),
    ]
    columns = [
        "noise multiplier",
        "strategy",
        "accuracy",
        f"attack TPR @ {fpr_pct} FPR",
        "ε lower (valid)",
        *(f"ε {a}" for a in ACCOUNTANT_ORDER),
    ]
    table_rows = [
        [
            _fmt(r["noise_multiplier"]),
            r["strategy"],
            _fmt(r["accuracy"]),
            _fmt(r["tpr_at_fpr"]),
            _fmt(r["epsilon_lower_valid"]),
            *(_fmt(r[f"epsilon_{a}"]) for a in ACCOUNTANT_ORDER),
        ]
        for r in rotated.to_dict("records")
    ]
    tables = [
        TableSpec(
            id=f"{audit.name}-rotated",
            title="Rotated table: one row per noise level",
            columns=columns,
            rows=table_rows,
            caption=(
                "Erlingsson et al. Table 1: for a fixed noise the attack TPR is one number, while the "
                f"accountants' ε at δ = {delta:.3g} differ by orders of magnitude. Means over "
                f"{manifest.sizes['repeats']} repeats."
            ),
        )
    ]
    findings = []
    if checks["valid_lower_above_rdp"]:
        findings.append(
            f"{checks['valid_lower_above_rdp']} DP model(s) have a valid lower bound above their RDP ε"
        )
    if checks["epsilon_star_above_rdp"]:
        findings.append(
            f"{checks['epsilon_star_above_rdp']} DP model(s) have Epsilon* above their RDP ε, "
            f"{checks['epsilon_star_above_rdp_and_control']} of them also above their control value. "
            "Epsilon* scores the model instance (Negoescu Def. 1), not the mechanism, and its estimator "
            "has a finite-sample floor: between two halves of the same non-members it averages "
            f"{float(np.nanmean(frame['epsilon_star_control'])):.2g} here"
        )
    if checks["epsilon_star_zero_despite_leak"]:
        findings.append(
            f"{checks['epsilon_star_zero_despite_leak']} model(s) get Epsilon* = 0 although a loss "
            "threshold separates members with advantage > 0.5: their loss distributions are so far "
            "apart that no threshold keeps both error rates inside the estimator's band"
        )
    if checks["rdp_or_pld_above_naive_or_advanced"]:
        findings.append("RDP or PLD exceeds naive/advanced composition for some noise level")
    description = (
        f"{manifest.sizes['members']} members and {manifest.sizes['nonmembers']} non-members per repeat "
        f"({manifest.sizes['repeats']} repeats, a fresh member split each), drawn from the same population. "
        "DP-SGD with Poisson sampling (rate q per step, as the accountants assume) at fixed noise "
        f"multipliers and at target ε calibrated under {manifest.facts['calibration_accountant']}, "
        f"δ = {delta:.3g}; non-DP baselines for several epoch counts and a deterministic XGBoost model "
        "(Epsilon* applies, DP bounds do not). Attack: Yeom et al.'s loss threshold; TPR at "
        f"{fpr_pct} FPR; ε lower bounds from the best threshold, chosen validly (held-out half) and "
        "naively (same data, overclaims). Epsilon* (Negoescu et al.) from the logit loss, parametric "
        "fit with its KS p-value. "
        + (
            "Findings: " + "; ".join(findings) + "."
            if findings
            else "No DP model's valid lower bound or Epsilon* exceeds its RDP ε."
        )
    )
    return ReportSection(
        dataset=audit.dataset,
        experiment=audit.experiment,
        title=f"Membership inference and Epsilon* on {audit.dataset}",
        description=description,
        headline=rows[headline_index(strategies, float(ctx["headline_target_epsilon"]))],
        rows=rows,
        tables=tables,
        figures=figures,
        scores=dict(SCORES),
        timings={"train": manifest.seconds},
    )
