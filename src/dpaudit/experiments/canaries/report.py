"""Report section of the canaries experiment: text, tables and figures (presentation only).

Aerni et al. (:data:`dpaudit.references.AERNI`): a log-log ROC per defence (most vulnerable canary
type vs clean records, their Fig. 2 style), bars of population-style vs canary-level TPR per
defence, and a privacy–utility scatter with DP-SGD as a curve (their Fig. 1 style). Attacks: LiRA
(Carlini et al. 2022, arXiv 2112.03570) and the label-only attack on the heuristic.
"""

from __future__ import annotations

from typing import Any

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.canaries.bounds import check_level, level_tag, summary_score_names
from dpaudit.experiments.canaries.config import CanariesConfig
from dpaudit.experiments.canaries.design import DEFENCE_KINDS
from dpaudit.experiments.canaries.design.comparison import COMPARED
from dpaudit.layout import Audit
from dpaudit.results import AuditBlocks, ReportSection, TableSpec, annotate, audit_section, percent

#: How every TPR interval of this section is made (:func:`dpaudit.bounds.strength.tpr_interval`).
INTERVALS = (
    "two-sided at the audit's confidence, with the threshold's own uncertainty (an order-statistic "
    "interval for the out-decisions' 1 − FPR quantile, Clopper–Pearson on the hits beyond each end; "
    "a lower limit of 0 where too few out-decisions can place a threshold at that FPR)"
)


def summary_scores_declared(level: float) -> dict[str, str]:
    """Scores carried by every summary row: TPRs at the lowest FPR level ``level``."""
    canary, population = summary_score_names(level_tag(level))
    at = percent(level)
    return {
        canary: f"TPR at {at} FPR on the most vulnerable canaries",
        population: f"TPR at {at} FPR population-style (clean records)",
        "ratio": "canary / population TPR (only where the population TPR is not 0)",
        f"{population}_upper": "population TPR's upper limit where 0 was observed",
    }


def _interval(rate: dict[str, float]) -> str:
    return f"{rate['value']:.3g} [{rate['low']:.3g}, {rate['high']:.3g}]"


def heuristic_table(
    blocks: AuditBlocks, rows: list[dict[str, Any]], levels: list[float], check: float
) -> TableSpec:
    """The published heuristics: their own population-level evaluation beside the sample-level one
    and the matched-accuracy DP-SGD setting."""
    low, at, at_low = f"{min(levels):g}", percent(check), percent(min(levels))
    columns = ["defence", "test accuracy", f"published attack TPR @{at}", "best canaries (attack)",
               f"canary TPR @{at}", f"canary TPR @{at_low}", "ratio", "canaries above population",
               f"top natural TPR @{at}", "matched DP-SGD (accuracy)",
               f"DP-SGD canary TPR @{at_low}"]  # fmt: skip
    table = []
    for r in rows:
        dp = r.get("dpsgd")
        table.append([
            r["label"], round(r["accuracy"], 4), _interval(r["population"][f"{check:g}"]),
            f"{r['best_type']} ({r['best_attack']})", _interval(r["canary"][f"{check:g}"]),
            _interval(r["canary"][low]), "∞" if r["ratio"] == float("inf") else round(r["ratio"], 1),
            "yes" if r["canary_above_population"] else "not reproduced",
            _interval(r["top_natural"]) if "top_natural" in r else "–",
            (f"{dp['label']} ({dp['accuracy']:.4f}" + ("" if dp["reaches_accuracy"] else ", less accurate")
             + ")") if dp else "–",
            _interval(dp["canary"][low]) if dp and dp["canary"] else "–",
        ])  # fmt: skip
    return blocks.table(
        "heuristics",
        "Published heuristic defences: their own evaluation beside the sample-level one",
        columns,
        table,
        caption=(
            "Published attack: the population-level attack each defence was evaluated with (one global "
            "threshold on the released confidence) on clean records. Best canaries: the largest TPR among "
            "the adaptive attacks (LiRA, RMIA, label-only) on the canary types chosen for the defence. "
            f"Intervals: {INTERVALS}. 'Canaries above population': the largest of the n candidates' "
            "one-sided lower limits, each at (1 − c)/(2n) (Bonferroni over the candidates), lies above the "
            "population's one-sided upper limit at (1 − c)/2, so the claim holds at the audit's "
            "confidence c. Top natural: the most vulnerable clean "
            "records, chosen on half of the target models and measured on the other half. Matched DP-SGD: "
            "the noisiest setting at least as accurate as the defence (the most accurate where none is), "
            "attacked by LiRA."
        ),
    )


def comparison_table(blocks: AuditBlocks, rows: list[dict[str, Any]], level: float) -> TableSpec:
    """RMIA and LiRA on the same reference models, and LiRA on every shadow (undefended models)."""
    columns = ["canary type", *(f"{a} TPR @{percent(level)}" for a in COMPARED)]
    table = [[r["canary_type"], *(_interval(r[a]) if a in r else "–" for a in COMPARED)] for r in rows]
    return blocks.table(
        "rmia",
        "RMIA beside LiRA on the same reference models (undefended models)",
        columns,
        table,
        caption=(
            "r1: one reference model that did not train on the canary (offline; RMIA approximates the "
            "in-side linearly); r4: two that did and two that did not (online). LiRA on the same models "
            "shares one variance across decisions; lira_online_logit uses all other models as shadows. "
            f"Intervals: {INTERVALS}."
        ),
    )


def heuristic_findings(rows: list[dict[str, Any]], check: float) -> list[str]:
    """One sentence per published heuristic defence."""
    at = percent(check)
    out = []
    for r in rows:
        pop, can = r["population"][f"{check:g}"], r["canary"][f"{check:g}"]
        proof = f"{r.get('joint_type', r['best_type'])} canaries under "
        proof += str(r.get("joint_attack", r["best_attack"]))
        text = (
            f"{r['label']} ({r['citation']}): its published attack reaches TPR {pop['value']:.3g} "
            f"at {at} FPR, "
            f"{r['best_type']} canaries under {r['best_attack']} {can['value']:.3g}; "
            + (f"the lower limit of {proof} lies above the population's upper limit (jointly, one-sided)"
               if r["canary_above_population"] else "Aerni et al.'s gap is not reproduced at this size")
        )  # fmt: skip
        if "criterion_holds" in r and not r["criterion_holds"]:
            text += "; the most vulnerable natural records are more exposed than the canaries"
        out.append(text)
    return out


def section(
    config: CanariesConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's report section from the bounds stage's numbers."""
    ctx = result.context
    levels = [float(v) for v in ctx["levels"]]
    checks = ctx["checks"]
    level1 = check_level(levels)  # the level of the acceptance checks and of the privacy-utility plot
    check_tag, at = level_tag(level1), percent(level1)
    blocks = AuditBlocks(audit.name)
    columns = ["defence", "test accuracy", "most vulnerable type"]
    for level in levels:
        columns += [f"canary TPR @{percent(level)}", f"population TPR @{percent(level)}"]
    columns += ["ε lower (per model)", "ε pooled (estimate)", "ε upper (tightest accountant)"]
    rows = []
    for info in ctx["defences"].values():
        row = [info["label"], round(info["accuracy"], 3), info["worst"]]
        for level in levels:
            tag = level_tag(level)
            row += [round(info["canary_tpr"][tag], 4), round(info["population_tpr"][tag]["value"], 4)]
        tightest = info["tightest_upper"]
        row += [
            round(info["epsilon_lower"], 3),
            round(info["pooled_estimate"], 3),
            "∞" if tightest is None else float(f"{tightest:.4g}"),
        ]
        rows.append(row)
    tables = [
        blocks.table(
            "defences",
            "Sample-level vs population-style evaluation per defence",
            columns,
            rows,
            caption=(
                "Canary-level: the defence's own attack (online LiRA, label-only for the heuristic) on its "
                "most vulnerable canary type; population-style: the same attack on clean records. The "
                "per-model ε lower bound holds at the stated confidence jointly over every canary type and "
                "estimator it maximises (one decision per target model; assumption-free sweeps, for DP-SGD "
                "also the subsampled-Gaussian family). The pooled value uses all decisions of the most "
                "vulnerable type and treats decisions sharing a model as independent: an estimate."
            ),
        )
    ]
    if ctx.get("reference_comparison"):
        tables.append(comparison_table(blocks, ctx["reference_comparison"], levels[0]))
    heuristics = list(ctx.get("heuristics", []))
    if heuristics:
        tables.append(heuristic_table(blocks, heuristics, levels, level1))
    figures = [
        blocks.roc(
            "roc",
            "LiRA ROC per defence: most vulnerable canaries vs clean records (log-log)",
            "roc.csv",
            log=True,
            group="series",
            facet="defence",
            caption="Aerni et al.: evaluate at low FPR on the most vulnerable records; diagonal = chance.",
        ),
        blocks.figure(
            "population-vs-canary",
            "Population-style vs canary-level TPR per defence",
            "bar",
            "population_vs_canary.csv",
            "defence",
            ctx["bar_columns"],
            "defence",
            "TPR at fixed FPR",
            caption="Population-style numbers (clean records) understate what attacks achieve on canaries.",
        ),
        blocks.figure(
            "privacy-utility",
            f"Privacy–utility: best canary-level TPR at {at} FPR vs test accuracy (DP-SGD as a curve)",
            "scatter",
            "privacy_utility.csv",
            "test_accuracy",
            ["canary_tpr"],
            "test accuracy (mean over models)",
            f"best canary TPR at {at} FPR",
            highlight="dpsgd",
            caption="Aerni et al.: DP-SGD at utility-first settings vs a heuristic at similar accuracy.",
        ),
    ]
    if heuristics:
        figures.append(
            blocks.figure(
                "heuristics",
                f"Published heuristics and matched DP-SGD: best canary TPR at {percent(min(levels))} FPR "
                "vs test accuracy",
                "scatter",
                "heuristics.csv",
                "test_accuracy",
                ["canary_tpr"],
                "test accuracy (mean over models)",
                f"best canary TPR at {percent(min(levels))} FPR",
                group="defence",
                intervals=("canary_tpr_low", "canary_tpr_high"),
                caption=f"Bars: {INTERVALS}.",
            )
        )
    facts = manifest.facts
    sizes = manifest.sizes
    findings = []
    if "undefended_mislabeled_over_clean" in checks:
        findings.append(
            f"undefended: TPR at {at} FPR on mislabeled canaries is "
            f"{checks['undefended_mislabeled_over_clean']:.3g}× that on clean records"
        )
    # The heuristic is found by its kind (as the bounds stage does), not by the defence's name.
    heuristic = next((n for n, i in ctx["defences"].items() if DEFENCE_KINDS[i["kind"]].label_only), None)
    if heuristic is not None and "heuristic_adaptive_ratio" in checks:
        h = ctx["defences"][heuristic]["population_tpr"][check_tag]
        findings.append(
            f"label-only heuristic: population-style TPR at {at} FPR {h['value']:.3g} "
            f"(interval {h['low']:.3g}–{h['high']:.3g}); the adaptive label-only attack reaches "
            f"{ctx['defences'][heuristic]['canary_tpr'][check_tag]:.3g} on "
            f"{ctx['defences'][heuristic]['worst']} canaries ({checks['heuristic_adaptive_ratio']:.3g}×)"
        )
    findings += heuristic_findings(heuristics, level1)
    findings.append(
        f"{int(checks['dp_bounds_above_accountant'])} of {int(checks['dp_bounds'])} DP-SGD ε lower bounds "
        "exceed the tightest accountant's ε"
    )
    description = (
        f"Aerni et al.'s sample-level evaluation: {sizes['models']} models per defence, {sizes['base']} "
        f"records in every model and {sizes['canaries']} canaries ("
        + ", ".join(f"{sizes[f'canaries_{t}']} {t}" for t in facts["canary_types"])
        + f"; out-of-distribution = {facts['ood']}, duplicates repeated {facts['duplicate_copies']}×), "
        "each in exactly half of the models; every model in turn is the target and the others its shadows. "
        f"{facts['epochs']:g} epochs at Poisson rate q = {facts['sampling_rate']:g} ({facts['steps']} "
        f"steps); DP-SGD with C = {facts['clip_norm']:g}, δ = {manifest.delta:g}. Attack: LiRA (Carlini et "
        "al. 2022), "
        f"online leave-one-out on the {ctx['confidence_kind']} confidence, {ctx['variance']} variance"
        + (", averaged over shifted queries" if ctx["augment"] else "")
        + "; the heuristic (top-1 label only) is attacked with a label-only likelihood-ratio test. Findings: "
        + "; ".join(findings)
        + "."
    )
    tried = f"{len(facts['canary_types'])} canary types, one decision per each of {sizes['models']} models"
    summary = [annotate([row], tried, row.confidence)[0] for row in result.summary]
    return audit_section(
        audit,
        manifest,
        title=f"Sample-level privacy evaluation with canaries on {audit.dataset}",
        description=description,
        headline=summary[int(ctx["headline_index"])],
        rows=summary,
        tables=tables,
        figures=figures,
        scores=summary_scores_declared(levels[0]),
    )
