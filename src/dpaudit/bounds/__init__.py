"""Privacy bounds: accountants' ε upper bounds, the scores auditor's ε lower bounds, identifiability
scores, ε estimates, Epsilon*.

Pure functions on numbers and arrays (no TensorFlow); dp_accounting is imported lazily by the
accountants that need it. Every stated confidence of a lower bound is its JOINT confidence.

Every name below is importable from ``dpaudit.bounds`` and is loaded from its module on first use
(:data:`_LAZY`): importing one module of the package (``dpaudit.bounds.accountants``) loads no other,
so a stage depends only on the bound modules it runs.
"""

from __future__ import annotations

from dpaudit.lazy import lazy_exports

#: Where each public name lives (read by :mod:`dpaudit.deps` too, to follow these imports).
_LAZY: dict[str, str] = {
    "ACCOUNTANTS": "dpaudit.training.accounting",
    "all_epsilons": "dpaudit.bounds.accountants",
    "calibrate_noise_multiplier": "dpaudit.training.accounting",
    "compute_epsilon": "dpaudit.training.accounting",
    "epsilon_rdp_heterogeneous": "dpaudit.bounds.accountants",
    "gaussian_delta": "dpaudit.training.accounting",
    "gaussian_epsilon": "dpaudit.training.accounting",
    "rdp_epsilon_and_order": "dpaudit.training.accounting",
    "ESTIMATORS": "dpaudit.bounds.auditor",
    "LowerBound": "dpaudit.bounds.auditor",
    "ScoresAudit": "dpaudit.bounds.auditor",
    "audit_scores": "dpaudit.bounds.auditor",
    "gdp_lower_bound": "dpaudit.bounds.auditor",
    "one_run_lower_bound": "dpaudit.bounds.steinke",
    "EpsilonLowerBound": "dpaudit.bounds.empirical",
    "THRESHOLD_METHODS": "dpaudit.bounds.empirical",
    "ThresholdBound": "dpaudit.bounds.empirical",
    "advantage_from_epsilon": "dpaudit.bounds.empirical",
    "di_advantage_from_wins": "dpaudit.bounds.empirical",
    "epsilon_from_advantage": "dpaudit.bounds.empirical",
    "epsilon_from_di_advantage": "dpaudit.bounds.empirical",
    "epsilon_from_posterior_belief": "dpaudit.bounds.empirical",
    "epsilon_lower_from_counts": "dpaudit.bounds.empirical",
    "epsilon_lower_from_scores": "dpaudit.bounds.empirical",
    "EpsilonStar": "dpaudit.bounds.epsilon_star",
    "default_delta": "dpaudit.training.accounting",
    "epsilon_star_empirical": "dpaudit.bounds.epsilon_star",
    "epsilon_star_null": "dpaudit.bounds.epsilon_star",
    "epsilon_star_parametric": "dpaudit.bounds.epsilon_star",
    "epsilon_star_with_null": "dpaudit.bounds.epsilon_star",
    "logit_loss": "dpaudit.bounds.epsilon_star",
    "epsilon_from_rho_alpha": "dpaudit.bounds.identifiability",
    "epsilon_from_rho_beta": "dpaudit.training.accounting",
    "rho_alpha_from_epsilon": "dpaudit.bounds.identifiability",
    "rho_alpha_from_rdp": "dpaudit.bounds.identifiability",
    "rho_beta_from_epsilon": "dpaudit.bounds.identifiability",
    "OneRunAudit": "dpaudit.bounds.onerun",
    "audit_one_run": "dpaudit.bounds.onerun",
    "one_run_ceiling": "dpaudit.bounds.onerun",
    "StepMoments": "dpaudit.scores",
    "StepwiseBound": "dpaudit.bounds.stepwise",
    "stepwise_family_bound": "dpaudit.bounds.stepwise",
    "SubsampledGaussian": "dpaudit.bounds.tradeoff",
    "gdp_epsilon": "dpaudit.bounds.tradeoff",
    "gdp_mu_lower": "dpaudit.bounds.tradeoff",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
