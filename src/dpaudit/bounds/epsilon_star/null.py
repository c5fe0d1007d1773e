"""Epsilon*'s null level at the same n (label permutations of the pooled losses) and its bootstrap
spread: every Epsilon* value is reported beside them (see :mod:`dpaudit.bounds.epsilon_star`)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.stats import norm

from dpaudit.bounds.epsilon_star.estimators import (
    EMPIRICAL_RATE_FLOOR,
    NULL_PERMUTATIONS,
    NULL_QUANTILE,
    EpsilonStar,
    _as_losses,
    _check_variant,
    _resolve_delta,
    epsilon_star_empirical,
    epsilon_star_from_rates,
    epsilon_star_gaussian,
    epsilon_star_parametric,
    logit_transform,
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


def _check_count(value: int, name: str, minimum: int) -> None:
    """Reject anything but an integer (bools excluded) of at least ``minimum``."""
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _check_null_args(method: str, variant: str, permutations: int) -> None:
    """The argument checks that :func:`epsilon_star_null` and :func:`epsilon_star_with_null` share."""
    if method not in ("parametric", "empirical"):
        raise ValueError(f"method must be 'parametric' or 'empirical', got {method!r}")
    _check_variant(variant)
    _check_count(permutations, "permutations", 1)


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
    _check_null_args(method, variant, permutations)
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
    _check_null_args(method, variant, permutations)
    rank = null_critical_rank(int(permutations), null_quantile)
    if not 0.0 < spread_level < 1.0:
        raise ValueError(f"spread_level must lie in (0, 1), got {spread_level!r}")
    _check_count(n_bootstrap, "n_bootstrap", 0)
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
