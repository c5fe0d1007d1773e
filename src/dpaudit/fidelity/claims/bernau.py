"""The claims of Bernau et al. (identifiability of DP): one claim per headline result."""

from __future__ import annotations

from dpaudit.fidelity import derived
from dpaudit.fidelity.claims.common import (
    DELTA_BERNAU,
    IDENT,
    WHY_BERNAU_ADV,
    WHY_DELTA,
    WHY_FLAG,
    WHY_IDEAL,
    WHY_ROUNDING,
    WHY_STATEMENT,
    closed_epsilon,
    closed_rho_alpha,
)
from dpaudit.fidelity.claims.rules import Claim, Rule
from dpaudit.fidelity.sources import (
    audit_value,
    closed_form,
    computed,
    profile_value,
)

BERNAU: tuple[Claim, ...] = (
    Claim(
        "bernau-adv-ls-bounded",
        "Adv",
        (
            computed(derived.bernau_pooled_ls()),
            audit_value(
                IDENT,
                "setting=rb0.9_local-bounded/attack=di",
                "advantage_decision",
                "DI adversary's decision advantage, bounded runs only",
                role="also",
                setting="adult, ρβ = 0.9, LS, bounded, 500 trials per world, z by RDP",
            ),
        ),
        Rule("near", 0.05, WHY_BERNAU_ADV),
        "the advantage stays near ρα (0.23)",
        "§6 (opening): an advantage equal to ρα with LS",
        lambda o: o.low is not None and o.low <= 0.23 <= o.high,
        floor=0.0,  # type: ignore[operator]
    ),
    Claim(
        "bernau-adv-ls-unbounded",
        "Adv",
        (
            computed(derived.bernau_pooled_ls()),
            audit_value(
                IDENT,
                "setting=rb0.9_local-unbounded/attack=di",
                "advantage_decision",
                "DI adversary's decision advantage, unbounded runs only",
                role="also",
                setting="adult, ρβ = 0.9, LS, unbounded, 500 trials per world, z by RDP",
            ),
        ),
        Rule("near", 0.05, WHY_BERNAU_ADV),
        "the advantage stays near ρα (0.23)",
        "§6 (opening): an advantage equal to ρα with LS",
        lambda o: o.low is not None and o.low <= 0.23 <= o.high,
        floor=0.0,  # type: ignore[operator]
    ),
    Claim(
        "bernau-adv-gs-bounded",
        "Adv",
        (
            audit_value(
                IDENT,
                "setting=rb0.9_global-bounded/attack=di",
                "advantage_decision",
                "DI adversary's decision advantage",
                role="paper",
                setting="adult, ρβ = 0.9, GS, bounded, 500 trials per world, z by RDP",
            ),
        ),
        Rule("near", 0.05, WHY_BERNAU_ADV),
        floor=0.0,
    ),
    Claim(
        "bernau-adv-gs-unbounded",
        "Adv",
        (
            audit_value(
                IDENT,
                "setting=rb0.9_global-unbounded/attack=di",
                "advantage_decision",
                "DI adversary's decision advantage",
                role="paper",
                setting="adult, ρβ = 0.9, GS, unbounded, 500 trials per world, z by RDP",
            ),
        ),
        Rule("near", 0.05, WHY_BERNAU_ADV),
        floor=0.0,
    ),
    Claim(
        "bernau-rho-alpha",
        "ρα",
        (
            audit_value(
                IDENT,
                "setting=rb0.9_local-bounded",
                "rho_alpha_thm2",
                "closed form, Thm. 2",
                role="paper",
                setting="ρβ = 0.9, δ = 1/|D| = 0.001",
            ),
        ),
        Rule("near", 0.005, WHY_ROUNDING),
    ),
    *(
        Claim(
            f"bernau-rho-alpha-rb{tag}",
            "ρα",
            (
                closed_form(
                    closed_rho_alpha(rb),
                    "closed form, Thm. 2 (dpaudit's library)",
                    setting=f"ρβ = {rb:g}, δ = 0.001",
                    source=f"dpaudit.bounds.identifiability.rho_alpha_from_epsilon(ε(ρβ = {rb:g}), 0.001)",
                )
                if committed is None
                else audit_value(
                    IDENT,
                    f"setting=rb{committed}_local-bounded",
                    "rho_alpha_thm2",
                    "closed form, Thm. 2",
                    role="paper",
                    setting=f"ρβ = {committed}, δ = 0.001 (committed run)",
                ),
                *(
                    (
                        audit_value(
                            IDENT,
                            "setting=rb0.52_local-bounded",
                            "rho_alpha_thm2",
                            "closed form, Thm. 2",
                            role="also",
                            setting="ρβ = 0.52 (the committed run; the paper's MNIST column)",
                        ),
                    )
                    if committed is None
                    else ()
                ),
            ),
            Rule("near", 0.005, WHY_ROUNDING),
        )
        for tag, rb, committed in (("053", 0.53, None), ("075", 0.75, "0.75"), ("099", 0.99, "0.99"))
    ),
    *(
        Claim(
            f"bernau-epsilon-rb{tag}",
            "ε",
            (
                closed_form(
                    closed_epsilon(rb),
                    "Eq. 10, dpaudit's library",
                    setting=f"ρβ = {rb:g}",
                    source=f"dpaudit.training.accounting.epsilon_from_rho_beta({rb:g})",
                )
                if committed is None
                else audit_value(
                    IDENT,
                    f"setting=rb{committed}_local-bounded",
                    "epsilon_upper_rdp",
                    "the run's RDP ε, calibrated to ε(ρβ)",
                    role="paper",
                    setting=f"ρβ = {committed} (committed run)",
                ),
                *(
                    (
                        audit_value(
                            IDENT,
                            "setting=rb0.52_local-bounded",
                            "epsilon_upper_rdp",
                            "the run's RDP ε, calibrated to ε(ρβ)",
                            role="also",
                            setting="ρβ = 0.52 (the committed run; the paper's MNIST column)",
                        ),
                    )
                    if committed is None
                    else ()
                ),
            ),
            Rule(
                "near",
                tolerance,
                f"the paper prints ε to two significant digits: ±{tolerance:g} is the "
                "rounding of its last digit",
            ),
        )
        for tag, rb, committed, tolerance in (
            ("053", 0.53, None, 0.005),
            ("075", 0.75, "0.75", 0.05),
            ("09", 0.9, "0.9", 0.05),
            ("099", 0.99, "0.99", 0.05),
        )
    ),
    Claim(
        "bernau-delta-prime",
        "δ′",
        (
            audit_value(
                IDENT,
                "setting=rb0.9_local-bounded/attack=di",
                "delta_prime",
                "share of trials whose belief exceeds ρβ",
                role="paper",
                setting="adult, ρβ = 0.9, LS, bounded, 500 trials per world",
            ),
        ),
        Rule(
            "statement",
            0.0,
            WHY_DELTA,
            statement=lambda v: v <= DELTA_BERNAU,
            statement_text="δ′ ≤ δ = 0.001",
        ),
    ),
    *(
        Claim(
            f"bernau-delta-prime-{name}",
            "δ′",
            (
                audit_value(
                    IDENT,
                    f"setting=rb0.9_{group}/attack=di",
                    "delta_prime",
                    "share of trials whose belief exceeds ρβ",
                    role="paper",
                    setting=f"adult, ρβ = 0.9, {label}, 500 trials per world",
                ),
            ),
            Rule(
                "statement",
                0.0,
                WHY_DELTA,
                statement=lambda v: v <= DELTA_BERNAU,
                statement_text="δ′ ≤ δ = 0.001",
            ),
        )
        for name, group, label in (
            ("ls-unbounded", "local-unbounded", "LS, unbounded"),
            ("gs-bounded", "global-bounded", "GS, bounded"),
            ("gs-unbounded", "global-unbounded", "GS, unbounded"),
        )
    ),
    Claim(
        "bernau-candidates",
        "flag",
        (profile_value("bernau-candidates", "top_above_bottom", role="paper"),),
        Rule("flag", 0.0, WHY_FLAG),
    ),
    Claim(
        "bernau-ls-below-gs",
        "LS / GS",
        (computed(derived.bernau_ls_below_gs()),),
        Rule("statement", 0.0, WHY_STATEMENT, statement=lambda v: v < 1, statement_text="LS / GS < 1"),
        floor=0.0,
    ),
    Claim(
        "bernau-eps-ls-ideal",
        "|ε′/ε − 1|",
        (computed(derived.bernau_eps_ratio("local", deviation=True)),),
        Rule("near", 0.1, WHY_IDEAL),
    ),
    Claim(
        "bernau-gs-underestimates",
        "ε′_GS / ε",
        (computed(derived.bernau_eps_ratio("global", deviation=False)),),
        Rule(
            "statement",
            0.0,
            WHY_STATEMENT,
            statement=lambda v: v < 1,
            statement_text="ε′_GS / ε < 1 at every ρβ",
        ),
        floor=0.0,
    ),
    Claim(
        "bernau-di-beats-mi",
        "share of ρβ",
        (computed(derived.bernau_di_beats_mi()),),
        Rule("near", 0.0, "a share of four settings: any other count is another finding"),
    ),
)
