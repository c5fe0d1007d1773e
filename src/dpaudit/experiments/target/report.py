"""Report section of the target audit: the audited model's provenance, the attacks and Epsilon*.

Only presentation lives here (editing it reruns at most ``bounds`` and ``report``). The model's file,
DVC md5 and sha256 head the section, so the report names exactly the model version it audited.
"""

from __future__ import annotations

import math
from typing import Any

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.target.bounds import ATTACKS
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.layout import Audit
from dpaudit.report.spec import FigureSpec, ReportSection, TableSpec

#: Headline scores: Negoescu et al.'s Epsilon* and the best attack's AUROC.
SCORES = {"epsilon_star": "Epsilon*", "auroc": "AUROC"}


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return "∞" if value >= 1e308 else float(f"{value:.3g}")
    return value


def _pct(level: float) -> str:
    return f"{100 * level:g}%"


def section(
    config: TargetConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's report section from the bounds stage's numbers."""
    ctx = result.context
    model = manifest.facts.get("model") or {}
    source = manifest.facts.get("source")
    star = ctx["epsilon_star"]
    sizes = manifest.sizes
    provenance_rows = [
        ["model file", model.get("model_path", "reference model trained by dpaudit (no file)")],
        ["model md5 (DVC)", model.get("model_md5", "–")],
        ["model sha256", model.get("model_sha256", "–")],
        ["membership file", model.get("membership_path", "–")],
        ["membership md5 (DVC)", model.get("membership_md5", "–")],
        ["architecture", " → ".join(manifest.facts.get("architecture", []))],
        ["members / non-members / shadow pool",
         f"{sizes['members']} / {sizes['nonmembers']} / {sizes['pool']}"],
    ]
    levels = list(config.attack.fpr_levels)
    c = ctx["audits"]
    conf_tag = f"{100 * config.attack.confidence:g}".replace(".", "p")
    attack_rows = []
    for name, label in ATTACKS.items():
        m = c[name]
        tprs = [_fmt(m[f"tpr_at_fpr_{_tag(level)}"]) for level in levels]
        best = max((v for k, v in m.items() if k.startswith("epsilon_lower_best_valid")), default=0.0)
        attack_rows.append([label, *tprs, _fmt(m["auroc"]), _fmt(m[f"auroc_low_ci{conf_tag}"]), _fmt(best)])
    tables = [
        TableSpec(id=f"{audit.name}-model", title="Audited model (provenance)", columns=["", "value"],
                  rows=provenance_rows,
                  caption="The digests are those `dvc add` recorded; the audit ran on exactly this file."),
        TableSpec(
            id=f"{audit.name}-attacks",
            title="Membership attacks on your model",
            columns=["attack", *(f"TPR @ {_pct(level)} FPR" for level in levels), "AUROC",
                     f"AUROC lower ({_pct(config.attack.confidence)})", "ε lower (best valid)"],
            rows=attack_rows,
            caption=(f"Scores auditor at joint confidence {config.attack.confidence:g}, "
                     f"δ = {manifest.delta:.3g}. "
                     "Offline LiRA compares the model's confidence on each record with "
                     f"{sizes['shadows']} shadow models of the same architecture that never saw it."),
        ),
    ]
    figures = [
        FigureSpec(id=f"{audit.name}-roc", title="ROC of the membership attacks", kind="line",
                   data=f"plots/{audit.name}/roc.csv", x="fpr", y=["tpr"], group="attack",
                   x_label="false positive rate", y_label="true positive rate", x_log=False, diagonal=True,
                   caption="Members are positives; the diagonal is guessing."),
    ]
    which = (
        f"file {model.get('model_path')}, DVC md5 {model.get('model_md5')}"
        if source == "keras"
        else "a reference model trained by dpaudit"
    )
    description = (
        f"Your trained model ({which}) "
        f"audited on {sizes['members']} members and {sizes['nonmembers']} non-members of {audit.dataset}. "
        f"Attacks: Yeom et al.'s loss threshold (fixed threshold: TPR {ctx['yeom']['tpr']:.3g}, FPR "
        f"{ctx['yeom']['fpr']:.3g}) and offline LiRA with {sizes['shadows']} shadow models trained on the "
        f"pool. Epsilon* (Negoescu et al.) = {star['value']:.3g}, interval [{star['interval_low']:.3g}, "
        f"{star['interval_high']:.3g}], control {star['control_high']:.3g}"
        f"{' (distinguishable from the estimator noise)' if star['distinguishable'] else ''}. "
        "No accountant's upper bound applies: dpaudit does not know how the model was trained."
    )
    return ReportSection(
        dataset=audit.dataset,
        experiment=audit.experiment,
        title=f"Your model as the target: {audit.dataset}",
        description=description,
        headline=result.summary[int(ctx["headline"])],
        rows=result.summary,
        tables=tables,
        figures=figures,
        scores=dict(SCORES),
        timings={"train": manifest.seconds},
    )


def _tag(level: float) -> str:
    from dpaudit.bounds.auditor import _level_tag

    return _level_tag(level)
