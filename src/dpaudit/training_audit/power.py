"""The power statement of a one-run audit: the smallest true ε it would show above the claim.

On the ideal Gaussian canary game of :func:`dpaudit.bounds.onerun.one_run_ceiling` (m canaries, each
included w.p. 1/2, score N(μ, 1) if included else N(0, 1), μ = ``gdp_mu_for_epsilon(ε, δ)``: a perfect
attack on a mechanism that is exactly (ε, δ)-DP), :func:`detectable_epsilon` is the smallest ε at which
the ``steinke`` analysis of :func:`~dpaudit.bounds.onerun.audit_one_run` (Steinke, Nasr & Jagielski
2023, Thm. 1 with abstentions, Bonferroni over the (k₊, k₋) grid) exceeds the claim with probability
≥ ``power``. A true ε below it may go unnoticed; it says what "no violation found" is worth.

Speed (no audit per simulation): for each pair (k, k) the audit exceeds the claim iff its correct
guesses reach v*(k), the least v with ``epsilon_from_guesses(2k, v, m, δ, per-pair confidence)`` >
claim (monotone in v; found by bisection once). With common random numbers (base normals z and
inclusion bits fixed) each game's correct counts only grow with μ, so each game has a threshold μ*
above which it is detected, found in closed form from its sorted scores (:func:`detection_mu`), and
the detection rate at ε is the share of games with μ(ε) > μ*: monotone in ε, bisected on log ε.
That threshold (:func:`detection_mu`) is written here (no library has it); scipy does the rest,
through :func:`~dpaudit.bounds.steinke.epsilon_from_guesses` and
:func:`~dpaudit.bounds.onerun.gdp_mu_for_epsilon`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpaudit.bounds.onerun import DEFAULT_GUESS_FRACTIONS, gdp_mu_for_epsilon, guess_pairs
from dpaudit.bounds.steinke import epsilon_from_guesses

__all__ = ["EPSILON_MAX", "detectable_epsilon", "detection_mu", "detection_rate", "guess_thresholds"]

#: The largest true ε searched; :func:`detectable_epsilon` returns ``math.inf`` beyond it.
EPSILON_MAX = 50.0
EPSILON_MIN = 1e-3


def guess_thresholds(
    claimed_epsilon: float,
    delta: float,
    canaries: int,
    *,
    confidence: float,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
) -> list[tuple[int, int]]:
    """(k, v*) for each (k, k) pair of :func:`guess_pairs`: the fewest correct of 2k guesses whose
    ``steinke`` bound at confidence 1 − (1 − confidence)/G (as :func:`audit_one_run` splits it over
    the G pairs) exceeds ``claimed_epsilon``; v* = 2k + 1 when even 2k correct do not."""
    pairs = guess_pairs(canaries, guess_fractions)
    per_confidence = 1.0 - (1.0 - confidence) / len(pairs)
    out = []
    for k_pos, k_neg in pairs:
        r = k_pos + k_neg

        def above(v: int, r: int = r) -> bool:
            return epsilon_from_guesses(r, v, canaries, delta, per_confidence) > claimed_epsilon

        lo, hi = -1, r  # above(lo) is False (no guess right), above(hi) decides "never"
        if not above(hi):
            out.append((k_pos, r + 1))
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if above(mid) else (mid, hi)
        out.append((k_pos, hi))
    return out


def detection_mu(base: np.ndarray, included: np.ndarray, thresholds: Sequence[tuple[int, int]]) -> np.ndarray:
    """Per game (row): μ* such that scores base + μ·included reach some pair's v* iff μ > μ*.

    With a_x the x-th largest included base score, b_y the y-th largest excluded, c_x / e_y the
    x-th smallest included / excluded: #included in the top k ≥ x iff μ > b_{k−x+1} − a_x, and
    #excluded in the bottom k ≥ y iff μ > e_y − c_{k−y+1} (missing entries: ±∞). So k₊ + k₋ correct
    ≥ v iff μ > min_x max(α_x, β_{v−x}). Ties have probability 0 with continuous scores."""
    z = np.asarray(base, dtype=np.float64)
    inc = np.asarray(included, dtype=bool)
    if z.ndim != 2 or inc.shape != z.shape:
        raise ValueError(f"base and included must be [games, canaries] arrays, got {z.shape} and {inc.shape}")
    games, m = z.shape
    kmax = max(k for k, _ in thresholds)
    c = np.sort(np.where(inc, z, np.inf), axis=1)  # included ascending, then +inf
    e = np.sort(np.where(inc, np.inf, z), axis=1)  # excluded ascending, then +inf
    n_inc = inc.sum(axis=1, keepdims=True)
    rank = np.arange(kmax + 1)[None, :]

    def largest(sorted_asc: np.ndarray, count: np.ndarray) -> np.ndarray:
        """[games, kmax + 1]: the 1st, 2nd, … largest of the finite entries, −∞ past the count."""
        idx = count - 1 - rank
        return np.where(idx >= 0, np.take_along_axis(sorted_asc, np.clip(idx, 0, m - 1), axis=1), -np.inf)

    a, b = largest(c, n_inc), largest(e, m - n_inc)
    mu_star = np.full(games, np.inf)
    for k, v in thresholds:
        if v > 2 * k:
            continue
        x = np.arange(1, k + 1)
        alpha = np.concatenate([np.full((games, 1), -np.inf), b[:, k - x] - a[:, x - 1]], axis=1)
        beta = np.concatenate([np.full((games, 1), -np.inf), e[:, x - 1] - c[:, k - x]], axis=1)
        xs = np.arange(max(0, v - k), min(k, v) + 1)
        mu_star = np.minimum(mu_star, np.min(np.maximum(alpha[:, xs], beta[:, v - xs]), axis=1))
    return mu_star


def _games(canaries: int, simulations: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if simulations < 1:
        raise ValueError(f"simulations must be >= 1, got {simulations}")
    rng = np.random.default_rng(seed)
    return rng.standard_normal((simulations, canaries)), rng.random((simulations, canaries)) < 0.5


def detectable_epsilon(
    claimed_epsilon: float,
    delta: float,
    canaries: int,
    *,
    confidence: float,
    power: float = 0.8,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
    simulations: int = 400,
    seed: int = 0,
) -> float:
    """Smallest true ε whose ideal canary game makes the ``steinke`` audit at ``confidence`` exceed
    ``claimed_epsilon`` in a share ≥ ``power`` of ``simulations`` games (log-ε bisection to 1e-4,
    the upper end returned; 1e-3 if even that is detected). ``math.inf`` when even ε = 50 is not
    detected that often: the claim lies above what m canaries can ever show (the bound saturates at
    m, r and δ)."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie in (0, 1), got {power!r}")
    thresholds = guess_thresholds(
        claimed_epsilon, delta, canaries, confidence=confidence, guess_fractions=guess_fractions
    )
    mu_star = detection_mu(*_games(canaries, simulations, seed), thresholds)

    def enough(log_eps: float) -> bool:
        return float(np.mean(gdp_mu_for_epsilon(math.exp(log_eps), delta) > mu_star)) >= power

    lo, hi = math.log(EPSILON_MIN), math.log(EPSILON_MAX)
    if not enough(hi):
        return math.inf
    if enough(lo):
        return EPSILON_MIN
    while hi - lo > 1e-4:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return math.exp(hi)


def detection_rate(
    true_epsilon: float,
    claimed_epsilon: float,
    delta: float,
    canaries: int,
    *,
    confidence: float,
    simulations: int = 400,
    seed: int = 0,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
) -> float:
    """Share of ``simulations`` fresh ideal games at ``true_epsilon`` whose ``steinke`` audit exceeds
    the claim (to test a power statement on draws independent of the ones that made it)."""
    thresholds = guess_thresholds(
        claimed_epsilon, delta, canaries, confidence=confidence, guess_fractions=guess_fractions
    )
    mu_star = detection_mu(*_games(canaries, simulations, seed), thresholds)
    return float(np.mean(gdp_mu_for_epsilon(true_epsilon, delta) > mu_star))
