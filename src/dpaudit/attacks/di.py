"""The differential-identifiability adversary A_DI,Gau (Bernau et al. Algorithm 1, Lemma 1).

The adversary knows D and D′, the clipping norm, σ_i and θ_i of every step, and observes the
noisy clipped gradient sum r_i. It computes both candidate clipped batch gradients μ_D and μ_D′
at θ_i and updates its belief in D with the Gaussian likelihood ratio of r_i (Lemma 1), in log
space: log-odds ← log-odds + LLR_i, belief = sigmoid(log-odds), so beliefs stay finite and exact
even at ε = 50 where the densities themselves underflow. It decides for D iff the final belief
in D exceeds 1/2 (step 15).

The batch gradients of D and D′ differ only in the differing records, μ_D − μ_D′ = Δ_i (the
trainer's tracked difference), and r_i − μ_b = σ_i ξ_i for the world b actually used, so

    LLR_i = (‖r_i − μ_D′‖² − ‖r_i − μ_D‖²) / (2σ_i²) = ⟨ξ_i, Δ_i⟩/σ_i + s·‖Δ_i‖²/(2σ_i²),

with s = +1 if b = D and −1 if b = D′. The trainer's observer
:func:`dpaudit.training.dpsgd.difference.di_observer` records ⟨ξ_i, Δ_i⟩, ‖Δ_i‖² and σ_i
inside the trainer's step (three scalars per trial and step, no gradient history) and
:func:`log_likelihood_ratios` evaluates the formula in float64; it is the adversary's exact
quantity without a second pass over D and D′.

Beside it, the loss-threshold membership adversary of Yeom et al. on the differing record
(Bernau Figs. 7–9 d) decides "member" when the record's loss is at most the model's mean
training loss (:func:`dpaudit.attacks.membership.yeom_decision`).

References: :data:`dpaudit.references.BERNAU`, :data:`dpaudit.references.YEOM`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import expit


def log_likelihood_ratios(
    dot: np.ndarray, dd: np.ndarray, sigma: np.ndarray, world: np.ndarray
) -> np.ndarray:
    """Per-step LLR_i = log p(r_i | D) − log p(r_i | D′), ``[T, k]`` in float64 (Lemma 1).

    ``world[t]`` is 1 when trial t trained on D, 0 on D′. A step with Δ_i = 0 carries no
    information (LLR 0); a noiseless step with Δ_i ≠ 0 identifies the world (±∞).
    """
    dot = np.asarray(dot, dtype=np.float64)
    dd = np.asarray(dd, dtype=np.float64)
    sigma = np.asarray(sigma, dtype=np.float64)
    s = np.where(np.asarray(world)[:, None] == 1, 1.0, -1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        llr = dot / sigma + s * dd / (2.0 * sigma**2)
    llr = np.where(dd == 0, 0.0, llr)
    return np.where((sigma == 0) & (dd > 0), s * np.inf, llr)


def belief_log_odds(llr: np.ndarray) -> np.ndarray:
    """Running log-odds of the belief in D after each step (uniform prior: log-odds 0), ``[T, k]``."""
    return np.cumsum(np.asarray(llr, dtype=np.float64), axis=1)


def beliefs_from_log_odds(log_odds: np.ndarray) -> np.ndarray:
    """β = sigmoid(log-odds), computed stably (Lemma 1)."""
    return expit(np.asarray(log_odds, dtype=np.float64))


def true_log_odds(final_log_odds_d: np.ndarray, world: np.ndarray) -> np.ndarray:
    """Log-odds of the final belief in the dataset actually used (D if world = 1, else D′)."""
    return np.where(np.asarray(world) == 1, final_log_odds_d, -np.asarray(final_log_odds_d))


@dataclass(frozen=True)
class Advantage:
    """Adv = 2·wins/n − 1 with a Clopper–Pearson interval at ``confidence`` (Bernau Def. 5)."""

    advantage: float
    low: float
    high: float
    wins: int
    trials: int
    confidence: float


def advantage(wins: int, trials: int, confidence: float = 0.95) -> Advantage:
    """Adv = 2·wins/n − 1 (Bernau §5.3 iii) and its exact binomial (Clopper–Pearson) interval from
    scipy.stats.binomtest."""
    if trials <= 0 or not 0 <= wins <= trials:
        raise ValueError(f"need 0 <= wins <= trials and trials > 0, got wins={wins}, trials={trials}")
    point = 2.0 * wins / trials - 1.0
    ci = stats.binomtest(int(wins), int(trials)).proportion_ci(confidence_level=confidence, method="exact")
    return Advantage(
        point,
        2.0 * ci.low - 1.0,
        2.0 * ci.high - 1.0,
        int(wins),
        int(trials),
        float(confidence),
    )


@dataclass(frozen=True)
class DIOutcome:
    """Result of A_DI,Gau over n trials of one configuration."""

    final_true_log_odds: np.ndarray  # [T] log-odds of the final belief in the true dataset
    guess_d: np.ndarray  # [T] the adversary's decision: True = "trained on D"
    adv: Advantage
    delta_prime: float  # share of trials whose final belief exceeds rho_beta
    max_belief_log_odds: float

    @property
    def final_beliefs(self) -> np.ndarray:
        return beliefs_from_log_odds(self.final_true_log_odds)


def run_di(
    dot: np.ndarray,
    dd: np.ndarray,
    sigma: np.ndarray,
    world: np.ndarray,
    rho_beta: float,
    confidence: float = 0.95,
) -> DIOutcome:
    """Algorithm 1 over all trials: final beliefs, decision (β_k(D) > 1/2), Adv, δ′ = P̂(β_k > ρβ)."""
    llr = log_likelihood_ratios(dot, dd, sigma, world)
    final_d = belief_log_odds(llr)[:, -1] if llr.shape[1] else np.zeros(len(llr))
    truth = true_log_odds(final_d, world)
    # Decide D when β_k(D) ≥ 1/2: a tie (no information at all, e.g. LS = 0 every step) is then a
    # fair coin over the uniformly drawn worlds rather than a loss in both.
    guess_d = final_d >= 0
    return DIOutcome(
        final_true_log_odds=truth,
        guess_d=guess_d,
        adv=advantage_of_guesses(guess_d, world, confidence),
        delta_prime=delta_prime(truth, rho_beta),
        max_belief_log_odds=float(np.max(truth)),
    )


def scores_of_d(final_true_log_odds: np.ndarray, world: np.ndarray) -> np.ndarray:
    """Per-trial scores of A_DI,Gau for the auditor: the final log-odds of D, higher = "in".

    "In" is world D (world bit 1): D holds x̂, D′ lacks it (unbounded) or holds x̂′ instead
    (bounded). ±∞ (a belief of exactly 0 or 1) is clipped to ±1e300 so that every score is finite;
    the adversary's decision (β_k(D) ≥ 1/2) is ``scores >= 0``.
    """
    log_odds_d = true_log_odds(np.asarray(final_true_log_odds, dtype=np.float64), world)
    return np.clip(log_odds_d, -1e300, 1e300)


def advantage_of_guesses(guess_d: np.ndarray, world: np.ndarray, confidence: float = 0.95) -> Advantage:
    """Adv with its interval from per-trial guesses ("D" = True) and the worlds drawn (1 = D)."""
    wins = int(np.sum(np.asarray(guess_d, dtype=bool) == (np.asarray(world) == 1)))
    return advantage(wins, len(guess_d), confidence)


def delta_prime(final_true_log_odds: np.ndarray, rho_beta: float) -> float:
    """δ′: share of trials whose final belief in the true dataset exceeds ρβ (Bernau §5.3)."""
    return float(np.mean(np.asarray(final_true_log_odds) > math.log(rho_beta / (1.0 - rho_beta))))


def expected_advantage_local(noise_multiplier: float, steps: int) -> float:
    """2Φ(√k/(2z)) − 1: A_DI,Gau's advantage when σ_i = z·LS_i in every one of k steps (Thm. 2, Eq. 14)."""
    if noise_multiplier <= 0:
        return 1.0
    return float(2.0 * stats.norm.cdf(math.sqrt(steps) / (2.0 * noise_multiplier)) - 1.0)


def expected_delta_prime_local(noise_multiplier: float, steps: int, epsilon: float) -> float:
    """P(β_k > ρβ) when σ_i = z·LS_i: the final log-odds in the true dataset are N(μ²/2, μ²) with
    μ = √k/z, so δ′ → Φ((μ²/2 − ε)/μ). (ε, δ)-DP bounds a divergence, not this probability, which
    can exceed δ (e.g. at small ε)."""
    if noise_multiplier <= 0:
        return 1.0
    mu = math.sqrt(steps) / noise_multiplier
    return float(stats.norm.cdf((mu * mu / 2.0 - epsilon) / mu))


def yeom_membership(
    record_loss: np.ndarray, threshold: np.ndarray, member: np.ndarray, confidence: float = 0.95
) -> Advantage:
    """Loss-threshold MI (Yeom et al.): guess "member" iff loss ≤ threshold (the model's mean
    training loss, :func:`dpaudit.attacks.membership.yeom_decision`); ``member[t]`` says whether the
    record was in trial t's training set.
    Adv = 2·correct/n − 1, comparable with the DI advantage."""
    return advantage_of_guesses(yeom_guess(record_loss, threshold), np.asarray(member, dtype=int), confidence)


def yeom_guess(record_loss: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """Yeom et al.'s decision: "member" iff the record's loss is at most the mean training loss."""
    from dpaudit.attacks.membership import yeom_decision

    return yeom_decision(record_loss, threshold)
