"""The one-run test of Steinke, Nasr & Jagielski 2023 ("Privacy Auditing with One (1) Training Run"):
the p-value of v correct guesses out of r under (ε, δ)-DP and the ε lower bound it gives for canaries
included independently with probability 1/2 in ONE training run."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

from dpaudit.bounds.empirical import _as_scores, _check_confidence, _check_delta

__all__ = [
    "OneRunBound",
    "epsilon_from_guesses",
    "one_run_lower_bound",
    "one_run_p_value",
    "ordered_inclusion",
]


def one_run_p_value(
    guesses: int, correct: np.ndarray | int, epsilon: float, delta: float, canaries: int
) -> np.ndarray:
    """P-value of ≥ v correct guesses out of r under (ε, δ)-DP — Steinke, Nasr & Jagielski 2023.

    Their Thm. 5.2 / Algorithm (appendix): with m canaries each included independently with
    probability 1/2, r guesses and v correct, P[V ≥ v] ≤ P[Binomial(r, p) ≥ v] + 2mδ·max_{i≥1}
    P[v > Binomial(r, p) ≥ v − i]/i, with p = e^ε/(1 + e^ε). Vectorised over ``correct``.
    """
    v = np.atleast_1d(np.asarray(correct, dtype=int))
    p = 1.0 / (1.0 + math.exp(-epsilon))
    tail = binom.sf(v - 1, guesses, p)
    alpha = np.zeros(v.shape, dtype=float)
    if delta > 0:
        pmf = binom.pmf(np.arange(guesses + 1), guesses, p)
        for j, vj in enumerate(v):
            if vj <= 0:
                continue
            below = np.cumsum(pmf[vj - 1 :: -1])  # P[v > B ≥ v − i] for i = 1..v
            alpha[j] = float(np.max(below / np.arange(1, vj + 1)))
    return np.minimum(tail + alpha * delta * 2.0 * canaries, 1.0)


@dataclass(frozen=True)
class OneRunBound:
    """ε lower bound of a one-run audit and its ingredients."""

    epsilon: float
    guesses: int
    correct: int
    canaries: int
    confidence: float


def one_run_lower_bound(
    scores: np.ndarray,
    included: np.ndarray,
    *,
    k_positive: int,
    k_negative: int,
    delta: float,
    confidence: float = 0.95,
    seed: int = 0,
) -> OneRunBound:
    """One-run ε lower bound — Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run".

    ``scores`` of m canaries from ONE trained model, ``included`` whether each was in the training
    set. ASSUMPTION (the theorem needs it): each canary was included independently with probability
    1/2, decided before training, and the score rule is fixed before looking at ``included``. The
    auditor guesses "in" for the ``k_positive`` highest scores and "out" for the ``k_negative``
    lowest, abstains on the rest, and counts v correct of r = k₊ + k₋ guesses. The bound is the
    largest ε whose p-value (:func:`one_run_p_value`) stays below 1 − ``confidence`` (bisection to
    1e-6). ε here is per canary: what (ε, δ)-DP promises about adding or removing one canary.
    Choosing k₊, k₋ after looking at the result is not covered; :func:`audit_scores` tries a few
    and divides 1 − confidence among them (Bonferroni).

    Tied scores are ordered at random from ``seed``, independently of ``included`` (a guess may use
    the scores and outside randomness only): the pairs are first put in a canonical order, so the
    bound is a function of the multiset of (score, included) pairs and ``seed``, whatever the input
    order.
    """
    s = _as_scores(scores, "scores")
    inc = np.asarray(included).ravel().astype(bool)
    if inc.shape != s.shape:
        raise ValueError(f"included must have one entry per score, got {inc.shape} vs {s.shape}")
    delta = _check_delta(delta)
    confidence = _check_confidence(confidence)
    m = s.size
    if k_positive < 0 or k_negative < 0 or k_positive + k_negative > m or k_positive + k_negative == 0:
        raise ValueError(
            f"need k_positive, k_negative >= 0 with 0 < sum <= {m}, got {k_positive}, {k_negative}"
        )
    ordered = ordered_inclusion(s, inc, seed)
    correct = int(np.sum(ordered[m - k_positive :])) if k_positive else 0
    correct += int(np.sum(~ordered[:k_negative])) if k_negative else 0
    guesses = k_positive + k_negative
    epsilon = epsilon_from_guesses(guesses, correct, m, delta, confidence)
    return OneRunBound(epsilon, guesses, correct, m, confidence)


def ordered_inclusion(scores: np.ndarray, included: np.ndarray, seed: int) -> np.ndarray:
    """``included`` sorted by score, ties broken at random from ``seed``, independently of ``included``.

    The pairs are first put in a canonical order, so the result depends only on the multiset of
    (score, included) pairs and ``seed``, whatever the input order.
    """
    canonical = np.lexsort((included, scores))
    s, inc = scores[canonical], included[canonical]
    tie_break = np.random.default_rng(seed).random(s.size)
    return inc[np.lexsort((tie_break, s))]


def epsilon_from_guesses(guesses: int, correct: int, canaries: int, delta: float, confidence: float) -> float:
    """Largest ε whose p-value (:func:`one_run_p_value`) of ``correct`` of ``guesses`` stays below
    1 − ``confidence`` (bisection to 1e-6; capped where doubling passes 1e3); 0 if none does."""
    p_level = 1.0 - confidence

    def rejected(eps: float) -> bool:
        return bool(one_run_p_value(guesses, correct, eps, delta, canaries)[0] < p_level)

    if not rejected(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while rejected(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e3:
            return lo
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if rejected(mid):
            lo = mid
        else:
            hi = mid
    return lo
