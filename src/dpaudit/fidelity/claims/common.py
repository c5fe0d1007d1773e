"""What the claims share: settings and estimators named once, closed forms, and why each tolerance
is as wide as it is (:mod:`dpaudit.fidelity.claims`)."""

from __future__ import annotations

from collections.abc import Callable

from dpaudit.fidelity import derived
from dpaudit.fidelity.evidence import Observed

ADULT_EPS2 = "adult |D| = 1000, q = 0.1, T = 100, ε = 2 (default run, 100 trials per world)"
SWEEP = "Eq. 5 sweep, Bonferroni over thresholds (assumes nothing)"
AD = derived.AD_PROFILE
AD_EQ5 = (
    "Eq. 5 sweep (Clopper–Pearson), Bonferroni over thresholds and the cell's statistics (A, B: final "
    "loss; C, D: max, mean and final loss), joint 95 %, / target ε"
)
INST = "adult-instantiation"
E = "nasr-e-paper-placement"
F = "nasr-f-paper-regime"
IDENT = "adult-identifiability"
LOSS_ATTACKS = ("final_loss", "mean_loss", "max_loss")
EQ5 = "epsilon_lower_sweep_bonferroni"
E_SWEEP_GROUPS = tuple(
    f"setting=eps2/threat_model=E/canary_type=2n{n}/attack=likelihood_ratio" for n in (2, 20, 80)
)
DELTA_BERNAU = 0.001


def threat_groups(model: str, attacks: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"setting=eps2/threat_model={model}/attack={a}" for a in attacks)


def cp_cap_1000() -> float:
    from dpaudit.bounds.empirical import epsilon_lower_from_counts

    return epsilon_lower_from_counts(0, 0, 1000, 1000, delta=1e-5, confidence=0.95).epsilon_lower


def closed_rho_alpha(rho_beta: float) -> Callable[[], float]:
    def compute() -> float:
        from dpaudit.bounds.identifiability import rho_alpha_from_epsilon
        from dpaudit.training.accounting import epsilon_from_rho_beta

        return rho_alpha_from_epsilon(epsilon_from_rho_beta(rho_beta), DELTA_BERNAU)

    return compute


def closed_epsilon(rho_beta: float) -> Callable[[], float]:
    def compute() -> float:
        from dpaudit.training.accounting import epsilon_from_rho_beta

        return epsilon_from_rho_beta(rho_beta)

    return compute


# ------------------------------------------------------------------------------- reasons for the widths

WHY_ROUNDING = "the paper prints two decimals; ±0.005 is its rounding"
WHY_CAP = "the paper prints two decimals (5.60); ±0.01 is its rounding"
WHY_NASR_RATIO = (
    "about one error count of Eq. 5 at 1000 trials: at the paper's own A rates (FP 2, TP 17 of 1000) one "
    "false positive more or fewer moves the bound from 0.32 to 0.13 or 0.58, ±0.06 of ε at ε = 4"
)
WHY_NASR_EF = (
    "Eq. 5 at 10³–10⁵ trials moves by about 0.1·ε between repeats (nasr-e-paper-placement's eight seeds "
    "span 0–0.1 of ε); the paper reports one run"
)
WHY_D_MINUS_C = (
    "the difference of two Eq. 5 bounds, each ±0.06 of ε at one error count: ±0.03 of ε is half that"
)
WHY_BERNAU_ADV = (
    "the paper's Adv comes from 1000 runs: its own 95 % sampling half-width is ±0.06 at Adv ≈ 0.2 "
    "(binomial); ±0.05 is slightly tighter than the paper's own error"
)
WHY_DELTA = (
    "the paper's statement is δ′ ≤ δ (§6.2: violations are acceptable while δ′ ≤ δ = 0.001), not a "
    "distance from its printed 0"
)
WHY_TPR_WEAK = (
    "the paper's whole effect is 3.9 points (5.0 % at the strongest noise, 8.9 % at the weakest): a "
    "tolerance wider than 3 points could not tell the weakest noise from the strongest"
)
WHY_TPR_STRONG = (
    "±2 points is the 95 % half-width of a TPR of 5 % on dpaudit's 372 pooled members; below 3 % (chance "
    "minus that) a TPR at 5 % FPR means inverted or tied scores, not privacy"
)
WHY_SPEARMAN = (
    "with six noise levels, ±0.2 allows three adjacent swaps (each moves ρ by 0.057); the paper's five "
    "levels are perfectly ordered"
)
WHY_BOUND_STATEMENT = "the paper states a strict bound (all below 0.3): no tolerance"
WHY_SHARE = "a share of a handful of defences: any other count is another finding"
WHY_FACTOR_AERNI = (
    "'as much as a factor of fifty' names the largest factor the paper saw; ≥ 50 reproduces it, and "
    "above 100 (twice) it is another finding (a weaker population attack or stronger canaries), so the "
    "upper limit is 100"
)
WHY_FLAG = "a yes/no statement"
WHY_STATEMENT = "the paper states it without a number: its statement is the test"
WHY_ACCOUNTANT = (
    "the note states neither the sampling rate, the steps, nor the RDP orders; at the assumed (q, T) a "
    "factor 2 separates 'the same analysis' from the orders of magnitude the table is about"
)
WHY_PROP3 = (
    "Prop. 3 is exact given the TPR and moves ε by about the change of advantage: ±0.02 is two points "
    "of TPR, less than the 3.9 points of the paper's whole TPR range"
)
WHY_IDEAL = (
    "read off a figure ('the red curve lies on the ideal green curve'): 10 % is finer than it resolves"
)
WHY_ORDER = "five adjacent pairs, each in order or not: any other count is another finding"


def positive_small(o: Observed) -> bool:
    return 0 < o.value < 0.5
