"""Report section of the target audit: provenance, per-model membership evidence, Epsilon*, declared ε.

Only presentation lives here (editing it reruns at most ``bounds`` and ``report``). The model's file,
DVC md5 and sha256 head the section, so the report names exactly the model version it audited.
"""

from __future__ import annotations

import math
from typing import Any

from dpaudit.bounds.auditor import _level_tag
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.target.bounds import ATTACKS
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.layout import Audit
from dpaudit.report.spec import FigureSpec, ReportSection, TableSpec

#: Headline scores: Negoescu et al.'s Epsilon* beside its null level at the same n, and the AUROC of
#: the row's attack. All are evidence about this model and these records, none a bound.
SCORES = {
    "epsilon_star": "Epsilon*",
    "epsilon_star_null_high": "Epsilon* null level (95th pct., same n)",
    "auroc": "AUROC",
}


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
    declared = ctx.get("declared")
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
    pct = _pct(config.attack.confidence)
    evidence = ctx["evidence"]
    attack_rows = []
    for name, label in ATTACKS.items():
        e = evidence[name]
        tprs = [_with_interval(e, f"tpr_at_fpr_{_level_tag(level)}") for level in levels]
        attack_rows.append([label, *tprs, _with_interval(e, "auroc"), _with_interval(e, "advantage")])
    star_row = [
        _fmt(star["value"]),
        _fmt(star["null_mean"]),
        _fmt(star["null_high"]),
        "yes" if star["above_null"] else "no (within the null level)",
        _fmt(star["null_pvalue"]),
        f"[{_fmt(star['spread_low'])}, {_fmt(star['spread_high'])}]",
    ]
    tables = [
        TableSpec(id=f"{audit.name}-model", title="Audited model (provenance)", columns=["", "value"],
                  rows=provenance_rows,
                  caption="The digests are those `dvc add` recorded; the audit ran on exactly this file."),
        TableSpec(
            id=f"{audit.name}-attacks",
            title="Membership evidence about your model (not an ε bound)",
            columns=["attack", *(f"TPR @ {_pct(level)} FPR [{pct} CP]" for level in levels),
                     f"AUROC [{pct}]", f"advantage [{pct}]"],
            rows=attack_rows,
            caption=(f"Each interval is two-sided at {pct} on its own (Clopper–Pearson for TPR, "
                     "Hanley–McNeil for AUROC, DKW for the advantage). These numbers describe this model "
                     "and these member / non-member records; they are not a lower bound on the ε of the "
                     "training algorithm: members and non-members that differ in distribution score "
                     "apart even under a leak-free algorithm. Offline LiRA compares the model's "
                     f"confidence on each record with {sizes['shadows']} shadow models of the same "
                     "architecture that never saw it."),
        ),
        TableSpec(
            id=f"{audit.name}-epsilon-star",
            title="Epsilon* of your model, beside its null level at the same n",
            columns=["Epsilon*", "null level: mean", "null level: 95th pct.", "above the null level",
                     "permutation p-value", f"bootstrap spread ({pct} of resamples)"],
            rows=[star_row],
            caption=("Negoescu et al. Def. 2 (App. B parametric fit of the logit loss), "
                     f"δ = {star['delta']:.3g}. "
                     "The null level is Epsilon* on identical member and non-member distributions at the "
                     f"same n: the same losses with labels shuffled ({int(star['null_permutations'])} "
                     "permutations, group sizes kept). The bootstrap spread shows how the estimate moves "
                     "under resampling; it is not a confidence interval. An estimate for this model, not "
                     "a bound."),
        ),
    ]
    if declared:
        tables.append(TableSpec(
            id=f"{audit.name}-declared",
            title="Accountants' ε for your declared DP training",
            columns=["accountant", "ε"],
            rows=[[a, _fmt(v)] for a, v in declared["epsilon_upper"].items()],
            caption=(f"DP-SGD as declared in target.bounds.declared: q = {declared['sampling_rate']:.4g}, "
                     f"T = {int(declared['steps'])}, z = {declared['noise_multiplier']:g}, "
                     f"δ = {declared['delta']:.3g} (Poisson-sampled Gaussian composed T times). An upper "
                     "bound on ε IF the model was trained this way; the audit cannot check the declaration."),
        ))
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
        f"pool. Epsilon* (Negoescu et al.) = {star['value']:.3g}; identical member and non-member "
        f"distributions give {star['null_mean']:.3g} on average at this n (95th percentile "
        f"{star['null_high']:.3g}), so it is "
        f"{'above' if star['above_null'] else 'not above'} its null level; bootstrap spread "
        f"[{star['spread_low']:.3g}, {star['spread_high']:.3g}]. "
        "All of these are evidence about this model and these records, not a bound on the ε of the "
        "training algorithm (a bound needs shadow models retrained under the declared algorithm, or a "
        "one-run canary audit). "
        + (
            f"Declared DP training (q = {declared['sampling_rate']:.4g}, T = {int(declared['steps'])}, "
            f"z = {declared['noise_multiplier']:g}): ε ≤ {min(declared['epsilon_upper'].values()):.3g} "
            f"at δ = {declared['delta']:.3g} (tightest accountant) if the model was trained so."
            if declared
            else "No DP training configuration was declared (target.bounds.declared), so no accountant's "
            "ε is shown."
        )
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


def _with_interval(values: dict[str, float], key: str) -> str:
    """'0.42 [0.31, 0.55]' from ``key``, ``key_low`` and ``key_high``."""
    return f"{_fmt(values[key])} [{_fmt(values[key + '_low'])}, {_fmt(values[key + '_high'])}]"
