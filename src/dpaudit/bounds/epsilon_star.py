"""Epsilon* (Negoescu et al.): an empirical privacy score of ONE trained model from its losses.

For a loss threshold τ the membership test "member if loss ≤ τ" has false-positive rate t
(non-members below τ, Eq. 5) and false-negative rate η (members above τ, Eq. 6). Epsilon* is
log of the largest of (1−δ−η)/t, (1−δ−t)/η, (η−δ)/(1−t), (t−δ)/(1−η) and 1 over thresholds
(Def. 2, Eq. 7), a lower bound on ε of the model's empirical privacy (Def. 1, App. A).

Two estimators of (t, η):

* :func:`epsilon_star_empirical` — empirical CDFs at every distinct loss (sort-based sweep).
* :func:`epsilon_star_parametric` — App. B: normalise losses to [0, 1], shift by 1, p = e^{−loss},
  φ = logit(p), fit one normal per group, evaluate the fitted CDFs densely, take the supremum
  (§3.1). A Kolmogorov–Smirnov p-value reports how normal φ is.

Band handling (``variant``):

* ``"band"`` (default) — App. B's rule: thresholds whose rates t or η leave the band are dropped
  ((0.001, 0.999) for the empirical estimator, (δ, 1 − δ) for the parametric one), "for numerical
  stability". A consequence the paper accepts: two groups that do not overlap at all have no
  threshold inside the band and score 0.
* ``"floor"`` — dpaudit's earlier variant: keep every threshold and floor each ratio's denominator
  (t, η, 1 − t, 1 − η) at the band's lower edge. It scores separated groups high, but it is NOT the
  paper's number and it does not agree with ``"band"`` where thresholds lie inside the band (the
  out-of-band thresholds it keeps can dominate): 3.37 against 1.92 on one data set.

Either is an estimate of one model's empirical privacy with no confidence statement, and it is far
from 0 on two samples of ONE distribution at finite n. So :func:`epsilon_star_with_null` puts every
value beside its **null level at the same n**: the Epsilon* that identical member and non-member
distributions give, from permutations of the same pooled losses (member/non-member labels shuffled,
group sizes kept, the same estimator recomputed; Good 2005, "Permutation, Parametric and Bootstrap
Tests of Hypotheses", ch. 3). It reports the permutation mean, the 95th percentile (as the Monte
Carlo test's critical value), the permutation p-value and ``above_null`` (value > 95th percentile,
a false alarm at most 5 % of the time on identical distributions). It also gives a percentile **bootstrap
spread**. Its measured coverage of the population Epsilon* at a nominal 95 % is 0 % on identical
distributions, 49–79 % at a 0.5-sd shift and 66–99 % at 1 sd (n = 200 and 1000 per side, both
estimators; ``benchmarks/epsilon_star_coverage.py``), so it is NOT a confidence interval and is
never called one.

Nothing here exists in a library; the sweep and the supremum are hand-written with numpy/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logit
from scipy.stats import kstest, norm

__all__ = [
    "NULL_PERMUTATIONS",
    "NULL_QUANTILE",
    "VARIANTS",
    "EpsilonStar",
    "default_delta",
    "epsilon_star_empirical",
    "epsilon_star_from_rates",
    "epsilon_star_gaussian",
    "epsilon_star_parametric",
    "epsilon_star_null",
    "epsilon_star_with_null",
    "logit_loss",
    "null_critical_rank",
    "logit_transform",
]

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


def default_delta(n_members: int) -> float:
    """δ = 1/(n ln n) for n training records, the choice of Negoescu et al. §4 (δ ≪ 1/n)."""
    if isinstance(n_members, bool) or int(n_members) != n_members or n_members < 2:
        raise ValueError(f"n_members must be an integer >= 2, got {n_members!r}")
    return 1.0 / (n_members * math.log(n_members))


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


def _gaussian_sup_batch(
    mu_m: np.ndarray,
    sd_m: np.ndarray,
    mu_n: np.ndarray,
    sd_n: np.ndarray,
    delta: float,
    variant: str,
    grid_size: int = 4000,
    refine: int = 64,
) -> np.ndarray:
    """:func:`epsilon_star_gaussian`'s supremum for K normal pairs at once (arrays of shape [K]).

    The same threshold grid (quantiles of both normals, linear and geometric towards δ, 1 − δ),
    then two rounds of a ``refine``-point grid between the best point's neighbours in place of the
    scalar search, all as [K, points] arrays.
    """
    mu_m, sd_m, mu_n, sd_n = (np.asarray(a, dtype=np.float64)[:, None] for a in (mu_m, sd_m, mu_n, sd_n))
    half = grid_size // 4
    levels = np.concatenate(
        [
            np.linspace(delta, 1.0 - delta, half),
            np.geomspace(delta, 0.5, half),
            1.0 - np.geomspace(delta, 0.5, half),
        ]
    )
    s = np.sort(np.concatenate([norm.ppf(levels, mu_m, sd_m), norm.ppf(levels, mu_n, sd_n)], axis=1), axis=1)

    def value(x: np.ndarray) -> np.ndarray:
        t, eta = norm.cdf(x, mu_n, sd_n), norm.sf(x, mu_m, sd_m)
        if variant == "floor":
            return epsilon_star_from_rates(t, eta, delta, floor=delta)
        return epsilon_star_from_rates(t, eta, delta, band=delta)

    rows = np.arange(s.shape[0])
    values = value(s)
    i = np.argmax(values, axis=1)
    best = values[rows, i]
    lo, hi = s[rows, np.maximum(i - 1, 0)], s[rows, np.minimum(i + 1, s.shape[1] - 1)]
    steps = np.linspace(0.0, 1.0, refine)
    for _ in range(2):
        x = lo[:, None] + (hi - lo)[:, None] * steps
        vx = value(x)
        j = np.argmax(vx, axis=1)
        best = np.maximum(best, vx[rows, j])
        width = (hi - lo) / (refine - 1)
        lo, hi = x[rows, j] - width, x[rows, j] + width
    return best


def _permuted_member_masks(n_members: int, n_total: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """[count, n_total] booleans, each row a uniformly random set of ``n_members`` members."""
    keys = rng.random((count, n_total))
    ranks = np.argsort(keys, axis=1)
    masks = np.zeros((count, n_total), dtype=bool)
    np.put_along_axis(masks, ranks[:, :n_members], True, axis=1)
    return masks


def _null_values_empirical(
    pooled: np.ndarray, masks: np.ndarray, n_members: int, delta: float, variant: str
) -> np.ndarray:
    """:func:`epsilon_star_empirical` for every row of ``masks`` (vectorised over the rows).

    The thresholds (distinct pooled losses) do not change under relabelling; only the counts at
    each threshold do, and they are cumulative sums of the sorted labels.
    """
    order = np.argsort(pooled, kind="stable")
    sorted_losses = pooled[order]
    last = np.flatnonzero(np.append(sorted_losses[1:] != sorted_losses[:-1], True))  # last index per value
    n_nonmembers = pooled.size - n_members
    band = (None, EMPIRICAL_RATE_FLOOR) if variant == "floor" else (EMPIRICAL_RATE_FLOOR, None)
    out = np.empty(masks.shape[0])
    chunk = max(1, 2_000_000 // pooled.size)  # bounds the [rows, thresholds] temporaries
    for start in range(0, masks.shape[0], chunk):
        members_below = np.cumsum(masks[start : start + chunk][:, order], axis=1)[:, last]
        t = (last + 1 - members_below) / n_nonmembers
        eta = 1.0 - members_below / n_members
        values = epsilon_star_from_rates(t, eta, delta, floor=band[1] or 0.0, band=band[0])
        out[start : start + chunk] = values.max(axis=1)
    return out


def _null_values_parametric(
    pooled: np.ndarray, masks: np.ndarray, n_members: int, delta: float, variant: str
) -> np.ndarray:
    """:func:`epsilon_star_parametric` for every row of ``masks`` (vectorised over the rows).

    App. B's transform normalises by the POOLED minimum and maximum, so it is the same for every
    relabelling: it is applied once, and each row only needs its two groups' means and spreads.
    """
    z = logit_transform(pooled, pooled)[0]
    z = z - z.mean()  # centred, so that E[z²] − E[z]² does not cancel
    n_nonmembers = pooled.size - n_members
    weights = masks.astype(np.float64)
    sum_m, sq_m = weights @ z, weights @ (z * z)
    sum_all, sq_all = float(z.sum()), float((z * z).sum())
    mu_m, mu_n = sum_m / n_members, (sum_all - sum_m) / n_nonmembers
    sd_m = np.sqrt(np.maximum(sq_m / n_members - mu_m**2, 0.0))
    sd_n = np.sqrt(np.maximum((sq_all - sq_m) / n_nonmembers - mu_n**2, 0.0))
    floor = 1e-9 * np.maximum.reduce([np.ones_like(mu_m), np.abs(mu_m), np.abs(mu_n), sd_m, sd_n])
    values = _gaussian_sup_batch(mu_m, np.maximum(sd_m, floor), mu_n, np.maximum(sd_n, floor), delta, variant)
    constant = (sd_m <= 0) & (sd_n <= 0) & (mu_m == mu_n)
    return np.where(constant, 0.0, values)


def epsilon_star_null(
    member_losses: np.ndarray,
    nonmember_losses: np.ndarray,
    delta: float | None = None,
    method: str = "parametric",
    variant: str = "band",
    permutations: int = NULL_PERMUTATIONS,
    seed: int = 0,
) -> np.ndarray:
    """Epsilon* under the null "members and non-members share one distribution", at the same n.

    The member / non-member labels of the pooled losses are shuffled ``permutations`` times (group
    sizes kept) and the same estimator (``method``, ``variant``, δ) recomputed on each relabelling —
    the permutation distribution of the statistic (Good 2005, ch. 3). Returns the ``permutations``
    values. δ defaults to 1/(n ln n) of the member count, as for the point value. Vectorised over the
    permutations; written by hand (no library permutes a two-sample statistic with this sweep).
    """
    if method not in ("parametric", "empirical"):
        raise ValueError(f"method must be 'parametric' or 'empirical', got {method!r}")
    _check_variant(variant)
    if isinstance(permutations, bool) or int(permutations) != permutations or permutations < 1:
        raise ValueError(f"permutations must be an integer >= 1, got {permutations!r}")
    members = _as_losses(member_losses, "member_losses")
    nonmembers = _as_losses(nonmember_losses, "nonmember_losses")
    delta = _resolve_delta(delta, members.size)
    pooled = np.concatenate([members, nonmembers])
    rng = np.random.default_rng([seed, 1])  # its own stream: the null does not depend on n_bootstrap
    masks = _permuted_member_masks(members.size, pooled.size, int(permutations), rng)
    values = _null_values_parametric if method == "parametric" else _null_values_empirical
    return values(pooled, masks, members.size, delta, variant)


def null_critical_rank(permutations: int, quantile: float = NULL_QUANTILE) -> int:
    """1-based rank r = ⌈quantile · (K + 1)⌉ of the permutation value used as the null's high level.

    Under the null the observed value and the K permutation values are exchangeable, so the chance
    that it exceeds the r-th smallest of the K is at most (K + 1 − r) / (K + 1) ≤ 1 − quantile
    (the Monte Carlo test of Barnard 1963 / Davison & Hinkley 1997, §4.2.5). K must be large enough
    that r ≤ K (19 permutations at 0.95).
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"null_quantile must lie in (0, 1), got {quantile!r}")
    rank = math.ceil(quantile * (int(permutations) + 1) - 1e-9)
    if rank > permutations:
        need = math.ceil(quantile / (1.0 - quantile) - 1e-9)
        raise ValueError(
            f"permutations={permutations} is too few for null_quantile={quantile}: need at least {need}"
        )
    return rank


def epsilon_star_with_null(
    member_losses: np.ndarray,
    nonmember_losses: np.ndarray,
    delta: float | None = None,
    method: str = "parametric",
    variant: str = "band",
    permutations: int = NULL_PERMUTATIONS,
    null_quantile: float = NULL_QUANTILE,
    n_bootstrap: int = 200,
    spread_level: float = 0.95,
    seed: int = 0,
) -> EpsilonStar:
    """Epsilon* (Negoescu et al. Def. 2, App. B) with its null level at the same n and a bootstrap spread.

    * Null level (:func:`epsilon_star_null`): ``null_mean`` and ``null_high`` of Epsilon* over
      ``permutations`` label permutations of the same pooled losses. ``null_high`` is the
      ``null_quantile`` quantile taken as the Monte Carlo test's critical value
      (:func:`null_critical_rank`), so that ``above_null`` (value > ``null_high``) happens with
      probability at most 1 − ``null_quantile`` when members and non-members share one distribution
      (5/101 with the defaults). ``null_pvalue`` = (1 + #{null ≥ value}) / (1 + permutations). A value
      at or below its null level is what identical distributions give at this n.
    * Bootstrap spread: members and non-members resampled with replacement ``n_bootstrap`` times
      (``0`` skips it); the (1 ∓ ``spread_level``)/2 quantiles. It shows how much the estimate moves
      under resampling. It is NOT a confidence interval for the population Epsilon*: the estimator is
      biased upwards (coverage 0 % on null data and 49–79 % at a 0.5-sd shift, see
      ``benchmarks/epsilon_star_coverage.py``).

    The parametric resamples use a 2000-point threshold grid (the point value keeps 20 000) and
    skip the KS diagnostic. δ defaults to 1/(n ln n) of the full member count, for every resample.
    """
    if method not in ("parametric", "empirical"):
        raise ValueError(f"method must be 'parametric' or 'empirical', got {method!r}")
    _check_variant(variant)
    if isinstance(permutations, bool) or int(permutations) != permutations or permutations < 1:
        raise ValueError(f"permutations must be an integer >= 1, got {permutations!r}")
    null_critical_rank(int(permutations), null_quantile)
    if not 0.0 < spread_level < 1.0:
        raise ValueError(f"spread_level must lie in (0, 1), got {spread_level!r}")
    if isinstance(n_bootstrap, bool) or int(n_bootstrap) != n_bootstrap or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be an integer >= 0, got {n_bootstrap!r}")
    members = _as_losses(member_losses, "member_losses")
    nonmembers = _as_losses(nonmember_losses, "nonmember_losses")
    delta = _resolve_delta(delta, members.size)

    def estimate(m: np.ndarray, n: np.ndarray) -> float:
        if method == "empirical":
            return epsilon_star_empirical(m, n, delta, variant=variant).epsilon_star
        mt, nt = logit_transform(m, n)
        mu_m, sd_m, mu_n, sd_n = float(mt.mean()), float(mt.std()), float(nt.mean()), float(nt.std())
        if sd_m <= 0 and sd_n <= 0:
            return 0.0
        floor = 1e-9 * max(1.0, abs(mu_m), abs(mu_n), sd_m, sd_n)
        return epsilon_star_gaussian(mu_m, max(sd_m, floor), mu_n, max(sd_n, floor), delta, 2000, variant)[0]

    if method == "parametric":
        point = epsilon_star_parametric(members, nonmembers, delta, variant=variant)
    else:
        point = epsilon_star_empirical(members, nonmembers, delta, variant=variant)
    rank = null_critical_rank(permutations, null_quantile)
    null = epsilon_star_null(members, nonmembers, delta, method, variant, permutations, seed)
    null_high = float(np.sort(null)[rank - 1])
    low = high = float("nan")
    if n_bootstrap:
        rng = np.random.default_rng(seed)
        boot = np.array(
            [
                estimate(rng.choice(members, members.size), rng.choice(nonmembers, nonmembers.size))
                for _ in range(int(n_bootstrap))
            ]
        )
        tail = (1.0 - spread_level) / 2.0
        low, high = (float(v) for v in np.quantile(boot, [tail, 1.0 - tail]))
    return replace(
        point,
        null_mean=float(null.mean()),
        null_high=null_high,
        null_pvalue=float((1 + np.sum(null >= point.epsilon_star)) / (1 + null.size)),
        above_null=bool(point.epsilon_star > null_high),
        null_quantile=float(null_quantile),
        null_permutations=int(null.size),
        spread_low=low,
        spread_high=high,
        spread_level=float(spread_level) if n_bootstrap else float("nan"),
    )
