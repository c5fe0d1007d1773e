"""Estimator ``di_beliefs``: A_DI,Gau's belief analysis (Bernau §5.3, :data:`dpaudit.references.BERNAU`).

Fed by the DI adversary's score set (scores = final log-odds of D, ``member`` = trained on D), with
the target ``rho_beta`` and ``delta`` as params, the adversary's decisions as array ``decision`` and,
when recorded, the per-step squared local sensitivities ``dd`` and noise scales ``sigma`` ``[T, k]``.
It emits δ′ (share of trials whose belief in the true world exceeds ρβ) and Bernau's three ε′, all
*estimates* (never counted): (i) the RDP ε of the worst trial's effective noise multipliers σ_i/LS_i,
(ii) ln(β/(1−β)) of the largest final belief (Eq. 10) and (iii) Thm. 2 inverted at Adv_DI (Eq. 15);
at ρβ = 0.9 the belief estimate can exceed the exact ε, so none of them is a bound.
"""

from __future__ import annotations

import numpy as np

from dpaudit.attacks.di import advantage_of_guesses, delta_prime, true_log_odds
from dpaudit.bounds.accountants import epsilon_rdp_heterogeneous
from dpaudit.bounds.empirical import epsilon_from_di_advantage
from dpaudit.bounds.registry import estimator
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow


def effective_noise_multipliers(sigma: np.ndarray, dd: np.ndarray) -> np.ndarray:
    """σ_i / LS_i per trial and step: the noise multiplier relative to the actual difference (§5.3 i)."""
    ls = np.sqrt(np.asarray(dd, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ls > 0, np.asarray(sigma, dtype=np.float64) / ls, np.inf)


def epsilon_from_sensitivities(sigma: np.ndarray, dd: np.ndarray, delta: float) -> tuple[float, int]:
    """ε′ (i): RDP ε of each trial's per-step effective noise multipliers, maximised over trials.

    For full-batch Gaussian steps the RDP of order α is α·Σ_i 1/(2 z_i²), so the trial with the
    largest Σ_i z_i⁻² has the largest ε; only that trial goes through the heterogeneous RDP
    accountant (the maximum is exact). Returns (ε′, index of the maximising trial).
    """
    z = effective_noise_multipliers(sigma, dd)
    score = np.sum(np.where(np.isfinite(z), 1.0 / np.square(np.where(np.isfinite(z), z, 1.0)), 0.0), axis=1)
    worst = int(np.argmax(score))
    if score[worst] == 0:
        return 0.0, worst
    return epsilon_rdp_heterogeneous(z[worst], delta, 1.0), worst


def epsilon_from_beliefs(final_true_log_odds: np.ndarray) -> float:
    """ε′ (ii): ln(β/(1−β)) of the largest final belief (Eq. 10), taken in log space; ≥ 0."""
    return max(0.0, float(np.max(final_true_log_odds)))


def epsilon_prime_from_advantage(adv: float, delta: float) -> float:
    """ε′ (iii): inverse of Thm. 2 (Eq. 15) at the empirical advantage (0 for Adv ≤ 0).

    Not to be confused with :func:`dpaudit.bounds.empirical.epsilon_from_advantage` (Erlingsson
    Prop. 3, a bound from a membership advantage): this one is Bernau's estimate ε′ from Adv_DI.
    """
    return epsilon_from_di_advantage(float(np.clip(adv, -1.0, 1.0)), delta)


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    delta = s.param("delta")
    truth = true_log_odds(s.scores, s.member.astype(int))
    adv = advantage_of_guesses(s.arrays["decision"].astype(bool), s.member.astype(int), confidence)
    eps_adv = epsilon_prime_from_advantage(adv.advantage, delta)
    rows = [
        ResultRow(s.key, "delta_prime", delta_prime(truth, s.param("rho_beta")), "beliefs", "rate"),
        ResultRow(s.key, "epsilon_estimate", epsilon_from_beliefs(truth), "belief", "estimate"),
        ResultRow(s.key, "epsilon_estimate", eps_adv, "adv_inverse", "estimate"),
    ]
    if "dd" in s.arrays and "sigma" in s.arrays:
        eps_ls, _ = epsilon_from_sensitivities(s.arrays["sigma"], s.arrays["dd"], delta)
        rows.append(ResultRow(s.key, "epsilon_estimate", eps_ls, "local_sensitivity", "estimate"))
    return rows


estimator("di_beliefs", counted=lambda s: 0)(_rows)
