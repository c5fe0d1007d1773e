"""Report section of the training audit: the verdict in words, every check in a table (a skipped one
with its reason, never as passed), and the per-step evidence of the first run with its null bands."""

from __future__ import annotations

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.training_audit.bounds import BAND, SCORES
from dpaudit.experiments.training_audit.config import TrainingAuditConfig
from dpaudit.layout import Audit
from dpaudit.results import AuditBlocks, ReportSection, audit_section, short_number


def _p(value: float | None) -> str:
    return "—" if value is None else short_number(value)


def section(
    config: TrainingAuditConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's section from the bounds stage's verdict."""
    blocks = AuditBlocks(audit.name)
    ctx, facts = result.context, manifest.facts
    verdict = ctx["verdict"]
    band = f"{BAND:.0%} per-step band under the declared DP-SGD"
    figures = [
        blocks.figure(
            "signal_to_noise",
            title="Canaries' signal to noise against the step",
            kind="line",
            csv="signal_to_noise.csv",
            x="step",
            y=["observed", "declared", "band_low", "band_high"],
            x_label="step (first run)",
            y_label="signal / noise",
            caption=(
                f"Observed a_t beside the declared b_t = ‖K_t‖/(σC) and its {band} (steps with a canary)."
            ),
        ),
        blocks.figure(
            "noise_scale",
            title="Noise scale against the step",
            kind="line",
            csv="noise_scale.csv",
            x="step",
            y=["noise_scale", "band_low", "band_high"],
            x_label="step (first run)",
            y_label="probe noise / median",
            caption=(
                f"The probe's noise scale ŝ_t over its median, with the {band} of √(χ²_k/k), "
                f"k = {ctx['probe_dims']}."
            ),
        ),
    ]
    if "residual.csv" in result.plots:
        figures.append(
            blocks.figure(
                "residual",
                title="Clipped-sum residual against the step",
                kind="line",
                csv="residual.csv",
                x="step",
                y=["residual", "band_low", "band_high"],
                x_label="step (first run)",
                y_label="residual / dimensions",
                caption=(
                    "What is left of the update once the correct clipped sum is fitted out, per "
                    f"dimension, with the {band} (F distribution)."
                ),
            )
        )
    rows = [
        [c["name"], c["kind"], c["status"], _p(c["p_value"]), short_number(c["level"]), c["message"]]
        for c in verdict["checks"]
    ]
    tables = [
        blocks.table(
            "checks",
            title="Checks of the training against its declaration",
            columns=["check", "kind", "status", "p-value", "level share", "message"],
            rows=rows,
            caption="kind: a rejected mismatch check means the code does not match its declaration; a "
            "rejected warning is a labelled warning that never makes the verdict. A skipped check could "
            "not run (its message says why and which bugs stay unseen); it is "
            "never counted as passed. Every check's level share and the bound's together make the verdict's "
            f"joint level {verdict['confidence']:.0%}.",
        ),
        blocks.table(
            "verdict",
            title="Verdict",
            columns=["verdict", "claimed ε", "ε lower", "assumes", "detectable ε", "caught"],
            rows=[
                [
                    ctx["headline"],
                    _p(verdict["claimed_epsilon"]),
                    _p(verdict["epsilon_lower"]),
                    verdict["assumption"],
                    _p(verdict["detectable_epsilon"])
                    if verdict["detectable_epsilon"] is not None
                    else "∞ (none up to the cap)",
                    "yes" if verdict["caught"] else "no",
                ]
            ],
            caption="caught: a violation proven or the code does not match its declared DP-SGD. Warnings: "
            + ("; ".join(verdict["warnings"]) or "none")
            + f". Next: {verdict['next']}",
        ),
    ]
    options = ", ".join(f"{k} = {v}" for k, v in sorted(facts["options"].items())) or "none"
    description = (
        f"The training audit of your own training function {facts['function']} (options: {options}) on "
        f"{audit.dataset} (N = {facts['dataset_size']}), run {manifest.sizes['runs']} time(s) with "
        f"{manifest.sizes['canaries']} canaries each. Declared: {ctx['declaration']}. "
        f"Verdict: {ctx['headline']}."
    )
    return audit_section(
        audit,
        manifest,
        title=f"Training audit of {facts['function']} on {audit.dataset}",
        description=description,
        headline=result.summary[0],
        rows=result.summary,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )
