"""One-run audits: ε lower bounds from canaries included at random in ONE training run.

The audit decides, from its own seed and before training, for each of m canaries whether it is
included (independently, probability 1/2). After training it scores every canary (higher = "in"),
guesses "in" for the k₊ highest scores and "out" for the k₋ lowest, abstains on the rest, and counts
v correct out of r = k₊ + k₋ guesses. Two analyses turn (m, r, v) into an ε lower bound:

* ``steinke`` — Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run",
  Thm. 1 / Alg. 1 with abstentions (:func:`dpaudit.bounds.steinke.one_run_lower_bound`). Holds for
  any (ε, δ)-DP mechanism: it assumes only the audit's own random inclusion.
* ``fdp_gaussian`` — Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-Differential Privacy in One
  Run": the worst-case tail of the number of correct guesses under an f-DP mechanism (their
  guessing-game theorem and its numerical recursion), here for the Gaussian trade-off family
  f_μ(α) = Φ(Φ⁻¹(1−α) − μ), then ε(δ) of μ-GDP. ASSUMES the mechanism's trade-off curve is
  Gaussian (true of DP-SGD-type mechanisms in their GDP approximation); it is much tighter than
  ``steinke`` there, and may overclaim for mechanisms with other curves (randomised response).

Both bounds are joint over a grid of (k₊, k₋) pairs fixed before seeing the data (Bonferroni), and
both are functions of the multiset of (score, included) pairs and the seed that breaks ties.
The f-DP recursion is hand-written (no library provides it for arbitrary (k₊, k₋)); scipy gives Φ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from dpaudit.bounds.empirical import _as_scores, _check_confidence, _check_delta
from dpaudit.bounds.steinke import epsilon_from_guesses, ordered_inclusion
from dpaudit.bounds.tradeoff import gdp_epsilon

__all__ = [
    "ANALYSES",
    "ASSUMPTIONS",
    "DEFAULT_GUESS_FRACTIONS",
    "OneRunAudit",
    "audit_one_run",
    "fdp_gaussian_mu_lower",
    "gdp_mu_for_epsilon",
    "guess_pairs",
    "one_run_ceiling",
]

ASSUMPTIONS = {
    "steinke": "assumes only the audit's own inclusion of canaries (independent, prob. 1/2), "
    "nothing about the mechanism",
    "fdp_gaussian": "ASSUMES a Gaussian trade-off curve (mu-GDP, e.g. DP-SGD) besides the audit's "
    "own inclusion of canaries",
}
ANALYSES = tuple(ASSUMPTIONS)
#: Total guesses r = fraction · m, split evenly between the highest (k₊) and lowest (k₋) scores.
DEFAULT_GUESS_FRACTIONS: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5)
# μ search of the f-DP analysis: a coarse grid on [0, MU_MAX] then a fine grid inside the last
# rejected cell; the reported μ is itself a rejected grid point (never an interpolation).
MU_MAX = 30.0
MU_GRID = 161


@dataclass(frozen=True)
class OneRunAudit:
    """ε lower bound of a one-run audit at ``confidence``, joint over every (k₊, k₋) searched.

    ``guesses``, ``correct``, ``k_positive``, ``k_negative`` describe the (k₊, k₋) pair that gave
    the bound (all zero-correct fields still describe a pair when the bound is 0).
    """

    epsilon_lower: float
    estimator: str
    assumption: str
    confidence: float
    canaries: int
    guesses: int
    correct: int
    k_positive: int
    k_negative: int


def guess_pairs(canaries: int, guess_fractions: Sequence[float]) -> list[tuple[int, int]]:
    """The (k₊, k₋) grid: r = fraction · m guesses split evenly, deduplicated, in input order."""
    if canaries < 2:
        raise ValueError(f"a one-run audit needs at least 2 canaries, got {canaries}")
    fractions = [float(f) for f in guess_fractions]
    if not fractions:
        raise ValueError("guess_fractions is empty")
    pairs: list[tuple[int, int]] = []
    for f in fractions:
        if not 0.0 < f <= 1.0:
            raise ValueError(f"guess_fractions entries must lie in (0, 1], got {f!r}")
        k = max(1, min(canaries // 2, int(round(f * canaries / 2.0))))
        if (k, k) not in pairs:
            pairs.append((k, k))
    return pairs


def _fdp_rejected(mu: np.ndarray, guesses: int, correct: int, canaries: int, level: float) -> np.ndarray:
    """Whether μ-GDP is rejected at ``level`` by ``correct`` of ``guesses`` (vectorised over μ).

    Mahloujifar, Melis & Chaudhuri 2024 (guessing-game theorem under f-DP and its recursion):
    with p_j = P[j correct], A_v = Σ_{j≥v} j·p_j and B_v = Σ_{j≥v} (r−j)·p_j, every f-DP mechanism
    obeys A_v ≤ m·f̄(B_{v−1}/m) for all v (f̄ = 1 − f; double counting over canaries, each one's
    guess being an f-DP test, plus concavity of f̄). To put tail mass ``level`` on ≥ v correct the
    adversary needs mass below v; the recursion adds the least mass at v−1, v−2, …, 0 that keeps
    each constraint, with f̄⁻¹(y) = Φ(Φ⁻¹(y) − μ) for the Gaussian curve. If the total mass exceeds
    1, P[≥ v correct] < ``level`` for every μ-GDP mechanism, i.e. μ is rejected.
    """
    r_guesses, v = guesses, correct
    a = np.full(mu.shape, level * v / canaries)  # A/m
    b = np.full(mu.shape, level * (r_guesses - v) / canaries)  # B/m
    for i in range(v - 1, -1, -1):
        need = ndtr(ndtri(a) - mu)
        b_new = np.maximum(b, need)
        if np.array_equal(b_new, b):
            break  # no constraint needs more mass: nothing changes further down
        a = np.minimum(a + (i / (r_guesses - i)) * (b_new - b), 1.0)
        b = b_new
    return a + b > r_guesses / canaries


def fdp_gaussian_mu_lower(guesses: int, correct: int, canaries: int, level: float) -> float:
    """Largest μ (on a two-stage grid over [0, 30]) that ``correct`` of ``guesses`` rejects at ``level``.

    Rejection is monotone in μ (a larger μ needs less mass), so the rejected set is [0, μ*); the
    returned value is a rejected grid point, hence ≤ μ*: a valid lower bound on the μ of the
    mechanism's Gaussian trade-off curve with probability ≥ 1 − ``level``.
    """
    if not 0 <= correct <= guesses <= canaries or guesses == 0:
        raise ValueError(
            f"need 0 <= correct <= guesses <= canaries and guesses > 0, got {correct}, {guesses}, {canaries}"
        )
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    coarse = np.linspace(0.0, MU_MAX, MU_GRID)
    hit = _fdp_rejected(coarse, guesses, correct, canaries, level)
    if not hit[0]:
        return 0.0
    j = int(np.flatnonzero(hit)[-1])
    if j == coarse.size - 1:
        return MU_MAX
    fine = np.linspace(coarse[j], coarse[j + 1], MU_GRID)
    hit_fine = _fdp_rejected(fine, guesses, correct, canaries, level)
    return float(fine[int(np.flatnonzero(hit_fine)[-1])]) if hit_fine.any() else float(coarse[j])


def audit_one_run(
    scores: np.ndarray | Sequence[float],
    included: np.ndarray | Sequence[bool],
    *,
    delta: float,
    confidence: float = 0.95,
    analysis: str = "steinke",
    seed: int = 0,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
) -> OneRunAudit:
    """ε lower bound from ONE training run's canary scores, at ``confidence`` jointly over the grid.

    ``scores``: one per canary, higher = "in"; ``included``: whether each canary was in training,
    drawn by the audit independently with probability 1/2 before training (the theorems need it).
    ``analysis``: ``"steinke"`` (no assumption on the mechanism) or ``"fdp_gaussian"`` (assumes a
    Gaussian trade-off curve). Each (k₊, k₋) pair of :func:`guess_pairs` is tested at level
    (1 − confidence)/G (Bonferroni over the G pairs) and the largest bound is returned. Ties in
    the scores are broken at random from :func:`tie_seed` (``seed``), independently of ``included``
    and of the stream an auditor seeded ``seed`` draws it from.
    """
    if analysis not in ANALYSES:
        raise ValueError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
    s = _as_scores(np.asarray(scores), "scores")
    inc_raw = np.asarray(included).ravel()
    if inc_raw.shape != s.shape:
        raise ValueError(f"included must have one entry per score, got {inc_raw.shape} vs {s.shape}")
    if not np.all(np.isin(inc_raw, (0, 1))):
        raise ValueError("included must hold only booleans or 0/1")
    inc = inc_raw.astype(bool)
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    m = s.size
    pairs = guess_pairs(m, guess_fractions)
    per_confidence = 1.0 - (1.0 - confidence) / len(pairs)
    # the guesses of every pair: top k₊ "in", bottom k₋ "out"; ties broken from a stream of their own
    ordered = ordered_inclusion(s, inc, tie_seed(seed))
    best: tuple[float, int, int, int, int] | None = None
    for k_pos, k_neg in pairs:
        guesses = k_pos + k_neg
        correct = int(ordered[m - k_pos :].sum()) + int((~ordered[:k_neg]).sum())
        if analysis == "steinke":
            eps = epsilon_from_guesses(guesses, correct, m, delta, per_confidence)
        else:
            eps = gdp_epsilon(fdp_gaussian_mu_lower(guesses, correct, m, 1.0 - per_confidence), delta)
        if best is None or eps > best[0]:
            best = (float(eps), guesses, correct, k_pos, k_neg)
    assert best is not None
    eps, guesses, correct, k_pos, k_neg = best
    return OneRunAudit(eps, analysis, ASSUMPTIONS[analysis], confidence, m, guesses, correct, k_pos, k_neg)


#: Tag of the tie-break stream: np.random.default_rng(seed) is the stream np.random.default_rng([seed, 0])
#: (the auditor's inclusion bits), so ties are broken from SeedSequence([seed, TIE_STREAM]) instead.
TIE_STREAM = 0x7E5


def tie_seed(seed: int) -> int:
    """The seed of the tie-break stream of an audit seeded ``seed``: independent of any stream an
    auditor draws inclusion bits from with the same seed."""
    return int(np.random.SeedSequence([int(seed), TIE_STREAM]).generate_state(1, dtype=np.uint32)[0])


def gdp_mu_for_epsilon(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP mechanism is exactly (ε, δ)-DP (inverts :func:`gdp_epsilon` by root finding)."""
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    hi = 1.0
    while gdp_epsilon(hi, delta) < epsilon:
        hi *= 2.0
    return float(brentq(lambda mu: gdp_epsilon(mu, delta) - epsilon, 1e-9, hi, xtol=1e-10))


def one_run_ceiling(
    epsilon: float,
    delta: float,
    canaries: int,
    *,
    analysis: str = "steinke",
    confidence: float = 0.95,
    repeats: int = 50,
    seed: int = 0,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
) -> float:
    """The analysis' own ceiling: median ε_LB on the ideal Gaussian canary game with true (ε, δ).

    Each simulated run includes every canary with probability 1/2 and scores it N(μ, 1) if
    included, N(0, 1) otherwise, μ = :func:`gdp_mu_for_epsilon` (so the mechanism is exactly
    (ε, δ)-DP and μ-GDP). The median over ``repeats`` runs is what a perfect attack on a perfectly
    tight DP-SGD could show with m canaries: the gap to ε is the analysis', not the attack's.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    mu = gdp_mu_for_epsilon(epsilon, delta)
    rng = np.random.default_rng(seed)
    values = []
    for rep in range(repeats):
        inc = rng.random(canaries) < 0.5
        scores = rng.normal(size=canaries) + mu * inc
        audit = audit_one_run(
            scores,
            inc,
            delta=delta,
            confidence=confidence,
            analysis=analysis,
            seed=seed + rep,
            guess_fractions=guess_fractions,
        )
        values.append(audit.epsilon_lower)
    return float(np.median(values))
