"""Identifiability scores of Bernau et al. (posterior belief ρβ and expected membership advantage ρα).

ρβ bounds the posterior belief of the differential-identifiability adversary that must tell two
neighbouring datasets apart (Thm. 1 and its inverse, Eq. 10); ρα bounds that adversary's expected
advantage against the Gaussian mechanism (Thm. 2 and its inverse, Eq. 15) and, under RDP
composition, in terms of an (α, ε_RDP) guarantee (§4.4). All functions are closed forms on
floats; inputs out of range raise ``ValueError`` naming the argument.
"""

from __future__ import annotations

import math

from scipy.stats import norm

from dpaudit.training.accounting import epsilon_from_rho_beta

__all__ = [
    "epsilon_from_rho_alpha",
    "epsilon_from_rho_beta",
    "rho_alpha_from_epsilon",
    "rho_alpha_from_rdp",
    "rho_beta_from_epsilon",
]


def _check_epsilon(epsilon: float) -> float:
    epsilon = float(epsilon)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    return epsilon


def _check_delta(delta: float) -> float:
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    return delta


def _gaussian_scale(delta: float) -> float:
    """√(2 ln(1.25/δ)): the classic Gaussian-mechanism factor σ·ε/Δf (Dwork & Roth Thm. A.1, Bernau Eq. 1)."""
    return math.sqrt(2.0 * math.log(1.25 / delta))


def rho_beta_from_epsilon(epsilon: float) -> float:
    """Maximum posterior belief ρβ = 1 / (1 + e^{−ε}) — Bernau et al. Thm. 1."""
    epsilon = _check_epsilon(epsilon)
    return 1.0 / (1.0 + math.exp(-epsilon))


def rho_alpha_from_epsilon(epsilon: float, delta: float) -> float:
    """Expected membership advantage bound ρα = 2Φ(ε / (2√(2 ln(1.25/δ)))) − 1 — Bernau et al. Thm. 2.

    Holds for the Gaussian mechanism calibrated with the classic σ = Δf·√(2 ln(1.25/δ))/ε.
    """
    epsilon = _check_epsilon(epsilon)
    delta = _check_delta(delta)
    return float(2.0 * norm.cdf(epsilon / (2.0 * _gaussian_scale(delta))) - 1.0)


def epsilon_from_rho_alpha(rho_alpha: float, delta: float) -> float:
    """ε = 2√(2 ln(1.25/δ)) · Φ^{-1}((ρα + 1)/2), the inverse of Thm. 2 — Bernau et al. Eq. 15.

    Eq. 15 as printed omits the leading factor 2; solving Thm. 2 for ε needs it (and the paper's
    parameter table, e.g. ρα = 0.23 ↔ ε = 2.2 at δ = 1e-3, agrees with Thm. 2), so it is kept here.
    """
    rho_alpha = float(rho_alpha)
    if not 0.0 <= rho_alpha < 1.0:
        raise ValueError(f"rho_alpha must lie in [0, 1), got {rho_alpha!r}")
    delta = _check_delta(delta)
    return float(2.0 * _gaussian_scale(delta) * norm.ppf((rho_alpha + 1.0) / 2.0))


def rho_alpha_from_rdp(rdp_epsilon: float, order: float) -> float:
    """ρα = 2Φ(√(ε_RDP / (2α))) − 1 for a Gaussian mechanism with an (α, ε_RDP)-RDP guarantee.

    Bernau et al. §4.4: under RDP composition k Gaussian steps act as one k-dimensional Gaussian, so
    the bound depends only on the composed ε_RDP and the order α (the ratio ε_RDP/α = Δf²/(2σ²)).
    """
    rdp_epsilon = float(rdp_epsilon)
    order = float(order)
    if not (math.isfinite(rdp_epsilon) and rdp_epsilon >= 0):
        raise ValueError(f"rdp_epsilon must be a finite number >= 0, got {rdp_epsilon!r}")
    if not (math.isfinite(order) and order > 1.0):
        raise ValueError(f"order must be a finite number > 1, got {order!r}")
    return float(2.0 * norm.cdf(math.sqrt(rdp_epsilon / (2.0 * order))) - 1.0)
