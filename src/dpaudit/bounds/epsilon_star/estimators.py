"""Epsilon*'s two estimators (Negoescu et al.): the empirical sweep over every distinct loss and the
parametric one (App. B), with the band rules of ``variant`` (see :mod:`dpaudit.bounds.epsilon_star`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logit
from scipy.stats import kstest, norm

from dpaudit.bounds.accountants import default_delta

EMPIRICAL_RATE_FLOOR = 0.001
VARIANTS = ("band", "floor")
#: Label permutations behind every null level: with 100 the critical value is the 96th smallest (a
#: false-alarm probability of 5/101), and the vectorised permutations cost 10–200 ms for n = 200–5000.
NULL_PERMUTATIONS = 100
NULL_QUANTILE = 0.95


@dataclass(frozen=True)
class EpsilonStar:
    """Epsilon* of one model with the threshold and rates where the maximum is attained."""

    epsilon_star: float
    delta: float
    method: str  # "empirical" | "parametric"
    ks_pvalue: float  # parametric: min of the two groups' KS p-values of the normal fit; else nan
    threshold: float  # loss threshold τ attaining the maximum (nan when ε* = 0 everywhere)
    fpr: float = float("nan")  # t at the maximum
    fnr: float = float("nan")  # η at the maximum
    n_members: int = 0
    n_nonmembers: int = 0
    ks_pvalue_members: float = float("nan")
    ks_pvalue_nonmembers: float = float("nan")
    variant: str = "band"  # "band" (App. B, drop out-of-band thresholds) | "floor" (floored denominators)
    # Filled by epsilon_star_with_null (nan/False otherwise):
    null_mean: float = float("nan")  # mean Epsilon* over label permutations of the pooled losses
    null_high: float = float("nan")  # their ``null_quantile`` quantile
    null_pvalue: float = float("nan")  # (1 + #{permutation value >= epsilon_star}) / (1 + permutations)
    above_null: bool = False  # epsilon_star > null_high
    null_quantile: float = float("nan")
    null_permutations: int = 0
    spread_low: float = float("nan")  # percentile bootstrap spread (NOT a confidence interval)
    spread_high: float = float("nan")
    spread_level: float = float("nan")  # share of bootstrap values between spread_low and spread_high


def logit_loss(probabilities: np.ndarray, labels: np.ndarray, clip: float = 1e-12) -> np.ndarray:
    """Per-example loss of Negoescu et al. footnote 1: −logit of the probability of the true class.

    Binary (``probabilities`` of shape [n] or [n, 1] = P(y = 1), labels in {0, 1}):
    l = (1 − 2y)(log p − log(1 − p)). Multi-class ([n, C], integer labels or one-hot [n, C]):
    l = −Σ_j (log p_j − log(1 − p_j))·1{y_j = 1}. Probabilities are clipped to [clip, 1 − clip]
    so that the loss stays finite.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    p = np.clip(p, clip, 1.0 - clip)
    if p.ndim == 1:
        y = y.reshape(-1)
        if y.shape[0] != p.shape[0] or not np.all(np.isin(y, (0, 1))):
            raise ValueError("binary labels must be 0/1 with one label per probability")
        return (1.0 - 2.0 * y.astype(np.float64)) * logit(p)
    if p.ndim != 2:
        raise ValueError(f"probabilities must have shape [n], [n, 1] or [n, C], got {p.shape}")
    if y.ndim == 2:
        if y.shape != p.shape:
            raise ValueError(f"one-hot labels must have shape {p.shape}, got {y.shape}")
        return -np.sum(logit(p) * (y == 1), axis=1)
    y = y.reshape(-1).astype(np.int64)
    if y.shape[0] != p.shape[0] or np.any(y < 0) or np.any(y >= p.shape[1]):
        raise ValueError(f"labels must be integers in [0, {p.shape[1]}) with one label per row")
    return -logit(p[np.arange(p.shape[0]), y])


def _as_losses(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size < 2:
        raise ValueError(f"{name} needs at least 2 losses, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return arr


def _resolve_delta(delta: float | None, n_members: int) -> float:
    if delta is None:
        delta = default_delta(n_members)
        if delta >= 0.5:
            raise ValueError(f"the default delta 1/(n ln n) needs at least 3 members, got {n_members}")
        return delta
    delta = float(delta)
    if not 0.0 < delta < 0.5:
        raise ValueError(f"delta must lie in (0, 0.5), got {delta!r}")
    return delta


def _check_variant(variant: str) -> str:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return variant


def epsilon_star_from_rates(
    fpr: np.ndarray, fnr: np.ndarray, delta: float, floor: float = 0.0, band: float | None = None
) -> np.ndarray:
    """Per-threshold log max of the four ratios and 1 — Negoescu et al. Eq. 7 (vectorised, ≥ 0).

    ``band``: App. B's rule — thresholds with t or η outside (band, 1 − band) score 0 (dropped).
    ``floor``: denominators are floored at it (the ``"floor"`` variant). A ratio whose denominator
    is still 0 is left out rather than counted as infinite.
    """
    t = np.asarray(fpr, dtype=np.float64)
    eta = np.asarray(fnr, dtype=np.float64)
    numerators = np.stack([1.0 - delta - eta, 1.0 - delta - t, eta - delta, t - delta])
    denominators = np.maximum(np.stack([t, eta, 1.0 - t, 1.0 - eta]), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(denominators > 0.0, numerators / denominators, 0.0)
    values = np.log(np.maximum(ratios.max(axis=0), 1.0))
    if band is not None:
        inside = (t > band) & (t < 1.0 - band) & (eta > band) & (eta < 1.0 - band)
        values = np.where(inside, values, 0.0)
    return values


def epsilon_star_empirical(
    member_losses: np.ndarray,
    nonmember_losses: np.ndarray,
    delta: float | None = None,
    rate_floor: float = EMPIRICAL_RATE_FLOOR,
    variant: str = "band",
) -> EpsilonStar:
    """Epsilon* from empirical CDFs over every distinct loss threshold — Negoescu et al. Eq. 7.

    t(τ) = share of non-members with loss ≤ τ, η(τ) = share of members with loss > τ.
    ``variant="band"`` (App. B): thresholds with t or η outside (``rate_floor``, 1 − ``rate_floor``)
    = (0.001, 0.999) are dropped; ``"floor"``: denominators floored at ``rate_floor`` instead. δ
    defaults to 1/(n ln n) with n the member count.
    """
    members = _as_losses(member_losses, "member_losses")
    nonmembers = _as_losses(nonmember_losses, "nonmember_losses")
    delta = _resolve_delta(delta, members.size)
    if not 0.0 <= rate_floor < 0.5:
        raise ValueError(f"rate_floor must lie in [0, 0.5), got {rate_floor!r}")
    _check_variant(variant)
    members_sorted, nonmembers_sorted = np.sort(members), np.sort(nonmembers)
    thresholds = np.unique(np.concatenate([members_sorted, nonmembers_sorted]))
    t = np.searchsorted(nonmembers_sorted, thresholds, side="right") / nonmembers.size
    eta = 1.0 - np.searchsorted(members_sorted, thresholds, side="right") / members.size
    band = (None, rate_floor) if variant == "floor" else (rate_floor, None)
    values = epsilon_star_from_rates(t, eta, delta, floor=band[1] or 0.0, band=band[0])
    return replace(
        _best(thresholds, t, eta, values, delta, "empirical", members.size, nonmembers.size), variant=variant
    )


def _best(
    thresholds: np.ndarray,
    t: np.ndarray,
    eta: np.ndarray,
    values: np.ndarray,
    delta: float,
    method: str,
    n_members: int,
    n_nonmembers: int,
    **ks: float,
) -> EpsilonStar:
    nan = float("nan")
    if values.size == 0 or values.max() <= 0.0:
        return EpsilonStar(
            0.0,
            delta,
            method,
            ks.get("ks_pvalue", nan),
            nan,
            nan,
            nan,
            n_members,
            n_nonmembers,
            ks.get("ks_pvalue_members", nan),
            ks.get("ks_pvalue_nonmembers", nan),
        )
    i = int(np.argmax(values))
    return EpsilonStar(
        float(values[i]),
        delta,
        method,
        ks.get("ks_pvalue", nan),
        float(thresholds[i]),
        float(t[i]),
        float(eta[i]),
        n_members,
        n_nonmembers,
        ks.get("ks_pvalue_members", nan),
        ks.get("ks_pvalue_nonmembers", nan),
    )


def logit_transform(member_losses: np.ndarray, nonmember_losses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """App. B steps 1–4 as an increasing map of the loss: −logit(exp(−(normalised loss + 1))).

    Steps: normalise by the pooled min and max to [0, 1]; add 1; p = e^{−x}; φ = log p − log(1 − p).
    φ decreases with the loss, so −φ is returned to keep "member if value ≤ τ" the rejection region.
    """
    members = np.asarray(member_losses, dtype=np.float64)
    nonmembers = np.asarray(nonmember_losses, dtype=np.float64)
    # Halved before subtracting, so that losses near ±1e308 do not overflow the span.
    lo = min(members.min(), nonmembers.min()) / 2.0
    span = max(members.max(), nonmembers.max()) / 2.0 - lo
    span = span if span > 0 else 1.0

    def transform(x: np.ndarray) -> np.ndarray:
        p = np.exp(-((x / 2.0 - lo) / span + 1.0))
        return -logit(p)

    return transform(members), transform(nonmembers)


def _gaussian_rates(
    s: np.ndarray, mu_m: float, sd_m: float, mu_n: float, sd_n: float
) -> tuple[np.ndarray, np.ndarray]:
    """t(s) = P_non(V ≤ s), η(s) = P_mem(V > s) for fitted normals."""
    return norm.cdf(s, mu_n, sd_n), norm.sf(s, mu_m, sd_m)


def epsilon_star_gaussian(
    member_mean: float,
    member_std: float,
    nonmember_mean: float,
    nonmember_std: float,
    delta: float,
    grid_size: int = 20_000,
    variant: str = "band",
) -> tuple[float, float, float, float]:
    """Supremum of Eq. 7 over thresholds for normal member/non-member scores — Negoescu et al. §3.1.

    Rejection region "member if score ≤ s". Thresholds are the quantiles of both normals at levels
    spread linearly and geometrically towards δ and 1 − δ; App. B's band (δ, 1 − δ) drops the others
    (``variant="band"``) or floors the ratio denominators at δ (``"floor"``). The best grid point is
    refined by a bounded scalar search. Returns (ε*, s*, t(s*), η(s*)).
    """
    _check_variant(variant)
    if not (member_std > 0 and nonmember_std > 0):
        raise ValueError(f"standard deviations must be > 0, got {member_std!r}, {nonmember_std!r}")
    half = grid_size // 4
    levels = np.concatenate(
        [
            np.linspace(delta, 1.0 - delta, half),
            np.geomspace(delta, 0.5, half),
            1.0 - np.geomspace(delta, 0.5, half),
        ]
    )
    s = np.unique(
        np.concatenate(
            [norm.ppf(levels, member_mean, member_std), norm.ppf(levels, nonmember_mean, nonmember_std)]
        )
    )

    def value(x: np.ndarray) -> np.ndarray:
        t, eta = _gaussian_rates(x, member_mean, member_std, nonmember_mean, nonmember_std)
        if variant == "floor":
            return epsilon_star_from_rates(t, eta, delta, floor=delta)
        return epsilon_star_from_rates(t, eta, delta, band=delta)

    values = value(s)
    i = int(np.argmax(values))
    best_s, best = float(s[i]), float(values[i])
    if best > 0.0 and 0 < i < s.size - 1:
        result = minimize_scalar(
            lambda x: -float(value(np.array([x]))[0]),
            bounds=(s[i - 1], s[i + 1]),
            method="bounded",
            options={"xatol": 1e-10},
        )
        if -result.fun > best:
            best_s, best = float(result.x), float(-result.fun)
    t, eta = _gaussian_rates(np.array([best_s]), member_mean, member_std, nonmember_mean, nonmember_std)
    return best, best_s, float(t[0]), float(eta[0])


def epsilon_star_parametric(
    member_losses: np.ndarray,
    nonmember_losses: np.ndarray,
    delta: float | None = None,
    transform: bool = True,
    grid_size: int = 20_000,
    variant: str = "band",
) -> EpsilonStar:
    """Parametric Epsilon*: App. B logit transform, normal fits, supremum of Eq. 7 over thresholds.

    ``variant``: ``"band"`` (App. B, default) or ``"floor"`` (see the module docstring).

    ``transform=False`` fits the normals to the raw losses (for losses already close to normal).
    ``ks_pvalue`` is the smaller KS p-value (``scipy.stats.kstest``) of the two normal fits; the
    parameters are estimated from the same data, so it is optimistic (Lilliefors) — read it as a
    diagnostic, not a test. ``threshold`` is reported on the transformed scale when transforming.
    """
    members = _as_losses(member_losses, "member_losses")
    nonmembers = _as_losses(nonmember_losses, "nonmember_losses")
    delta = _resolve_delta(delta, members.size)
    if transform:
        members, nonmembers = logit_transform(members, nonmembers)
    mu_m, sd_m = norm.fit(members)
    mu_n, sd_n = norm.fit(nonmembers)
    nan = float("nan")
    _check_variant(variant)
    if sd_m <= 0 and sd_n <= 0 and mu_m == mu_n:  # every loss identical: no test separates the groups
        return EpsilonStar(
            0.0, delta, "parametric", nan, nan, nan, nan, members.size, nonmembers.size, variant=variant
        )
    # A degenerate (constant) group gets a tiny spread so the CDFs stay defined.
    floor = 1e-9 * max(1.0, abs(mu_m), abs(mu_n), sd_m, sd_n)
    sd_m, sd_n = max(sd_m, floor), max(sd_n, floor)
    p_m = float(kstest(members, "norm", args=(mu_m, sd_m)).pvalue)
    p_n = float(kstest(nonmembers, "norm", args=(mu_n, sd_n)).pvalue)
    value, s, t, eta = epsilon_star_gaussian(mu_m, sd_m, mu_n, sd_n, delta, grid_size, variant)
    return EpsilonStar(
        epsilon_star=value,
        delta=delta,
        method="parametric",
        ks_pvalue=min(p_m, p_n),
        threshold=s if value > 0 else nan,
        fpr=t if value > 0 else nan,
        fnr=eta if value > 0 else nan,
        n_members=members.size,
        n_nonmembers=nonmembers.size,
        ks_pvalue_members=p_m,
        ks_pvalue_nonmembers=p_n,
        variant=variant,
    )
