"""Report section of the membership audit: text, tables and figures.

Only presentation lives here, so editing it reruns at most the ``bounds`` and ``report`` stages:
Erlingsson et al.'s region of privacy (Fig. 2) and rotated table (Table 1,
:data:`dpaudit.references.ERLINGSSON`), Negoescu et al.'s privacy–utility plot (Figs. 1–2,
:data:`dpaudit.references.NEGOESCU`) and the findings of the sanity checks. The region of privacy
draws only valid lower bounds on the mechanism (the one-run bound of Steinke et al. 2023); the
per-model test statistic, the naive estimate and Epsilon* get their own figure, labelled as
estimates.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.membership.bounds import ACCOUNTANT_ORDER
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import Strategy, manifest_strategies
from dpaudit.layout import Audit
from dpaudit.results import (
    AuditBlocks,
    ReportSection,
    audit_section,
    interval,
    percent,
    short_number,
)

#: What the one-run bound assumes, in words (the summary row carries the tag ``one-run``).
ONE_RUN_TEXT = "each candidate included independently with probability 1/2 (drawn so)"

#: Headline score of this experiment: Negoescu et al.'s Epsilon* (Def. 2), beside its null level:
#: the 95th percentile of Epsilon* over label permutations of the same losses (identical distributions).
SCORES = {"epsilon_star": "Epsilon*", "epsilon_star_null_high": "Epsilon* null level (95th pct., same n)"}


def headline_index(strategies: list[Strategy], target: float) -> int:
    """The calibrated DP strategy whose target ε is closest to ``target`` (log scale), else the first DP."""
    targets = [
        (abs(math.log(s.target_epsilon / target)), i) for i, s in enumerate(strategies) if s.target_epsilon
    ]
    if targets:
        return min(targets)[1]
    dp = [i for i, s in enumerate(strategies) if s.spec.private]
    return dp[0] if dp else 0


def _above_null(share: float, repeats: int) -> str:
    """'yes' / 'no (within the null level)' / 'k of R models' from the mean of the 0/1 flags."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "–"
    if share >= 1.0:
        return "yes"
    if share <= 0.0:
        return "no (within the null level)"
    return f"{round(share * repeats)} of {repeats} models"


def section(
    config: MembershipConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's report section from the bounds stage's numbers."""
    blocks = AuditBlocks(audit.name)
    ctx = result.context
    strategies = manifest_strategies(manifest)
    frame = pd.DataFrame(ctx["frame"])
    rotated = pd.DataFrame(ctx["rotated"])
    checks: dict[str, int] = ctx["checks"]
    utility_name = str(ctx["utility_name"])
    delta = manifest.delta
    repeats = int(manifest.sizes["repeats"])
    candidates = int(manifest.sizes["members"]) + int(manifest.sizes["nonmembers"])
    tried = f"one-run audit, ~{candidates} candidates' losses, first of {repeats} models (pre-registered)"
    rows = [row if row.epsilon_lower is None else replace(row, tried=tried) for row in result.summary]
    fpr_pct = percent(float(ctx["fpr"]))
    tpr = str(ctx["tpr_column"])
    confidence = float(ctx.get("confidence", 0.95))
    figures = [
        blocks.figure(
            "region",
            title="Region of privacy: valid attack lower bound vs. accountants' upper bounds",
            kind="line",
            csv="region.csv",
            x="noise_multiplier",
            y=["epsilon_lower_one_run", *(f"epsilon_{a}" for a in ACCOUNTANT_ORDER)],
            x_label="noise multiplier z",
            y_label="ε",
            x_log=True,
            y_log=True,
            caption=(
                "Erlingsson et al. Fig. 2: the mechanism's true ε lies between the valid lower bound and "
                "the tightest accountant (RDP/PLD). The lower bound is the one-run audit of Steinke et al. "
                f"2023 (assumes {ONE_RUN_TEXT}) of the first repeat's model, pre-registered, at "
                f"{confidence:.0%}. Zero lower bounds are not drawn on the log axis. Estimates are not "
                "drawn here."
            ),
        ),
        blocks.figure(
            "estimates",
            title="Estimates and per-model statistics (not bounds on the mechanism) vs. RDP ε",
            kind="line",
            csv="estimates.csv",
            x="noise_multiplier",
            y=[
                "epsilon_per_model_test",
                "epsilon_naive_estimate",
                "epsilon_star_parametric",
                "epsilon_star_null_mean",
                "epsilon_rdp",
            ],
            x_label="noise multiplier z",
            y_label="ε estimate (mean over repeats)",
            x_log=True,
            y_log=True,
            caption=(
                "None of these is a lower bound on the DP mechanism's ε. ε (per model test) is a "
                "Clopper–Pearson test statistic on one model's member / non-member split; "
                "ε (naive estimate) picks its threshold on the data it scores; Epsilon* scores the "
                "trained model (Negoescu et al.) and Epsilon* (null mean) is what it gives on identical "
                "member and non-member distributions at the same n (label permutations of the same "
                "losses). The RDP ε is drawn for scale."
            ),
        ),
        blocks.figure(
            "privacy-utility",
            title="Privacy–utility: Epsilon* vs. utility per strategy",
            kind="scatter",
            csv="privacy_utility.csv",
            x="epsilon_star_parametric",
            y=["utility"],
            x_label="Epsilon* (parametric, mean over repeats)",
            y_label=utility_name,
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
        f"TPR {confidence:.0%} CI",
        f"ε lower: one-run (joint {confidence:.0%})",
        *(f"ε {a}" for a in ACCOUNTANT_ORDER),
    ]
    table_rows = [
        [
            short_number(r["noise_multiplier"]),
            r["strategy"],
            short_number(r["accuracy"]),
            short_number(r[tpr]),
            interval(r[f"{tpr}_low"], r[f"{tpr}_high"]),
            short_number(r["epsilon_lower_one_run"]),
            *(short_number(r[f"epsilon_{a}"]) for a in ACCOUNTANT_ORDER),
        ]
        for r in rotated.to_dict("records")
    ]
    tables = [
        blocks.table(
            "rotated",
            title="Rotated table: one row per noise level",
            columns=columns,
            rows=table_rows,
            caption=(
                "Erlingsson et al. Table 1: for a fixed noise the attack TPR is one number, while the "
                f"accountants' ε at δ = {delta:.3g} differ by orders of magnitude. Means over "
                f"{manifest.sizes['repeats']} repeats (TPR interval: mean of the per-model two-sided "
                "Clopper–Pearson limits). The lower bound is the one-run audit's, the smallest over the "
                "repeats."
            ),
        ),
        blocks.table(
            "epsilon-star",
            title="Epsilon* per strategy, with its null level at the same n and its bootstrap spread",
            columns=[
                "strategy",
                "Epsilon*",
                "null level: mean",
                "null level: 95th pct.",
                "above the null level",
                f"bootstrap spread ({confidence:.0%} of resamples)",
            ],
            rows=[
                [
                    r["strategy"],
                    short_number(r["epsilon_star_parametric"]),
                    short_number(r["epsilon_star_null_mean"]),
                    short_number(r["epsilon_star_null_high"]),
                    _above_null(r["epsilon_star_above_null"], repeats),
                    interval(r["epsilon_star_spread_low"], r["epsilon_star_spread_high"]),
                ]
                for r in frame.to_dict("records")
            ],
            caption=(
                "Negoescu et al. Def. 2 with App. B's band rule (parametric), means over repeats. The "
                "null level is Epsilon* on identical member and non-member distributions at the same n: "
                "the same losses with member/non-member labels shuffled (100 permutations, group sizes "
                "kept), its mean and 95th percentile. A value not above the 95th percentile is what "
                "identical distributions give. The bootstrap spread shows how the estimate moves under "
                "resampling; it is not a confidence interval (it rarely covers the population value). "
                "Epsilon* is an estimate for the trained model, not a bound on the mechanism."
            ),
        ),
    ]
    findings = []
    if checks["one_run_above_rdp"]:
        findings.append(
            f"{checks['one_run_above_rdp']} DP model(s) have a one-run lower bound above their RDP ε: "
            "an estimator or accountant is wrong, or the bound's 1 − confidence chance came up"
        )
    if checks["epsilon_star_not_above_null"]:
        findings.append(
            f"{checks['epsilon_star_not_above_null']} model(s) have an Epsilon* not above its null level "
            "(the 95th percentile of what identical distributions give at the same n)"
        )
    if checks["epsilon_star_above_rdp"]:
        findings.append(
            f"{checks['epsilon_star_above_rdp']} DP model(s) have Epsilon* above their RDP ε, "
            f"{checks['epsilon_star_above_rdp_and_null']} of them also above their null level. "
            "Epsilon* scores the model instance (Negoescu Def. 1), not the mechanism, and its estimator "
            "has a finite-sample floor: on identical distributions at the same n it averages "
            f"{float(np.nanmean(frame['epsilon_star_null_mean'])):.2g} here"
        )
    if checks["epsilon_star_zero_despite_leak"]:
        findings.append(
            f"{checks['epsilon_star_zero_despite_leak']} model(s) get Epsilon* = 0 although a loss "
            "threshold separates members with advantage > 0.5: their loss distributions are so far "
            "apart that no threshold keeps both error rates inside the estimator's band"
        )
    if checks["rdp_or_pld_above_naive_or_advanced"]:
        findings.append("RDP or PLD exceeds naive/advanced composition for some noise level")
    one_run = bool(ctx.get("one_run", True))
    lower_text = (
        "The valid lower bound on the mechanism's ε is the one-run audit of Steinke, Nasr & Jagielski "
        f"(2023) on every model's loss scores (joint {confidence:.0%}; valid because every candidate was "
        "included independently with probability 1/2 before training) of the first repeat's model, "
        "pre-registered; the other repeats' bounds are in the results table. "
        if one_run
        else "No lower bound on the mechanism is reported: members were not included with probability "
        "1/2 each (members ≠ non-members), which the one-run audit needs. "
    )
    description = (
        f"{manifest.sizes['members']} members and {manifest.sizes['nonmembers']} non-members expected per "
        f"repeat ({manifest.sizes['repeats']} repeats): every candidate of one population is a member "
        "independently in each repeat, so the member count varies. "
        "DP-SGD with Poisson sampling (rate q per step, as the accountants assume) at fixed noise "
        f"multipliers and at target ε calibrated under {manifest.facts['calibration_accountant']}, "
        f"δ = {delta:.3g}; non-DP baselines for several epoch counts and a deterministic XGBoost model "
        "(Epsilon* applies, DP bounds do not). Attack: Yeom et al.'s loss threshold; TPR at "
        f"{fpr_pct} FPR with its interval. "
        + lower_text
        + "Per model, epsilon_per_model_test (Clopper–Pearson on that model's member / non-member split "
        "at a held-out threshold) is a test statistic of one model, not a bound on the mechanism; the "
        "naive estimate picks its threshold on the data it scores. Epsilon* (Negoescu et al.) from the "
        "logit loss, parametric fit (App. B band rule), beside its null level at the same n (label "
        "permutations of the same losses) and with a bootstrap spread. "
        + (
            "Findings: " + "; ".join(findings) + "."
            if findings
            else "No DP model's one-run lower bound or Epsilon* exceeds its RDP ε."
        )
    )
    return audit_section(
        audit,
        manifest,
        title=f"Membership inference and Epsilon* on {audit.dataset}",
        description=description,
        headline=rows[headline_index(strategies, float(ctx["headline_target_epsilon"]))],
        rows=rows,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )
