"""DP-SGD's privacy accounting: ε of (z, q, T) under each accountant, and the noise calibration.

What a train stage needs to choose its noise and record its δ (so that editing a report-side
bound never retrains): DP-SGD with noise multiplier z (noise std / clipping norm), Poisson sampling
rate q (q = 1 is full batch: every step sees every record) and T steps is the T-fold composition of
the subsampled Gaussian mechanism. Neighbouring datasets differ by adding or removing one record,
as in TF Privacy's ``compute_dp_sgd_privacy_statement``.

* ``rdp``: ``dp_accounting.rdp.RdpAccountant`` with its default orders (Mironov 2017; Mironov,
  Talwar & Zhang 2019 for the sampled Gaussian) — exactly the events and orders TF Privacy uses.
* ``pld``: ``dp_accounting.pld.PLDAccountant`` (privacy loss distributions, Koskela et al. 2020;
  Doroshenko et al. 2022), usually the tightest, with an adaptive discretisation
  (:func:`epsilon_pld`) and at most :data:`PLD_MAX_STEPS` steps.
* ``naive`` / ``advanced``: hand-written here (no library ships them for the subsampled Gaussian);
  see :func:`per_step_epsilon`, :func:`epsilon_naive`, :func:`epsilon_advanced`.

For q = 1 the Poisson event is replaced by the plain Gaussian event, which is what full-batch
training is and avoids dp_accounting's special-casing of sampling probability 1. A leaf module
(numpy, scipy, dp_accounting only): :mod:`dpaudit.bounds.accountants` re-exports it and adds the
report side (every accountant's ε of a recorded ``DpEvent``, heterogeneous steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import log_ndtr, ndtr

__all__ = [
    "ACCOUNTANTS",
    "PLD_DISCRETIZATION",
    "PLD_MAX_STEPS",
    "PLD_MIN_DISCRETIZATION",
    "PLD_OPTIMISTIC_RTOL",
    "PLD_RTOL",
    "amplify_by_subsampling",
    "calibrate_noise_multiplier",
    "check_pld_steps",
    "compute_epsilon",
    "default_delta",
    "epsilon_advanced",
    "epsilon_from_rho_beta",
    "epsilon_naive",
    "epsilon_pld",
    "epsilon_rdp",
    "gaussian_delta",
    "gaussian_epsilon",
    "per_step_epsilon",
    "rdp_epsilon_and_order",
]

ACCOUNTANTS = ("rdp", "pld", "naive", "advanced")

# PLD discretisation of privacy-loss values: :func:`epsilon_pld` starts at PLD_DISCRETIZATION and divides
# it by √10 until two successive grids agree within PLD_RTOL (relative), down to PLD_MIN_DISCRETIZATION.
# A fixed 1e-3 grid was +3.8 % at (z, q, T) = (64, 0.1, 100) and 2.5× at (136.67, 0.02, 5000): strong
# noise gives a small ε, and the grid's error is additive per step. dp_accounting's default (1e-4) is
# itself 4 % high at (136.67, 0.02, 5000) (0.02948 against 0.02828 converged at 1e-6).
PLD_DISCRETIZATION = 1e-3
PLD_RTOL = 5e-4
PLD_MIN_DISCRETIZATION = 1e-7
# The optimistic estimate (``pessimistic=False``) rounds every step's privacy loss down, so it is about
# T·grid/2 below ε: at strong noise the 1e-3 and 1e-4 grids give 0 (z = 30, q = 0.01, T = 1000: ε =
# 0.0289), and two zeros "agree". It is refined instead until it lies within PLD_OPTIMISTIC_RTOL
# (relative) of the pessimistic estimate, which brackets ε from above (:func:`_optimistic_pld_epsilon`).
PLD_OPTIMISTIC_RTOL = 1e-2
# PLD composition holds the composed loss distribution in memory; its support grows with T, and at
# 10^12 steps it needed a 226 GiB array. Compositions beyond this many steps are refused (use ``rdp``).
PLD_MAX_STEPS = 10_000_000


# ----------------------------------------------------------------------------------------------- checks


def default_delta(n_members: int) -> float:
    """δ = 1/(n ln n) for n training records, the choice of Negoescu et al. §4 (δ ≪ 1/n);
    the δ a train stage records when none is set (so it lives with the accountants, not Epsilon*)."""
    if isinstance(n_members, bool) or int(n_members) != n_members or n_members < 2:
        raise ValueError(f"n_members must be an integer >= 2, got {n_members!r}")
    return 1.0 / (n_members * math.log(n_members))


def _check_args(
    noise_multiplier: float, sampling_rate: float, steps: int, delta: float
) -> tuple[float, float, int, float]:
    z, q, d = float(noise_multiplier), float(sampling_rate), float(delta)
    if not (math.isfinite(z) and z > 0):
        raise ValueError(f"noise_multiplier must be a finite number > 0, got {noise_multiplier!r}")
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sampling_rate must lie in (0, 1], got {sampling_rate!r}")
    if isinstance(steps, bool) or int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    if not 0.0 < d < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    return z, q, int(steps), d


def _check_accountant(accountant: str) -> str:
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    return accountant


# ------------------------------------------------------------------------------------- dp_accounting


def _step_event(noise_multiplier: float, sampling_rate: float):
    import dp_accounting

    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier)
    if sampling_rate >= 1.0:
        return gaussian
    return dp_accounting.PoissonSampledDpEvent(sampling_probability=sampling_rate, event=gaussian)


def _dpsgd_event(noise_multiplier: float, sampling_rate: float, steps: int):
    import dp_accounting

    return dp_accounting.SelfComposedDpEvent(_step_event(noise_multiplier, sampling_rate), steps)


def epsilon_rdp(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    """ε of DP-SGD under RDP composition (``dp_accounting.rdp.RdpAccountant``, default orders).

    Same event and orders as TF Privacy's ``compute_dp_sgd_privacy_statement`` (without its
    microbatching factor), so the numbers agree with it.
    """
    return rdp_epsilon_and_order(noise_multiplier, sampling_rate, steps, delta)[0]


def rdp_epsilon_and_order(
    noise_multiplier: float, sampling_rate: float, steps: int, delta: float
) -> tuple[float, float]:
    """(ε, optimal RDP order α) of DP-SGD; the order feeds Bernau's ρα from RDP (§4.4)."""
    import dp_accounting

    z, q, steps, delta = _check_args(noise_multiplier, sampling_rate, steps, delta)
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(_dpsgd_event(z, q, steps))
    epsilon, order = accountant.get_epsilon_and_optimal_order(delta)
    return float(epsilon), float(order)


def check_pld_steps(steps: int) -> None:
    """Refuse PLD compositions of more than :data:`PLD_MAX_STEPS` steps (memory grows with T)."""
    if steps > PLD_MAX_STEPS:
        raise ValueError(
            f"steps={steps} exceeds the PLD accountant's limit of {PLD_MAX_STEPS} steps (the composed "
            "privacy loss distribution would not fit in memory); use the 'rdp' accountant"
        )


def _pld_epsilon_at(
    z: float, q: float, steps: int, delta: float, interval: float, pessimistic: bool
) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pld = pld_lib.from_gaussian_mechanism(
        z,
        sampling_prob=q,
        value_discretization_interval=interval,
        pessimistic_estimate=pessimistic,
        use_connect_dots=pessimistic,  # connect-the-dots is pessimistic only
    ).self_compose(steps)
    return max(0.0, float(pld.get_epsilon_for_delta(delta)))


def _optimistic_pld_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    """dp_accounting's optimistic PLD ε (a lower bound on the true ε at any grid), on a grid fine
    enough that it lies within :data:`PLD_OPTIMISTIC_RTOL` of the pessimistic (connect-the-dots) ε.

    The two bracket ε, so their gap bounds the error of the value returned. The optimistic value is
    about T·grid/2 below ε (each step's loss is rounded down), so from the bracket's upper end u the
    next grid is 1.8·rtol·u/T (at most √10 and at least 100 times finer than the last); the
    pessimistic value, accurate already on coarse grids, is computed only while the bracket is open.
    If the pessimistic ε is 0, so is ε. At :data:`PLD_MIN_DISCRETIZATION` the optimistic value is
    returned as it stands (still a lower bound).
    """
    interval, upper = PLD_DISCRETIZATION, math.inf
    while True:
        lower = _pld_epsilon_at(z, q, steps, delta, interval, pessimistic=False)
        if lower > 0 and lower >= (1.0 - PLD_OPTIMISTIC_RTOL) * upper:
            return lower
        upper = min(upper, _pld_epsilon_at(z, q, steps, delta, interval, pessimistic=True))
        if upper <= 0.0:
            return 0.0
        if lower >= (1.0 - PLD_OPTIMISTIC_RTOL) * upper or interval <= PLD_MIN_DISCRETIZATION:
            return lower
        aim = 1.8 * PLD_OPTIMISTIC_RTOL * upper / steps
        interval = max(PLD_MIN_DISCRETIZATION, interval / 100.0, min(interval / math.sqrt(10.0), aim))


def epsilon_pld(
    noise_multiplier: float, sampling_rate: float, steps: int, delta: float, pessimistic: bool = True
) -> float:
    """ε of DP-SGD from privacy loss distributions (dp_accounting's PLD), adaptively discretised.

    With ``pessimistic=True`` (default) it is dp_accounting's upper bound — what ``PLDAccountant``
    computes: the privacy-loss grid starts at :data:`PLD_DISCRETIZATION` and is refined by √10 until
    two successive grids agree within :data:`PLD_RTOL` (0.05 %); the finer value is returned. It
    agrees with ``PLDAccountant()`` (default grid 1e-4) within 0.1 % where that grid has converged,
    and is below it where it has not (strong noise); see ``tests/bounds/test_accountants.py``.

    ``pessimistic=False`` gives dp_accounting's optimistic estimate, a lower bound on the true ε (for
    ε of an audit's lower-bounding mechanism), within :data:`PLD_OPTIMISTIC_RTOL` (1 %) of the
    pessimistic one where the finest grid allows (:func:`_optimistic_pld_epsilon`): 0.02866 at
    (z, q, T, δ) = (30, 0.01, 1000, 1e-5), where ε = 0.02892, in 0.5–0.6 s on a loaded 2-core machine. (The
    earlier criterion, two successive grids within 0.05 %, accepted two zeros there, and took seconds
    a call at q = 0.1, T = 100 and minutes at T = 1000 where it did converge.)
    """
    z, q, steps, delta = _check_args(noise_multiplier, sampling_rate, steps, delta)
    check_pld_steps(steps)
    if not pessimistic:
        return _optimistic_pld_epsilon(z, q, steps, delta)
    interval = PLD_DISCRETIZATION
    previous = _pld_epsilon_at(z, q, steps, delta, interval, pessimistic)
    while interval > PLD_MIN_DISCRETIZATION:
        interval /= math.sqrt(10.0)
        current = _pld_epsilon_at(z, q, steps, delta, interval, pessimistic)
        if abs(current - previous) <= PLD_RTOL * max(abs(current), 1e-12):
            return current
        previous = current
    return previous


# ---------------------------------------------------------------------- Gaussian mechanism, exactly


def gaussian_delta(epsilon: float, mu: float) -> float:
    """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) of a Gaussian mechanism with sensitivity/σ = μ.

    Exact privacy curve of the Gaussian mechanism — Balle & Wang 2018 (analytic Gaussian
    mechanism, Thm. 8); equivalently μ-GDP (Dong, Roth & Su 2022, Cor. 2.13).
    """
    if mu <= 0:
        return 0.0
    a = -epsilon / mu
    # Φ and log Φ are scipy.special's ndtr and log_ndtr, what scipy.stats.norm calls for the standard
    # normal (the same bits), without its per-call argument handling: root finders call this
    # function tens of thousands of times. e^ε Φ(x) is evaluated in log space so large ε does not
    # overflow.
    log_cdf = float(log_ndtr(a - mu / 2.0))
    second = 0.0 if log_cdf == -math.inf else math.exp(epsilon + log_cdf)
    return max(0.0, float(ndtr(a + mu / 2.0)) - second)


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ε with δ(ε) ≤ δ for the Gaussian mechanism with sensitivity/σ = μ (Balle & Wang 2018).

    Solved by root finding on the monotone curve of :func:`gaussian_delta`.
    """
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    if not (math.isfinite(mu) and mu >= 0):
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    if gaussian_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu)
    while gaussian_delta(hi, mu) > delta:
        hi *= 2.0
    return float(brentq(lambda e: gaussian_delta(e, mu) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def amplify_by_subsampling(epsilon: float, delta: float, sampling_rate: float) -> tuple[float, float]:
    """(log(1 + q(e^ε − 1)), qδ): an (ε, δ)-DP step run on a Poisson sample with rate q.

    Amplification by subsampling for add/remove neighbours — Balle, Barthe & Gaboardi 2018
    (Poisson sampling); first shown by Li, Qardaji & Su 2012.
    """
    if sampling_rate >= 1.0:
        return epsilon, delta
    # log(1 + q(e^ε − 1)) = ε + log(q + (1 − q)e^{−ε}): the same value, without overflow at large ε.
    amplified = epsilon + math.log(sampling_rate + (1.0 - sampling_rate) * math.exp(-epsilon))
    return amplified, sampling_rate * delta


def per_step_epsilon(noise_multiplier: float, sampling_rate: float, step_delta: float) -> tuple[float, float]:
    """(ε', δ') of one DP-SGD step whose Gaussian part is run at δ0 = ``step_delta``.

    The Gaussian step with σ = z·C and sensitivity C is (ε0, δ0)-DP with ε0 from the exact analytic
    Gaussian curve (:func:`gaussian_epsilon` with μ = 1/z; Balle & Wang 2018) — tighter than the
    classic σ = √(2 ln(1.25/δ0))/ε0 calibration, which also needs ε0 < 1. Subsampling then
    amplifies it (:func:`amplify_by_subsampling`): ε' = log(1 + q(e^{ε0} − 1)), δ' = qδ0.
    """
    epsilon0 = gaussian_epsilon(1.0 / noise_multiplier, step_delta)
    return amplify_by_subsampling(epsilon0, step_delta, sampling_rate)


def epsilon_naive(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    """ε of DP-SGD by basic (naive) composition: T steps of (ε', δ') give (Tε', Tδ')-DP.

    Dwork et al. 2006; Dwork & Roth 2014, Thm. 3.16. The whole δ goes to the steps: δ' = δ/T, i.e.
    δ0 = δ/(Tq) before amplification (capped below 1), with (ε', δ') from :func:`per_step_epsilon`.
    """
    z, q, steps, delta = _check_args(noise_multiplier, sampling_rate, steps, delta)
    step_delta = min(delta / (steps * q), 1.0 - 1e-12)
    epsilon_step, _ = per_step_epsilon(z, q, step_delta)
    return steps * epsilon_step


def _advanced_total(epsilon_step: float, steps: int, slack: float) -> float:
    """ε = √(2T ln(1/δ̃))·ε' + Tε'(e^{ε'} − 1) — Dwork, Rothblum & Vadhan 2010, Thm. III.3."""
    if epsilon_step > 700.0:  # e^{ε'} overflows a float: the bound is vacuous anyway
        return math.inf
    return math.sqrt(2.0 * steps * math.log(1.0 / slack)) * epsilon_step + steps * epsilon_step * math.expm1(
        epsilon_step
    )


def epsilon_advanced(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    """ε of DP-SGD by the advanced composition theorem (Dwork, Rothblum & Vadhan 2010, Thm. III.3).

    T steps of (ε', δ')-DP are (√(2T ln(1/δ̃))ε' + Tε'(e^{ε'} − 1), Tδ' + δ̃)-DP for any δ̃ > 0
    (Dwork & Roth 2014, Thm. 3.20). The total δ is split as δ̃ = fδ and Tδ' = (1 − f)δ; the
    fraction f is optimised numerically (bounded search over log f), because the best split moves
    with z, q and T. (ε', δ') per step as in :func:`per_step_epsilon`.
    """
    z, q, steps, delta = _check_args(noise_multiplier, sampling_rate, steps, delta)

    def total(log_fraction: float) -> float:
        fraction = math.exp(log_fraction)
        slack = fraction * delta
        step_delta = min((1.0 - fraction) * delta / (steps * q), 1.0 - 1e-12)
        epsilon_step, _ = per_step_epsilon(z, q, step_delta)
        return _advanced_total(epsilon_step, steps, slack)

    grid = np.log(np.linspace(1e-3, 1.0 - 1e-3, 25))
    values = [total(g) for g in grid]
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    result = minimize_scalar(total, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return float(min(result.fun, values[i]))


# ------------------------------------------------------------------------------------------ public API

_DISPATCH: dict[str, Callable[[float, float, int, float], float]] = {
    "rdp": epsilon_rdp,
    "pld": epsilon_pld,
    "naive": epsilon_naive,
    "advanced": epsilon_advanced,
}


def compute_epsilon(
    noise_multiplier: float, sampling_rate: float, steps: int, delta: float, accountant: str = "rdp"
) -> float:
    """ε of DP-SGD (z, q, T) at δ under the named accountant (one of :data:`ACCOUNTANTS`)."""
    return _DISPATCH[_check_accountant(accountant)](noise_multiplier, sampling_rate, steps, delta)


def calibrate_noise_multiplier(
    target_epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    accountant: str = "rdp",
    rtol: float = 1e-5,
    max_noise: float = 1e4,
) -> float:
    """Smallest noise multiplier (to relative precision ``rtol``) whose ε meets ``target_epsilon``.

    ε is decreasing in z under every accountant: bracket the root by doubling/halving z, solve
    ε(z) = target on log z with Brent's method (scipy.optimize.brentq), then step z up by ``rtol``
    until ε(z) ≤ target, so the returned multiplier is always safe to train with.
    """
    _check_accountant(accountant)
    if accountant == "pld":
        check_pld_steps(int(steps))
    target = float(target_epsilon)
    if not (math.isfinite(target) and target > 0):
        raise ValueError(f"target_epsilon must be a finite number > 0, got {target_epsilon!r}")
    _check_args(1.0, sampling_rate, steps, delta)

    def gap(log_z: float) -> float:
        return compute_epsilon(math.exp(log_z), sampling_rate, steps, delta, accountant) - target

    hi = 1.0
    while gap(math.log(hi)) > 0:
        if hi >= max_noise:
            raise ValueError(
                f"target_epsilon={target} needs noise_multiplier > {max_noise} under '{accountant}'"
            )
        hi = min(hi * 2.0, max_noise)
    lo = hi / 2.0
    while gap(math.log(lo)) <= 0:
        hi, lo = lo, lo / 2.0
        if lo < 1e-4:
            return hi
    z = math.exp(brentq(gap, math.log(lo), math.log(hi), xtol=rtol / 4, rtol=1e-12))
    while gap(math.log(z)) > 0:
        z *= 1.0 + rtol / 4
    return z


# ------------------------------------------------------------------------------ identifiability budget


def epsilon_from_rho_beta(rho_beta: float) -> float:
    """ε = ln(ρβ / (1 − ρβ)), the budget that caps the posterior belief at ρβ — Bernau et al. Eq. 10.

    The budget an identifiability audit trains at (re-exported by
    :mod:`dpaudit.bounds.identifiability` with the other scores).

    ρβ must lie in [0.5, 1): a belief bound below the prior 0.5 is unattainable and 1 needs ε = ∞.
    """
    rho_beta = float(rho_beta)
    if not 0.5 <= rho_beta < 1.0:
        raise ValueError(f"rho_beta must lie in [0.5, 1), got {rho_beta!r}")
    return math.log(rho_beta / (1.0 - rho_beta))
