"""Report section of the one-run audit (Steinke, Nasr & Jagielski 2023, Fig. 2;
:data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`): the claim against the proven ε_LB, each analysis
with its ceiling, ε_LB against the number of canaries, and the canaries' scores."""

from __future__ import annotations

from dataclasses import replace

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.onerun.bounds import SCORES
from dpaudit.experiments.onerun.config import BREAK_KEY, OneRunConfig
from dpaudit.layout import Audit
from dpaudit.results import (
    AuditBlocks,
    ReportSection,
    annotate,
    audit_section,
    short_number,
)
from dpaudit.scores import ASSUMES

BREAKS = {
    "none": "the declared pipeline",
    "noise_div10": "a broken pipeline: noise multiplier divided by 10, claim unchanged",
    "unclipped_layer": "a broken pipeline: the canaries' layer is not clipped, claim unchanged",
}


def verdict_words(caught: bool, epsilon_lower: float, claimed: float, ceiling: float, level: float) -> str:
    """The one-run audit's verdict in the training audit's words: a violation proven, or nothing found
    and whether this audit could have shown a violation at all (its ceiling on the ideal canary game at
    the claimed ε against the claim)."""
    if caught:
        return (
            f"VIOLATION PROVEN: ε ≥ {epsilon_lower:.3g} > claimed {claimed:.3g} "
            f"({level:.0%})"
        )
    if ceiling < claimed:
        return (
            f"no violation found; this audit could not have shown more than {ceiling:.3g}, below "
            f"the claim {claimed:.3g}, so it could not catch a violation"
        )
    return (
        f"no violation found; this audit could have shown up to {ceiling:.3g} (ideal game at the "
        f"claim {claimed:.3g}), so a violation would likely have been caught"
    )


def section(
    config: OneRunConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's section from the bounds stage's numbers."""
    blocks = AuditBlocks(audit.name)
    ctx, facts, best = result.context, manifest.facts, result.summary[0]
    words = verdict_words(
        bool(ctx["caught"]),
        float(best.epsilon_lower or 0.0),
        float(ctx["epsilon_claimed"]),
        float(best.scores.get("ceiling") or 0.0),
        float(config.bounds.confidence),
    )
    analyses: list[str] = list(ctx["analyses"])
    levels = sorted({float(ctx["levels"][a]) for a in analyses})
    upper = best.epsilon_upper
    figures = [
        blocks.figure(
            "curve",
            title="ε lower bound against the number of canaries (Steinke et al. Fig. 2)",
            kind="line",
            csv="curve.csv",
            x="canaries",
            y=[
                *(f"epsilon_lower_{a}" for a in analyses),
                *(f"ceiling_{a}" for a in analyses),
                "epsilon_claimed",
            ],
            x_label="canaries m (the first m of the run)",
            y_label="ε",
            x_log=True,
            caption=(
                f"Each analysis at its level ({', '.join(f'{v:.3g}' for v in levels)}) on the first m "
                "canaries of the run, "
                "its ceiling on the ideal Gaussian canary game at the claimed ε and the same m, and the "
                "claimed ε."
            ),
        ),
        blocks.figure(
            "scores",
            title="Canary scores by inclusion",
            kind="histogram",
            csv="scores.csv",
            x="score",
            y=[],
            x_label="score"
            + (
                " (movement along the canary, summed-gradient units)"
                if facts["canary_kind"] == "gradient"
                else " (minus the canary's loss)"
            ),
            y_label="canaries",
            group="included",
        ),
    ]
    rows = []
    for a in analyses:
        m = ctx["details"][a]
        counted = "yes" if ctx["counted"][a] else "no"
        rows.append([
            a, ASSUMES[ctx["assumes"][a]], counted, short_number(m["epsilon_lower"]),
            short_number(m["ceiling"]), short_number(m["ratio_to_ceiling"]), int(m["guesses"]),
            int(m["correct"]), short_number(ctx["levels"][a]),
        ])  # fmt: skip
    tables = [
        blocks.table(
            "analyses",
            title="Analyses of the one run",
            columns=[
                "analysis",
                "assumes",
                "counted",
                "ε_LB",
                "ceiling",
                "ε_LB/ceiling",
                "guesses",
                "correct",
                "level",
            ],  # fmt: skip
            rows=rows,
            caption=(
                f"The headline is the largest counted bound and holds at "
                f"{float(config.bounds.confidence):.0%} "
                "jointly (each counted analysis at its Bonferroni share; an uncounted one at that level "
                "alone). fdp_gaussian counts only for full-batch DP-SGD, whose mechanism is in the "
                "Gaussian trade-off family; steinke assumes only the audit's own ½ inclusion."
            ),
        ),
        blocks.table(
            "verdict",
            title="Claim against proof",
            columns=[
                "pipeline",
                "verdict",
                "claimed ε",
                "ε_LB",
                "caught",
                *(f"ε_{k}" for k in upper),
            ],
            rows=[
                [
                    BREAKS[str(facts[BREAK_KEY])],
                    words,
                    short_number(ctx["epsilon_claimed"]),
                    short_number(best.epsilon_lower or 0.0),
                    "yes" if ctx["caught"] else "no",
                    *(short_number(v) for v in upper.values()),
                ]
            ],  # fmt: skip
            caption=(
                "caught: the proven ε_LB exceeds the claimed ε of the declared configuration. The ceiling "
                "is what an ideal attack on the ideal Gaussian canary game with these m canaries would "
                "show at the claimed ε: below the claim, this audit could not catch a violation."
            ),
        ),
    ]
    brk = str(facts[BREAK_KEY])
    description = (
        f"One DP-SGD run on {audit.dataset} (|D| = {manifest.sizes['D']}, q = {facts['sampling_rate']:g}, "
        f"T = {facts['steps']}, C = {facts['clip_norm']:g}, declared z = {ctx['noise_multiplier']:.4g}, "
        f"δ = {manifest.delta:g}; claimed ε = {ctx['epsilon_claimed']:.3g} under "
        f"{facts['calibration_accountant']}) with m = {manifest.sizes['canaries']} {facts['canary_kind']} "
        f"canaries, each included with probability ½ ({manifest.sizes['included']} were). Audited: "
        f"{BREAKS[str(facts[BREAK_KEY])]}"
        + (f" (trained with z = {ctx['noise_multiplier_used']:.4g})" if brk == "noise_div10" else "")
        + (f"; the MLP has {manifest.sizes['padding']} extra all-zero input features to hold the canaries"
           if manifest.sizes["padding"] else "")
        + f". Verdict: {words}."
    )  # fmt: skip
    summary_rows = [replace(row, setting=f"{row.setting}: {words}") for row in result.summary]
    summary = annotate(
        summary_rows,
        f"{len(analyses)} analyses of {manifest.sizes['canaries']} canaries in one run",
        best.confidence,
    )
    return audit_section(
        audit,
        manifest,
        title=f"One-run audit (Steinke et al.) on {audit.dataset}",
        description=description,
        headline=summary[0],
        rows=summary,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )
