"""Which dpaudit result answers each paper claim, and the tolerance its verdict uses.

One :class:`Claim` per row of the fidelity table: the paper's result (from
:data:`dpaudit.references.PAPER_RESULTS`), the quantity compared (ε lower bounds are compared as
ε_LB / ε when the paper's ε and dpaudit's differ), one or more readers of dpaudit's committed results
(the paper's own estimator first where dpaudit runs it, then dpaudit's tighter ones), the
:class:`Rule` that makes a number "reproduced", and the weaker qualitative statement that makes it
"qualitatively". The tolerances are written here, beside the rows, and printed in the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dpaudit.fidelity.evidence import Observed
from dpaudit.fidelity.sources import (
    Source,
    audit_best,
    audit_mean,
    audit_value,
    closed_form,
    profile_value,
    ratio_of_audit_values,
    share_of_defences,
)

__all__ = ["CLAIMS", "Claim", "Rule"]


@dataclass(frozen=True)
class Rule:
    """When dpaudit's number reproduces the paper's.

    ``near``: |dpaudit − paper| ≤ tolerance, or the paper's number inside dpaudit's interval;
    ``at_least`` / ``at_most``: dpaudit ≥ paper − tolerance / ≤ paper + tolerance (for the papers'
    "up to" and "all below" claims).
    """

    kind: Literal["near", "at_least", "at_most"]
    tolerance: float

    def holds(self, paper: float, observed: Observed) -> bool:
        if self.kind == "at_least":
            return observed.value >= paper - self.tolerance
        if self.kind == "at_most":
            return observed.value <= paper + self.tolerance
        inside = (
            observed.low is not None and observed.high is not None and observed.low <= paper <= observed.high
        )
        return inside or abs(observed.value - paper) <= self.tolerance

    def text(self) -> str:
        if self.kind == "near":
            return f"±{self.tolerance:g}"
        sign, side = ("≥", "−") if self.kind == "at_least" else ("≤", "+")
        return f"{sign} paper" + (f" {side} {self.tolerance:g}" if self.tolerance else "")


@dataclass(frozen=True)
class Claim:
    """One paper result, how dpaudit answers it, and what counts as reproducing it."""

    result: str
    quantity: str
    sources: tuple[Source, ...]
    rule: Rule
    qualitative: str = ""
    holds_qualitatively: Callable[[Observed], bool] | None = None
    paper_scale: float = 1.0


_ADULT_EPS2 = "adult |D| = 1000, q = 0.1, T = 100, ε = 2 (default run)"
_SWEEP = "Eq. 5 sweep, Bonferroni over thresholds (assumes nothing)"


def _threat_groups(model: str, attacks: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"setting=eps2/threat_model={model}/attack={a}" for a in attacks)


def _cp_cap_1000() -> float:
    from dpaudit.bounds.empirical import epsilon_lower_from_counts

    return epsilon_lower_from_counts(0, 0, 1000, 1000, delta=1e-5, confidence=0.95).epsilon_lower


_LOSS_ATTACKS = ("final_loss", "mean_loss", "max_loss")
_EQ5 = "epsilon_lower_sweep_bonferroni"
_E_SWEEP_GROUPS = tuple(
    f"setting=eps2/threat_model=E/canary_type=2n{n}/attack=likelihood_ratio" for n in (2, 20, 80)
)
_INST = "adult-instantiation"
_E = "nasr-e-paper-placement"
_F = "nasr-f-paper-regime"
_IDENT = "adult-identifiability"

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "nasr-cp-cap", "ε_LB",
        (closed_form(_cp_cap_1000, "Clopper–Pearson, joint 95 % (each limit 97.5 %), all trials correct",
                     setting="1000 trials per world, δ = 1e-5",
                     source="dpaudit.bounds.empirical.epsilon_lower_from_counts(0, 0, 1000, 1000)"),),
        Rule("near", 0.01), "the cap is finite and below 6",
        lambda o: o.value < 6.0,
    ),
    Claim(
        "nasr-a", "ε_LB / ε",
        (audit_best(_INST, _threat_groups("A", ("final_loss",)), _EQ5,
                    _SWEEP, same=True, setting=_ADULT_EPS2, scale=2.0),),
        Rule("near", 0.05), "API access proves a small part of ε (ratio < 0.25)", lambda o: o.value < 0.25,
        paper_scale=4.0,
    ),
    Claim(
        "nasr-c", "ε_LB / ε",
        (audit_best(_INST, _threat_groups("C", _LOSS_ATTACKS), _EQ5,
                    _SWEEP, same=True, setting=_ADULT_EPS2, scale=2.0),),
        Rule("near", 0.05), "intermediate models prove less than half of ε", lambda o: o.value < 0.5,
        paper_scale=2.0,
    ),
    Claim(
        "nasr-d", "ε_LB / ε",
        (audit_best(_INST, _threat_groups("D", _LOSS_ATTACKS), _EQ5,
                    _SWEEP, same=True, setting=_ADULT_EPS2, scale=2.0),),
        Rule("near", 0.05), "adaptive poison proves less than half of ε", lambda o: o.value < 0.5,
        paper_scale=2.0,
    ),
    Claim(
        "nasr-d-minus-c", "(D − C) / ε",
        (profile_value("nasr-d-crafters", "d_minus_c.paper_literal", same=False, scale=4.0),
         profile_value("nasr-d-crafters", "d_minus_c.clipped_query", same=False, scale=4.0)),
        Rule("near", 0.03), "D − C > 0 (adaptive poison at least as strong)", lambda o: o.value > 0,
        paper_scale=2.0,
    ),
    Claim(
        "nasr-e", "ε_LB / ε",
        (profile_value(_E, "eq5_sweep_ratio", same=True, scale=2.0, times="epsilon_pld"),
         profile_value(_E, "best_counted_ratio", same=False, scale=2.0, times="epsilon_pld"),
         audit_best(_INST, _E_SWEEP_GROUPS, _EQ5, _SWEEP + ", inert placement", same=True,
                    setting=_ADULT_EPS2, scale=2.0),
         audit_value(_INST, "setting=eps2/threat_model=E/attack=stepwise_inert", "epsilon_lower",
                     "per-step subsampled-Gaussian family bound, inert coordinates (zero baseline by design)",
                     same=False, setting=_ADULT_EPS2, scale=2.0)),
        Rule("near", 0.1), "the gradient canary proves at least a quarter of ε", lambda o: o.value >= 0.25,
        paper_scale=1.0,
    ),
    Claim(
        "nasr-f", "ε_LB / ε",
        (profile_value(_F, "eq5_sweep.paper_regime", same=True, scale=4.0),
         profile_value(_F, "eq5_ceiling_oracle_threshold.paper_trials", same=True, scale=4.0),
         profile_value(_F, "eq5_sweep.small_regime", same=True, scale=4.0),
         profile_value(_F, "stepwise_family.paper_regime", same=False, scale=4.0),
         profile_value("nasr-f-trainer", "eq5_sweep", same=True, scale=4.0),
         profile_value("nasr-f-trainer", "family_bound", same=False, scale=4.0),
         audit_value(_INST, "setting=eps2/threat_model=F/attack=stepwise", "epsilon_lower",
                     "per-step subsampled-Gaussian family bound (known zero baseline), trainer",
                     same=False, setting=_ADULT_EPS2, scale=2.0)),
        Rule("near", 0.1), "the malicious dataset proves most of ε (ratio ≥ 0.5)", lambda o: o.value >= 0.5,
        paper_scale=4.0,
    ),
    Claim(
        "bernau-adv-ls-bounded", "Adv",
        (audit_value(_IDENT, "setting=rb0.9_local-bounded/attack=di", "advantage_decision",
                     "DI adversary's decision advantage, 95 % interval", same=True,
                     setting="adult, ρβ = 0.9, LS, bounded, 500 trials per world, z by RDP"),),
        Rule("near", 0.05), "the advantage stays below ρα", lambda o: o.value <= 0.23,
    ),
    Claim(
        "bernau-adv-ls-unbounded", "Adv",
        (audit_value(_IDENT, "setting=rb0.9_local-unbounded/attack=di", "advantage_decision",
                     "DI adversary's decision advantage, 95 % interval", same=True,
                     setting="adult, ρβ = 0.9, LS, unbounded, 500 trials per world, z by RDP"),),
        Rule("near", 0.05), "the advantage stays below ρα", lambda o: o.value <= 0.23,
    ),
    Claim(
        "bernau-rho-alpha", "ρα",
        (audit_value(_IDENT, "setting=rb0.9_local-bounded", "rho_alpha_thm2",
                     "closed form, Thm. 2", same=True, setting="ρβ = 0.9, δ = 1/|D| = 0.001"),),
        Rule("near", 0.01), "ρα grows with ρβ", lambda o: 0 < o.value < 1,
    ),
    Claim(
        "bernau-delta-prime", "δ′",
        (audit_value(_IDENT, "setting=rb0.9_local-bounded/attack=di", "delta_prime",
                     "share of trials whose belief exceeds ρβ", same=True,
                     setting="adult, ρβ = 0.9, LS, bounded, 500 trials per world"),),
        Rule("near", 0.01), "δ′ at most the DP δ", lambda o: o.value <= 0.001,
    ),
    Claim(
        "bernau-candidates", "flag",
        (profile_value("bernau-candidates", "top_above_bottom", same=True),),
        Rule("near", 0.0),
    ),
    Claim(
        "erlingsson-tpr-weak-noise", "TPR",
        (profile_value("erlingsson-overfit", "dp-z0p5.attack_tpr", same=True),
         audit_mean("adult-membership", "setting=dp-z0p5/attack=loss-", "tpr_at_fpr_0p05",
                    "loss threshold, mean over 5 repeats", same=True, setting="adult default run, z = 0.5")),
        Rule("near", 0.03), "above the FPR (0.05)", lambda o: o.value > 0.05,
    ),
    Claim(
        "erlingsson-tpr-strong-noise", "TPR",
        (profile_value("erlingsson-overfit", "dp-z64.attack_tpr", same=True),
         audit_mean("adult-membership", "setting=dp-z64/attack=loss-", "tpr_at_fpr_0p05",
                    "loss threshold, mean over 5 repeats", same=True, setting="adult default run, z = 64")),
        Rule("near", 0.02), "near the FPR (≤ 0.07)", lambda o: o.value <= 0.07,
    ),
    Claim(
        "erlingsson-trend", "Spearman ρ",
        (profile_value("erlingsson-overfit", "spearman_tpr_vs_noise", same=True),),
        Rule("near", 0.2), "TPR falls as noise grows (ρ ≤ −0.5)", lambda o: o.value <= -0.5,
    ),
    Claim(
        "negoescu-adult-max", "Epsilon*",
        (profile_value("negoescu-adult", "epsilon_star_largest", same=True),
         audit_best("adult-membership", None, "epsilon_star_parametric",
                    "Epsilon* (parametric), largest model",
                    same=True, setting="adult default run, 2000 + 2000 candidates")),
        Rule("at_most", 0.0), "Epsilon* below 1 for every model", lambda o: o.value < 1.0,
    ),
    Claim(
        "aerni-underestimate", "ratio",
        (ratio_of_audit_values(
            "digits-canaries",
            tuple(f"canary_type={t}/defence=undefended/attack=lira_online_logit"
                  for t in ("mislabeled", "blank", "ood", "duplicates", "mislabeled_duplicates")),
            "canary_type=clean/defence=undefended/attack=lira_online_logit", "tpr_at_fpr_0p01",
            "LiRA TPR at 1 % FPR, best canary type / clean records",
            setting="digits, undefended MLP, 64 models"),),
        Rule("at_least", 0.0), "canaries leak more than the population (ratio > 1)", lambda o: o.value > 1,
    ),
    Claim(
        "aerni-heuristics-leak", "share",
        (share_of_defences(
            "digits-canaries", lambda r: bool(r.get("canary_above_population")),
            "best adaptive attack × canary type vs the published attack on clean records, TPR at 1 % FPR; "
            "limits joint at 95 % over the pick",
            setting="digits, RelaxLoss and SELENA tuned to ≥ 0.93, 64 models",
            describe="canary_above_population"),),
        Rule("near", 0.0), "at least one defence leaks significantly more on canaries", lambda o: o.value > 0,
    ),
    Claim(
        "aerni-dp-baseline", "share",
        (share_of_defences(
            "digits-canaries",
            lambda r: r.get("canary_tpr_at_fpr_0p001", 1.0)
            < r.get("matched_dpsgd_canary_tpr_at_fpr_0p001", 0.0),
            "best canary TPR at 0.1 % FPR, heuristic below the noisiest DP-SGD at least as accurate "
            "(the most accurate where none is)",
            setting="digits, DP-SGD z ∈ {2, 0.5, 0.1}, 64 models",
            describe="canary_tpr_at_fpr_0p001 vs matched_dpsgd_canary_tpr_at_fpr_0p001"),),
        Rule("near", 0.0), "not every heuristic beats DP-SGD (share < 1)", lambda o: o.value < 1,
    ),
    Claim(
        "steinke-one-run", "ε_LB / ε",
        (audit_value("adult-onerun", "canary_type=gradient", "epsilon_lower_one_run_steinke",
                     "Steinke et al. one-run bound, 95 %", same=True,
                     setting="adult, full batch, T = 30, m = 1000 gradient canaries, ε = 4", scale=4.0),),
        Rule("near", 0.1), "a positive one-run bound", lambda o: o.value > 0,
    ),
)  # fmt: skip
