"""Privacy bounds: accountants' ε upper bounds, the scores auditor's ε lower bounds, identifiability
scores, ε estimates, Epsilon*.

Pure functions on numbers and arrays (no TensorFlow); dp_accounting is imported lazily by the
accountants that need it. Every stated confidence of a lower bound is its JOINT confidence.
"""

from dpaudit.bounds.accountants import (
    ACCOUNTANTS,
    all_epsilons,
    calibrate_noise_multiplier,
    compute_epsilon,
    epsilon_rdp_heterogeneous,
    gaussian_delta,
    gaussian_epsilon,
    rdp_epsilon_and_order,
)
from dpaudit.bounds.auditor import (
    ESTIMATORS,
    LowerBound,
    ScoresAudit,
    audit_scores,
    gdp_lower_bound,
    one_run_lower_bound,
)
from dpaudit.bounds.empirical import (
    THRESHOLD_METHODS,
    EpsilonLowerBound,
    ThresholdBound,
    advantage_from_epsilon,
    di_advantage_from_wins,
    epsilon_from_advantage,
    epsilon_from_di_advantage,
    epsilon_from_posterior_belief,
    epsilon_lower_from_counts,
    epsilon_lower_from_scores,
)
from dpaudit.bounds.epsilon_star import (
    EpsilonStar,
    default_delta,
    epsilon_star_empirical,
    epsilon_star_null,
    epsilon_star_parametric,
    epsilon_star_with_null,
    logit_loss,
)
from dpaudit.bounds.identifiability import (
    epsilon_from_rho_alpha,
    epsilon_from_rho_beta,
    rho_alpha_from_epsilon,
    rho_alpha_from_rdp,
    rho_beta_from_epsilon,
)
from dpaudit.bounds.onerun import OneRunAudit, audit_one_run, one_run_ceiling
from dpaudit.bounds.stepwise import StepMoments, StepwiseBound, stepwise_family_bound
from dpaudit.bounds.tradeoff import SubsampledGaussian, gdp_epsilon, gdp_mu_lower

__all__ = [
    "ACCOUNTANTS",
    "ESTIMATORS",
    "LowerBound",
    "OneRunAudit",
    "ScoresAudit",
    "StepMoments",
    "StepwiseBound",
    "SubsampledGaussian",
    "audit_one_run",
    "audit_scores",
    "epsilon_star_null",
    "epsilon_star_with_null",
    "gdp_epsilon",
    "gdp_lower_bound",
    "gdp_mu_lower",
    "one_run_ceiling",
    "one_run_lower_bound",
    "stepwise_family_bound",
    "THRESHOLD_METHODS",
    "EpsilonLowerBound",
    "EpsilonStar",
    "ThresholdBound",
    "advantage_from_epsilon",
    "all_epsilons",
    "calibrate_noise_multiplier",
    "compute_epsilon",
    "default_delta",
    "di_advantage_from_wins",
    "epsilon_from_advantage",
    "epsilon_from_di_advantage",
    "epsilon_from_posterior_belief",
    "epsilon_from_rho_alpha",
    "epsilon_from_rho_beta",
    "epsilon_lower_from_counts",
    "epsilon_lower_from_scores",
    "epsilon_rdp_heterogeneous",
    "epsilon_star_empirical",
    "epsilon_star_parametric",
    "gaussian_delta",
    "gaussian_epsilon",
    "logit_loss",
    "rdp_epsilon_and_order",
    "rho_alpha_from_epsilon",
    "rho_alpha_from_rdp",
    "rho_beta_from_epsilon",
]
