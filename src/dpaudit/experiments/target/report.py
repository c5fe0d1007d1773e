"""Report section of the target audit: provenance, per-model membership evidence, Epsilon*, declared ε.

Only presentation lives here (editing it reruns at most ``bounds`` and ``report``). The model's file,
DVC md5 and sha256 head the section, so the report names exactly the model version it audited.
"""

from __future__ import annotations

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.target.bounds import ATTACKS
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.layout import Audit
from dpaudit.results import (
    AuditBlocks,
    ReportSection,
    audit_section,
    interval,
    percent,
    short_number,
)
from dpaudit.table import fpr_tag

#: Headline scores: Negoescu et al.'s Epsilon* beside its null level at the same n, and the AUROC of
#: the row's attack. All are evidence about this model and these records, none a bound.
SCORES = {
    "epsilon_star": "Epsilon*",
    "epsilon_star_null_high": "Epsilon* null level (95th pct., same n)",
    "auroc": "attack AUROC",
}


def section(
    config: TargetConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's report section from the bounds stage's numbers."""
    blocks = AuditBlocks(audit.name)
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
        [
            "members / non-members / shadow pool",
            f"{sizes['members']} / {sizes['nonmembers']} / {sizes['pool']}",
        ],
    ]
    levels = list(config.attack.fpr_levels)
    pct = percent(config.attack.confidence)
    evidence = ctx["evidence"]
    attack_rows = []
    for name, label in ATTACKS.items():
        e = evidence[name]
        keys = [f"tpr_at_fpr_{fpr_tag(level)}" for level in levels] + ["auroc", "advantage"]
        attack_rows.append([label, *(interval(e[k + "_low"], e[k + "_high"], e[k]) for k in keys)])
    star_row = [
        short_number(star["value"]),
        short_number(star["null_mean"]),
        short_number(star["null_high"]),
        "yes" if star["above_null"] else "no (within the null level)",
        interval(star["spread_low"], star["spread_high"]),
    ]
    tables = [
        blocks.table(
            "model",
            title="Audited model (provenance)",
            columns=["", "value"],
            rows=provenance_rows,
            caption="The digests are those `dvc add` recorded; the audit ran on exactly this file.",
        ),
        blocks.table(
            "attacks",
            title="Membership evidence about your model (not an ε bound)",
            columns=[
                "attack",
                *(f"TPR @ {percent(level)} FPR [{pct} CP]" for level in levels),
                f"attack AUROC [{pct}]",
                f"advantage [{pct}]",
            ],
            rows=attack_rows,
            caption=(
                f"Each interval is two-sided at {pct} on its own (Clopper–Pearson for TPR, "
                "Hanley–McNeil for AUROC, DKW for the advantage). These numbers describe this model "
                "and these member / non-member records; they are not a lower bound on the ε of the "
                "training algorithm: members and non-members that differ in distribution score "
                "apart even under a leak-free algorithm. Offline LiRA compares the model's "
                f"confidence on each record with {sizes['shadows']} shadow models of the same "
                "architecture that never saw it."
            ),
        ),
        blocks.table(
            "epsilon-star",
            title="Epsilon* of your model, beside its null level at the same n",
            columns=[
                "Epsilon*",
                "null level: mean",
                "null level: 95th pct.",
                "above the null level",
                f"bootstrap spread ({pct} of resamples)",
            ],
            rows=[star_row],
            caption=(
                "Negoescu et al. Def. 2 (App. B parametric fit of the logit loss), "
                f"δ = {star['delta']:.3g}. "
                "The null level is Epsilon* on identical member and non-member distributions at the "
                f"same n: the same losses with labels shuffled ({int(star['null_permutations'])} "
                "permutations, group sizes kept). The bootstrap spread shows how the estimate moves "
                "under resampling; it is not a confidence interval. An estimate for this model, not "
                "a bound."
            ),
        ),
    ]
    if declared:
        tables.append(
            blocks.table(
                "declared",
                title="Accountants' ε for your declared DP training",
                columns=["accountant", "ε"],
                rows=[[a, short_number(v)] for a, v in declared["epsilon_upper"].items()],
                caption=(
                    f"DP-SGD as declared in target.bounds.declared: q = {declared['sampling_rate']:.4g}, "
                    f"T = {int(declared['steps'])}, z = {declared['noise_multiplier']:g}, "
                    f"δ = {declared['delta']:.3g} (Poisson-sampled Gaussian composed T times). An upper "
                    "bound on ε IF the model was trained this way; the audit cannot check the declaration."
                ),
            )
        )
    figures = [
        blocks.roc(
            "roc",
            "ROC of the membership attacks",
            "roc.csv",
            group="attack",
            caption="Members are positives; the diagonal is guessing.",
        ),
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
    return audit_section(
        audit,
        manifest,
        title=f"Your model as the target: {audit.dataset}",
        description=description,
        headline=result.summary[int(ctx["headline"])],
        rows=result.summary,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )
