"""Report section of the identifiability audit: text, tables and figures (Bernau et al. §6).

Only presentation lives here, so editing it reruns at most the ``bounds`` and ``report`` stages.
Table 2 of Bernau et al. (:data:`dpaudit.references.BERNAU`) at the reference ρβ, the privacy
parameters per ρβ, and Figs. 4–9: beliefs, the three ε′ against ε, advantages against ρα, LS_i
against GS over epochs, and LS_i of the top/bottom dataset-sensitivity candidates.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.identifiability.bounds import (
    SWEEPS,
    adversary_key,
    separation_sentences,
    setting_key,
)
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import manifest_settings
from dpaudit.layout import Audit
from dpaudit.results import AuditBlocks, ReportSection, TableSpec, audit_section

# The three empirical ε′ of Bernau §5.3, by the column they are written under. (ii) and (iii) are
# estimates, not bounds: the column names say so, and they are never drawn as lower bounds.
EPSILON_PRIME_SOURCES = {
    "epsilon_prime_ls": "local sensitivities",
    "epsilon_prime_belief_estimate": "the maximum belief (estimate)",
    "epsilon_prime_adv_estimate": "Adv_DI (estimate)",
}

#: What the GDP bound assumes, in words (the summary row carries the tag).
GDP_ASSUMES = "Gaussian trade-off (full-batch Gaussian noise, q = 1)"

#: Headline scores of this experiment: Bernau et al.'s ρβ (Thm. 1) and ρα (Thm. 2).
SCORES = {"rho_beta": "ρβ", "rho_alpha": "ρα"}


def section(
    config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
) -> ReportSection:
    """The audit's report section; the headline is ρβ = reference, local sensitivity, bounded."""
    blocks = AuditBlocks(audit.name)
    table = result.table
    if table is None:
        raise ValueError(f"{audit.name}: the bounds stage returned no results table")
    facts: dict[str, Any] = result.context["facts"]
    reference = float(manifest.facts["reference_rho_beta"])
    confidence = float(result.context["confidence"])
    settings = manifest_settings(manifest)
    reference_settings = [st for st in settings if st.rho_beta == reference] or settings[:1]
    rows = []
    for st in reference_settings:
        f = facts[st.file]
        adv = table.one("advantage", adversary_key(st, "di"), estimator="decision")
        rows.append(
            [
                st.sensitivity,
                st.neighbours,
                round(adv.value, 3),
                f"[{adv.low:.2f}, {adv.high:.2f}]",
                round(f["adv_expected_local"], 3),
                round(table.one("delta_prime", adversary_key(st, "di")).value, 4),
                round(f["delta_prime_expected_local"], 4),
                f"{f['delta']:.2g}",
                round(table.one("advantage", adversary_key(st, "mi"), estimator="decision").value, 3),
            ]
        )
    table2 = TableSpec(
        id="bernau-table-2",
        title=f"A_DI,Gau at ρβ = {reference:g} (cf. Bernau et al. Table 2)",
        columns=[
            "sensitivity",
            "neighbours",
            "Adv_DI",
            f"{confidence:.0%} CI",
            "2Φ(√k/2z)−1",
            "δ′",
            "δ′ expected (LS)",
            "δ",
            "Adv_MI",
        ],
        rows=rows,
        caption=(
            "Adv_DI from final beliefs; δ′ = share of trials whose belief exceeds ρβ. The expected "
            "columns are the exact values for local-sensitivity noise (Gaussian privacy loss with "
            "μ = √k/z); global sensitivity adds more noise when LS_i < Δf and should not exceed them."
        ),
    )
    params_rows = []
    for rb in dict.fromkeys(st.rho_beta for st in settings):
        st = next(s for s in settings if s.rho_beta == rb)
        f = facts[st.file]
        params_rows.append(
            [
                rb,
                f"{f['delta']:.2g}",
                round(f["epsilon"], 3),
                round(table.one("rho_alpha", setting_key(st), estimator="thm2").value, 3),
                round(f["noise_multiplier"], 3),
            ]
        )
    params_table = TableSpec(
        id="bernau-parameters",
        title="Privacy parameters per target belief bound",
        columns=["ρβ", "δ", "ε", "ρα", "z (RDP, q=1)"],
        rows=params_rows,
    )
    bound_rows = []
    for st in settings:
        key = adversary_key(st, "di")

        def value(quantity: str, estimator: str, group: str = key) -> float:
            return table.one(quantity, group, estimator=estimator).value

        pld = value("epsilon_upper", "pld", setting_key(st))
        gdp, split = value("epsilon_lower", "gdp"), value("epsilon_lower", "sweep_split")
        bound_rows.append(
            [
                st.rho_beta,
                st.key,
                round(pld, 3),
                round(gdp, 3),
                round(gdp / pld, 2) if pld > 0 else 0.0,
                round(split, 3),
                round(value("epsilon_lower", "sweep_bonferroni"), 3),
                round(split / pld, 2) if pld > 0 else 0.0,
                round(value("epsilon_estimate", "sweep_naive"), 3),
                round(value("epsilon_estimate", "belief"), 3),
                round(value("epsilon_estimate", "adv_inverse"), 3),
                round(value("auroc", "scores"), 3),
                facts[st.file]["trials_per_world"],
            ]
        )
    level = table.one("epsilon_lower", adversary_key(settings[0], "di"), estimator="gdp").level
    bounds_table = TableSpec(
        id="lower-bounds",
        title="ε lower bounds of A_DI,Gau per estimator, and the estimates beside them",
        columns=[
            "ρβ",
            "setting",
            "ε (PLD)",
            "ε lower: GDP",
            "GDP / PLD",
            "ε lower: split sweep",
            "ε lower: Bonferroni sweep",
            "split / PLD",
            "naive sweep (estimate, overclaims)",
            "ε′ belief (estimate)",
            "ε′ Adv (estimate)",
            "AUROC",
            "trials per world",
        ],
        rows=bound_rows,
        caption=(
            f"Headline per setting: the largest of the three bounds, jointly at {confidence:.0%} (each "
            f"bound at {level:.2%}). The GDP bound (Nasr et al. 2023) assumes a {GDP_ASSUMES}; the "
            "split and Bonferroni threshold sweeps (Nasr et al. 2021) assume nothing. The naive sweep "
            "chooses its threshold on the trials it counts, and ε′ (Bernau §5.3) are point estimates: "
            "none of them is a lower bound."
        ),
    )
    figures = [
        blocks.figure(
            "beliefs",
            title="Final posterior beliefs in the true dataset",
            kind="histogram",
            csv="beliefs.csv",
            x="belief",
            y=[],
            x_label="β_k",
            y_label="trials",
            group="setting",
            facet="rho_beta",
        ),
        *(
            blocks.figure(
                f"eps-{name.removeprefix('epsilon_prime_').removesuffix('_estimate')}",
                title=f"ε′ from {source} vs target ε",
                kind="line",
                csv="epsilon.csv",
                x="epsilon",
                y=[name],
                x_label="target ε",
                y_label="ε′",
                group="setting",
                diagonal=True,
                caption="" if name == "epsilon_prime_ls" else "An estimate (Bernau §5.3), not a lower bound.",
            )
            for name, source in EPSILON_PRIME_SOURCES.items()
        ),
        blocks.figure(
            "lower-bounds",
            title="Valid ε lower bounds of A_DI,Gau vs the PLD accountant's ε",
            kind="line",
            csv="lower_bounds.csv",
            x="epsilon_pld",
            y=[f"epsilon_lower_{name}" for name in ("gdp", *SWEEPS)],
            x_label="ε (PLD accountant, upper bound)",
            y_label=f"ε lower bound (each at {level:.2%})",
            facet="setting",
            diagonal=True,
            caption=(
                "Only valid bounds are drawn: the GDP-based bound (Nasr et al. 2023; assumes the "
                "Gaussian trade-off of full-batch Gaussian noise) and the split and Bonferroni "
                "threshold sweeps (assume nothing). The naive sweep and ε′ are estimates and are "
                "left out. On the diagonal a bound would be tight."
            ),
        ),
        blocks.figure(
            "adv",
            title="Adv of A_DI,Gau and of loss-threshold MI vs ρα",
            kind="line",
            csv="epsilon.csv",
            x="epsilon",
            y=["adv_di", "adv_mi", "rho_alpha", "rho_alpha_rdp"],
            x_label="target ε",
            y_label="advantage",
            facet="setting",
        ),
    ]
    if result.context.get("steps"):
        figures.append(
            blocks.figure(
                "ls-gs",
                title=f"Local vs global sensitivity over epochs (ρβ = {reference:g})",
                kind="line",
                csv="sensitivity_steps.csv",
                x="epoch",
                y=["ls_mean", "ls_p05", "ls_p95", "gs"],
                x_label="epoch",
                y_label="sensitivity",
                facet="setting",
            )
        )
    if result.context.get("candidates"):
        figures.append(
            blocks.figure(
                "candidates",
                title="LS_i for the top/bottom dataset-sensitivity candidates (cf. Bernau Fig. 4)",
                kind="histogram",
                csv="candidates.csv",
                x="ls",
                y=[],
                x_label="LS_i",
                y_label="count",
                group="candidate",
                facet="neighbours",
            )
        )
    tables = [bounds_table, table2, params_table]
    cand_table = candidate_table(result.context, confidence)
    if cand_table is not None:
        tables.append(cand_table)
    trials = int(facts[reference_settings[0].file]["trials_per_world"])
    summary = [
        replace(row, tried=f"GDP bound and {len(SWEEPS)} threshold sweeps, {trials} trials/world")
        for row in result.summary
    ]
    headline_key = f"ρβ={reference:g} local-bounded"
    headline = next((r for r in summary if r.setting == headline_key), summary[0])
    return audit_section(
        audit,
        manifest,
        title=f"Identifiability audit — {audit.dataset}",
        description=(
            "Full-batch DP-SGD on D or a neighbour D′ chosen by dataset sensitivity; noise from the "
            "target belief bound ρβ (ε = ln(ρβ/(1−ρβ)), z by RDP). The DI adversary of Bernau et al. "
            "(Algorithm 1) observes every noisy gradient; Adv_DI should match 2Φ(√k/2z)−1 with local "
            "sensitivity and fall below it with global sensitivity. Its final log-odds of D go to the "
            "scores auditor: the headline ε lower bound is the largest of the GDP-based bound (Nasr "
            f"et al. 2023; assumes a {GDP_ASSUMES}) and the threshold sweeps, which assume nothing, "
            f"jointly at {confidence:.0%}."
            + "".join(" " + line for line in candidate_warnings(result.context))
        ),
        headline=headline,
        rows=summary,
        tables=tables,
        figures=figures,
        scores=SCORES,
    )


def candidate_warnings(context: dict[str, Any]) -> list[str]:
    """The section's warning sentences for Fig. 4 candidates that do not separate (none if they do)."""
    return separation_sentences(context.get("candidate_separation", {}), context.get("candidate_rows", []))


def candidate_table(context: dict[str, Any], confidence: float) -> TableSpec | None:
    """Per Fig. 4 candidate: mean LS_i with its interval, and per neighbourhood whether the lists separate."""
    rows = context.get("candidate_rows", [])
    if not rows:
        return None
    separation = context.get("candidate_separation", {})
    out = []
    for r in rows:
        flag = separation.get(r["neighbours"], {}).get("separated")
        out.append(
            [
                r["neighbours"],
                r["end"],
                r["rank"],
                f"#{r['index']}",
                round(r["mean_ls"], 3),
                f"[{r['low']:.3g}, {r['high']:.3g}]",
                r["trials"],
                "—" if flag is None else ("yes" if flag else "NO"),
            ]
        )
    return TableSpec(
        id="bernau-candidates",
        title="Mean LS_i of the top/bottom dataset-sensitivity candidates (cf. Bernau et al. Fig. 4)",
        columns=["neighbours", "list", "rank", "record", "mean LS_i", f"{confidence:.0%} CI", "trials",
                 "top above bottom"],
        rows=out,
        caption=(
            "Each trial's LS_i averaged over its k steps, then over the candidate's trials, with a Student-t "
            "interval per candidate (not joint). 'top above bottom' is yes when every top candidate's mean "
            "and interval lie above every bottom candidate's, as Bernau et al. Fig. 4 shows for their data."
        ),
    )
