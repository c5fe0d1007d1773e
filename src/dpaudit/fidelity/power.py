"""How many trials the papers' Eq. 5 needs to certify a number, given an attack's error rates.

Nasr et al. (2021) §III-C bound ε from below with Clopper–Pearson upper limits on the false-positive
and false-negative rates (their Eq. 5). A Clopper–Pearson limit does not shrink below what its trial
count allows: with every trial correct, 1000 trials per world cap the bound at 5.60 (δ = 1e-5, each
limit at 97.5 %). So a bound of 0 at n trials can mean two things: the attack is too weak to reach the
paper's number at any count (its plug-in Eq. 4 value is below it), or the count is too small (the
plug-in value is above it, and more trials would certify it). :func:`trials_needed` tells them apart
and gives the count, which the fidelity table prints for rows that are "not reached at this trial
count".
"""

from __future__ import annotations

import math

from dpaudit.bounds.empirical import clopper_pearson_upper, epsilon_from_rates

__all__ = ["MAX_TRIALS", "eq5_at", "trials_needed"]

#: Counts above this are reported as out of reach (10⁹ trials per world is no experiment anyone runs).
MAX_TRIALS = 10**9


def eq5_at(fpr: float, fnr: float, per_world: int, delta: float, level: float = 0.975) -> float:
    """Nasr et al. Eq. 5 at ``per_world`` trials per world whose error counts are the rates times the
    count (rounded to the nearest integer), each Clopper–Pearson limit at ``level``."""
    fp = min(per_world, max(0, round(fpr * per_world)))
    fn = min(per_world, max(0, round(fnr * per_world)))
    value = epsilon_from_rates(
        float(clopper_pearson_upper(fp, per_world, level)),
        float(clopper_pearson_upper(fn, per_world, level)),
        delta,
    )
    return max(0.0, float(value))


def trials_needed(
    fpr: float, fnr: float, target: float, delta: float, level: float = 0.975, *, start: int = 10
) -> int | None:
    """The smallest trial count per world at which Eq. 5 certifies ``target`` when the attack's true
    error rates are ``fpr`` and ``fnr`` (a threshold fixed in advance, each limit at ``level``), or
    None when no count up to :data:`MAX_TRIALS` does (the plug-in Eq. 4 value is not above ``target``).

    The counts are the rates times n, so the answer is the plug-in count: with rates estimated from
    finitely many trials it is an estimate, not a guarantee.
    """
    if not math.isfinite(target) or target <= 0:
        raise ValueError(f"target must be a positive finite ε, got {target!r}")
    point = float(epsilon_from_rates(fpr, fnr, delta)) if fpr > 0 or fnr > 0 else math.inf
    if point <= target:
        return None
    low, high = start, start
    while eq5_at(fpr, fnr, high, delta, level) < target:
        low, high = high, high * 2
        if high > MAX_TRIALS:
            return None
    while high - low > max(1, low // 100):  # 1 % resolution: the rates are estimates anyway
        mid = (low + high) // 2
        if eq5_at(fpr, fnr, mid, delta, level) >= target:
            high = mid
        else:
            low = mid
    return high
