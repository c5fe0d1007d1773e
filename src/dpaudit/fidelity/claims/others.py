"""The claims of Erlingsson et al., Negoescu et al., Aerni et al. and Steinke et al., one per result."""

from __future__ import annotations

from dpaudit.fidelity import derived
from dpaudit.fidelity.claims.common import (
    WHY_ACCOUNTANT,
    WHY_BOUND_STATEMENT,
    WHY_FACTOR_AERNI,
    WHY_PROP3,
    WHY_SHARE,
    WHY_SPEARMAN,
    WHY_STATEMENT,
    WHY_TPR_STRONG,
    WHY_TPR_WEAK,
)
from dpaudit.fidelity.claims.rules import Claim, Rule
from dpaudit.fidelity.sources import (
    audit_best,
    audit_mean,
    audit_value,
    closed_form,
    computed,
    profile_value,
    ratio_of_audit_values,
    share_of_defences,
)

OTHERS: tuple[Claim, ...] = (
    Claim(
        "erlingsson-tpr-weak-noise",
        "TPR",
        (
            profile_value("erlingsson-overfit", "dp-z0p5.attack_tpr", role="paper", interval="95 % CI"),
            audit_mean(
                "adult-membership",
                "setting=dp-z0p5/attack=loss-",
                "tpr_at_fpr_0p05",
                "loss threshold, mean over 5 repeats",
                role="also",
                setting="adult default run, z = 0.5",
            ),
        ),
        Rule("near", 0.03, WHY_TPR_WEAK),
        "the attack succeeds above chance at the weakest noise",
        "Table 1 (8.9 % at 5 % FPR)",
        lambda o: (o.low if o.low is not None else o.value) > 0.05,
        floor=0.05,
    ),
    Claim(
        "erlingsson-tpr-strong-noise",
        "TPR",
        (
            profile_value("erlingsson-overfit", "dp-z64.attack_tpr", role="paper", interval="95 % CI"),
            audit_mean(
                "adult-membership",
                "setting=dp-z64/attack=loss-",
                "tpr_at_fpr_0p05",
                "loss threshold, mean over 5 repeats",
                role="also",
                setting="adult default run, z = 64",
            ),
        ),
        Rule("at_most", 0.02, WHY_TPR_STRONG, refuse_below=0.03),
    ),
    Claim(
        "erlingsson-trend",
        "Spearman ρ",
        (profile_value("erlingsson-overfit", "spearman_tpr_vs_noise", role="paper"),),
        Rule("near", 0.2, WHY_SPEARMAN),
        "the attack's TPR falls as the noise grows",
        "Table 1",
        lambda o: o.value < 0,
    ),
    Claim(
        "erlingsson-rdp-epsilon",
        "dpaudit / paper",
        (computed(derived.erlingsson_accountant("rdp")),),
        Rule("factor", 2.0, WHY_ACCOUNTANT),
    ),
    Claim(
        "erlingsson-naive-epsilon",
        "dpaudit / paper",
        (computed(derived.erlingsson_accountant("naive")),),
        Rule("factor", 2.0, WHY_ACCOUNTANT),
    ),
    Claim(
        "erlingsson-advanced-epsilon",
        "dpaudit / paper",
        (computed(derived.erlingsson_accountant("advanced")),),
        Rule("factor", 2.0, WHY_ACCOUNTANT),
    ),
    Claim(
        "erlingsson-naive-over-rdp",
        "naïve ε / RDP ε",
        (computed(derived.erlingsson_naive_over_rdp()),),
        Rule("factor", 2.0, WHY_ACCOUNTANT),
        "the refined analyses give orders-of-magnitude tighter upper bounds",
        "§3 (reformatted table); §4, Table 1",
        lambda o: o.value >= 10,
    ),
    Claim(
        "erlingsson-lower-weak-noise",
        "ε_LB",
        (
            computed(derived.erlingsson_prop3("dp-z0p5.attack_tpr")),
            closed_form(
                lambda: derived.prop3(0.089),
                "Prop. 3 on the paper's own Table 1 TPR (8.9 %)",
                setting="Purchase-100, noise 0.44× (the paper's numbers)",
                source="dpaudit.fidelity.derived.prop3(0.089)",
                role="also",
            ),
        ),
        Rule("near", 0.02, WHY_PROP3),
        "the attack-derived lower bound is orders of magnitude below the upper bound (0.05 against 100)",
        "§5.2, Table 2",
        lambda o: o.value < 1.0,
        floor=0.0,
    ),
    Claim(
        "negoescu-adult-max",
        "Epsilon*",
        (
            profile_value("negoescu-adult", "epsilon_star_largest", role="paper"),
            audit_best(
                "adult-membership",
                None,
                "epsilon_star_parametric",
                "Epsilon* (parametric), largest model",
                role="also",
                setting="adult default run, 2000 + 2000 candidates",
            ),
        ),
        Rule(
            "at_most",
            0.0,
            WHY_BOUND_STATEMENT + "; Epsilon* exactly 0 (no separation fitted at all) is "
            "refused as degenerate",
            refuse_below=1e-9,
        ),
    ),
    Claim(
        "negoescu-epoch-trend",
        "increasing pairs",
        (computed(derived.negoescu_epoch_trend()),),
        Rule(
            "statement", 0.0, WHY_STATEMENT, statement=lambda v: v == 3, statement_text="3 of 3 increasing"
        ),
    ),
    Claim(
        "negoescu-dp-below-nondp",
        "share of pairs",
        (computed(derived.negoescu_dp_below_nondp()),),
        Rule(
            "near",
            0.0,
            "the paper says DP instances are below (every pair): any other share is another finding",
        ),
    ),
    Claim(
        "negoescu-below-epsilon",
        "DP models above ε",
        (computed(derived.negoescu_below_epsilon()),),
        Rule("near", 0.0, "the paper says every DP model is below its ε: one above is another finding"),
    ),
    Claim(
        "aerni-underestimate",
        "ratio",
        (
            computed(derived.aerni_factor(None, role="paper")),
            *(computed(derived.aerni_factor(d, role="also")) for d in ("relaxloss", "selena", "hamp")),
            ratio_of_audit_values(
                "digits-canaries",
                tuple(
                    f"canary_type={t}/defence=undefended/attack=lira_online_logit"
                    for t in ("mislabeled", "blank", "ood", "duplicates", "mislabeled_duplicates")
                ),
                "canary_type=clean/defence=undefended/attack=lira_online_logit",
                "tpr_at_fpr_0p01",
                "LiRA TPR at 1 % FPR, best canary type / clean records, undefended model (no defence)",
                role="beyond",
                setting="digits, undefended MLP, 64 models",
            ),
        ),
        Rule("at_least", 0.0, WHY_FACTOR_AERNI, upper=100.0),
        "population-level evaluations underestimate the leakage of the most vulnerable samples",
        "summary (sample-level evaluation)",
        lambda o: (o.low if o.low is not None else o.value) > 1,
        floor=1.0,
    ),
    Claim(
        "aerni-heuristics-leak",
        "share",
        (
            share_of_defences(
                "digits-canaries",
                lambda r: bool(r.get("canary_above_population")),
                "best adaptive attack × canary type vs the published attack on clean records, "
                "TPR at 1 % FPR; "
                "limits joint at 95 % over the pick",
                role="paper",
                setting="digits, RelaxLoss, SELENA and HAMP tuned to ≥ 0.93, 64 models (3 of the 5)",
                describe="canary_above_population",
            ),
        ),
        Rule("near", 0.0, WHY_SHARE),
    ),
    Claim(
        "aerni-dp-baseline",
        "share",
        (
            share_of_defences(
                "digits-canaries",
                lambda r: r.get("canary_tpr_at_fpr_0p001", 1.0)
                < r.get("matched_dpsgd_canary_tpr_at_fpr_0p001", 0.0),
                "best canary TPR at 0.1 % FPR, heuristic below the noisiest DP-SGD at least as accurate "
                "(the most accurate where none is)",
                role="paper",
                setting="digits, DP-SGD z ∈ {2, 0.5, 0.1} (coarser than the paper's tuning), 64 models",
                describe="canary_tpr_at_fpr_0p001 vs matched_dpsgd_canary_tpr_at_fpr_0p001",
            ),
        ),
        Rule("near", 0.0, WHY_SHARE),
    ),
    Claim(
        "aerni-dp-baseline-tuned",
        "share",
        (),
        Rule("near", 0.0, WHY_SHARE),
        needs="digits-canaries with a fine DP-SGD noise grid near the heuristics' accuracy "
        "(about ten z from 0.02 "
        "to 0.5, ε ≫ 1000): about 6 min of training on two cores (34 s per 64 DP-SGD models)",
    ),
    Claim(
        "steinke-one-run",
        "ε_LB / ε",
        (
            audit_value(
                "adult-onerun",
                "canary_type=gradient",
                "epsilon_lower_one_run_steinke",
                "Steinke et al. one-run bound, 95 %",
                role="paper",
                setting="adult, full batch, T = 30, m = 1000 gradient canaries, ε = 4",
                scale=4.0,
            ),
        ),
        Rule("near", 0.1, "the texts dpaudit works from give no number for this result"),
        floor=0.0,
    ),
)
