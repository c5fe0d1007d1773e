"""Upper bounds on ε for DP-SGD: RDP, PLD, naive and advanced composition, calibration.

The per-(z, q, T) accountants and the noise calibration live in :mod:`dpaudit.training.accounting`
(a train stage runs them; see its docstring for the accountants and their sources) and are
re-exported here. This module adds the report side: every accountant's ε of a recorded
``DpEvent`` (:func:`epsilons_for_event`) and of steps with different noise
(:func:`epsilon_rdp_heterogeneous`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from dpaudit.training.accounting import (
    ACCOUNTANTS,
    PLD_DISCRETIZATION,
    PLD_MAX_STEPS,
    PLD_MIN_DISCRETIZATION,
    PLD_OPTIMISTIC_RTOL,
    PLD_RTOL,
    _check_args,
    _step_event,
    amplify_by_subsampling,
    calibrate_noise_multiplier,
    check_pld_steps,
    compute_epsilon,
    default_delta,
    epsilon_advanced,
    epsilon_naive,
    epsilon_pld,
    epsilon_rdp,
    gaussian_delta,
    gaussian_epsilon,
    per_step_epsilon,
    rdp_epsilon_and_order,
)

__all__ = [
    "ACCOUNTANTS",
    "PLD_DISCRETIZATION",
    "PLD_MAX_STEPS",
    "PLD_MIN_DISCRETIZATION",
    "PLD_OPTIMISTIC_RTOL",
    "PLD_RTOL",
    "all_epsilons",
    "amplify_by_subsampling",
    "calibrate_noise_multiplier",
    "check_pld_steps",
    "compute_epsilon",
    "default_delta",
    "epsilon_advanced",
    "epsilon_naive",
    "epsilon_pld",
    "epsilon_rdp",
    "epsilon_rdp_heterogeneous",
    "epsilons_for_event",
    "gaussian_delta",
    "gaussian_epsilon",
    "per_step_epsilon",
    "rdp_epsilon_and_order",
]


# ------------------------------------------------------------------------------------- report side


def epsilon_rdp_heterogeneous(
    noise_multipliers: Sequence[float],
    delta: float,
    sampling_rate: float = 1.0,
    relative_resolution: float = 0.0,
) -> float:
    """ε under RDP for steps with different noise multipliers σ_1, …, σ_k (one step each).

    RDP adds up per order across steps (Mironov 2017, Prop. 1), so composing one Gaussian event per
    step in an ``RdpAccountant`` is exact. Used for Bernau et al. §5.3 (i): σ_i = 2C/LS_i · σ turns
    local sensitivities into an empirical ε′. An infinite σ_i (zero local sensitivity) releases
    nothing and is skipped.

    Full batch (q = 1): a Gaussian's RDP is α/(2σ²), so the k steps are composed as the single
    Gaussian event with σ = (Σ σ_i^{-2})^{-1/2} — the same RDP curve, computed at once. With q < 1
    each distinct σ_i is one Poisson-sampled event (about 0.1 s each); ``relative_resolution`` > 0
    rounds every σ_i DOWN to a geometric grid of that relative spacing first (more noise is never
    assumed, so ε can only grow), which bounds the number of distinct events.
    """
    import dp_accounting

    values = np.asarray(noise_multipliers, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("noise_multipliers is empty")
    if np.any(np.isnan(values)) or np.any(values <= 0):
        raise ValueError("noise_multipliers must all be > 0 (inf allowed for steps that leak nothing)")
    if not 0.0 <= relative_resolution < 1.0:
        raise ValueError(f"relative_resolution must lie in [0, 1), got {relative_resolution!r}")
    _check_args(1.0, sampling_rate, 1, delta)
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0
    q = float(sampling_rate)
    if q >= 1.0:
        event = dp_accounting.GaussianDpEvent(float(np.sum(finite**-2.0) ** -0.5))
    else:
        if relative_resolution > 0:
            step = math.log1p(relative_resolution)
            finite = np.exp(np.floor(np.log(finite) / step) * step)
        event = dp_accounting.ComposedDpEvent(
            [
                dp_accounting.SelfComposedDpEvent(_step_event(sigma, q), count)
                for sigma, count in sorted(Counter(finite.tolist()).items())
            ]
        )
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(event)
    return float(accountant.get_epsilon(float(delta)))


def all_epsilons(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> dict[str, float]:
    """ε under every accountant, keyed by :data:`ACCOUNTANTS` (Erlingsson et al. Table 1's columns)."""
    return {
        name: compute_epsilon(noise_multiplier, sampling_rate, steps, delta, name) for name in ACCOUNTANTS
    }


def epsilons_for_event(event: object, delta: float) -> dict[str, float]:
    """ε at δ under every accountant (rdp, pld, naive, advanced) for a dp_accounting ``DpEvent``.

    Mechanisms are data (DESIGN.md): a trained audit records its mechanism as an event, and this
    one function turns it into every accountant's ε (Erlingsson et al. Table 1's columns; RDP and
    PLD as dp_accounting computes them, naive and advanced composition per Abadi et al. §3.1 and
    Kairouz et al. Thm. 3.4). Supported: DP-SGD, i.e. ``SelfComposedDpEvent`` of a Gaussian or of a
    ``PoissonSampledDpEvent`` of a Gaussian (a bare Gaussian or Poisson-sampled Gaussian is one
    step), ``NoOpDpEvent`` (ε = 0) and ``NonPrivateDpEvent`` (ε = ∞). Other events raise
    ``ValueError`` naming the type.
    """
    import dp_accounting

    if isinstance(event, dp_accounting.NonPrivateDpEvent):
        return {name: math.inf for name in ACCOUNTANTS}
    if isinstance(event, dp_accounting.NoOpDpEvent):
        return {name: 0.0 for name in ACCOUNTANTS}
    steps, step = 1, event
    if isinstance(event, dp_accounting.SelfComposedDpEvent):
        steps, step = int(event.count), event.event
    sampling_rate = 1.0
    if isinstance(step, dp_accounting.PoissonSampledDpEvent):
        sampling_rate, step = float(step.sampling_probability), step.event
    if not isinstance(step, dp_accounting.GaussianDpEvent):
        raise ValueError(f"epsilons_for_event: unsupported event {type(event).__name__} ({event!r})")
    return all_epsilons(float(step.noise_multiplier), sampling_rate, steps, delta)
