"""Gradient canaries and their distinguishers (Nasr et al. 2021, §IV-E/F), a simulator and its PLD oracle.

Nasr, Song, Thakurta, Papernot, Carlini (2021), "Adversary Instantiation: Lower Bounds for
Differentially Private Machine Learning" (`../shared/papers/nasr-adversary-instantiation.txt`;
`../shared/specs/instantiation.md`, threat models E and F).

**Crafter 4** (§IV-E) lives with the trainer that injects it (:mod:`dpaudit.training.gradient_canary`):
after t_o warm-up steps the adversary picks the 2n coordinates with the smallest summed |update| and
crafts the canary gradient s_p·C/√(2n) on them (norm C, so clipping leaves it unchanged). In world D′
the trainer adds it to the clipped sum with probability q at every step after t_o; it then receives
the same N(0, σ²I) noise, σ = z·C, as every privatized sum. ``canary_projection`` below is
:func:`dpaudit.training.gradient_canary.canary_projection`.

**Distinguisher 3** (§IV-E, and §IV-F "identical to prior"). The adversary observes every step's
privatized sum g_t at the canary coordinates and projects it on the unit canary direction
u = canary/C:

    d_t = ⟨g_t, u⟩ = Σ_p s_p g_{t,p} / √(2n)            (``canary_projection``).

If the other examples' gradients vanish on those coordinates (the paper's assumption, exact for
Crafter 5's malicious dataset with learning rate 0), d_t ~ N(0, σ²) in world D and
d_t ~ (1 − q)·N(0, σ²) + q·N(C, σ²) in world D′, independently over steps: the Poisson-subsampled
Gaussian mechanism with sensitivity C. The Neyman–Pearson optimal statistic is the log-likelihood
ratio

    Λ = Σ_t log[(1 − q) + q·exp((C d_t − C²/2)/σ²)]     (:func:`distinguisher3_scores`),

evaluated as ``logaddexp(log(1 − q), log q + (C d_t − C²/2)/σ²)`` so that it neither overflows
for σ → 0 nor loses precision for q → 1. The spec's form uses the sign-aligned sum
D_t = Σ_p s_p g_{t,p} = √(2n)·d_t, whose mean is μ = √(2n)·C and variance v = 2n·σ²; then
(μ D_t − μ²/2)/v = (2n C d_t − n C²)/(2n σ²) = (C d_t − C²/2)/σ², the same statistic.

The **literal** test of the paper (Distinguisher 3 pseudo-code and Eq. 6) multiplies, over the
steps after t_o, the density p(d_t | watermark) = exp(−(d_t − C)²/(2σ²)) / (2√(π n σ²)) of the
sign-aligned sum d_t and answers D′ when the product exceeds τ
(:func:`distinguisher3_literal_scores`). As printed it ignores q and the null hypothesis, and Eq. 6
mixes two scales: its normaliser is that of a variance 2nσ² while its exponent centres the sign-aligned
sum (whose watermark mean is √(2n)·C) at C with variance σ². We implement it as printed, on
sign-aligned sums, for comparison only; the likelihood ratio above is the test the spec asks for.

**Simulation and oracle.** :func:`simulate_subsampled_gaussian_scores` draws Λ in both worlds (in
units of C, i.e. C = 1 and σ = z) in bounded-memory chunks; :func:`pld_tradeoff_tpr_at_fpr` gives
the exact trade-off of the composed mechanism from dp_accounting's privacy-loss distribution, and
:func:`compare_simulation_with_pld` puts the two side by side with Monte Carlo standard errors.

Why hand-written: no maintained library ships Nasr et al.'s crafters or distinguishers (TensorFlow
Privacy's auditing code covers membership attacks on final models only), and dp_accounting gives the
hockey-stick divergence δ(ε) but not the trade-off curve or a Monte Carlo of the test statistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import norm

from dpaudit.scores import StepMoments

Direction = Literal["remove", "both"]


# ---------------------------------------------------------------------------------------------
# Distinguisher 3
# ---------------------------------------------------------------------------------------------


def _check_mechanism(sampling_rate: float, noise_std: float) -> None:
    if not 0 < sampling_rate <= 1:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate}")
    if not noise_std > 0:
        raise ValueError(f"noise_std must be > 0 (use a tiny value for the noiseless limit), got {noise_std}")


def distinguisher3_scores(
    privatized_dots: np.ndarray, *, sampling_rate: float, noise_std: float, canary_norm: float
) -> np.ndarray:
    """Distinguisher 3 as the likelihood-ratio test of the Poisson-subsampled Gaussian, ``[trials]``.

    ``privatized_dots`` is ``[trials, steps]`` of d_t = ⟨g_t, u⟩
    (:func:`dpaudit.training.gradient_canary.canary_projection`) over the steps where the canary may
    be present; ``noise_std`` is σ = z·C, the standard deviation of the noise on each coordinate of
    the privatized sum; ``canary_norm`` is C. Returns
    Σ_t log[(1 − q) + q·exp((C d_t − C²/2)/σ²)] (higher = world D′), the spec's
    Σ_t log[(1 − q) + q·exp((μ D_t − μ²/2)/v)] with D_t = √(2n) d_t, μ = √(2n) C, v = 2n σ² (see the
    module docstring). Nasr et al. §IV-E, Distinguisher 3; the statistic is optimal (Neyman–Pearson)
    when the other examples contribute nothing on the canary coordinates.
    """
    _check_mechanism(sampling_rate, noise_std)
    d = np.asarray(privatized_dots, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"privatized_dots must be [trials, steps], got shape {d.shape}")
    return _llr_sum(d, sampling_rate, noise_std, canary_norm)


def _llr_sum(d: np.ndarray, q: float, sigma: float, c: float) -> np.ndarray:
    """Σ_t logaddexp(log(1 − q), log q + (c d − c²/2)/σ²); overwrites nothing it was not given."""
    log_ratio = (c * d - 0.5 * c * c) / (sigma * sigma)
    if q == 1.0:
        return log_ratio.sum(axis=1)
    log_ratio += np.log(q)
    return np.logaddexp(np.log1p(-q), log_ratio, out=log_ratio).sum(axis=1)


def distinguisher3_literal_scores(
    sign_aligned_sums: np.ndarray, *, num_coordinates: int, clip_norm: float, noise_std: float
) -> np.ndarray:
    """The paper's literal Distinguisher 3: log Π_t p(d_t | watermark) with Eq. 6 as printed, ``[trials]``.

    ``sign_aligned_sums`` is ``[trials, steps]`` of d_t = Σ_p s_p g_{t,p} (Distinguisher 3, line 12;
    √(2n) times ``canary_projection``), ``num_coordinates`` is 2n. Returns
    Σ_t [−log(2√(π n σ²)) − (d_t − C)²/(2σ²)]; the paper answers D′ when the product exceeds τ, i.e.
    higher = D′. It ignores q and the null hypothesis and its centring at C is only right for 2n = 1
    (see the module docstring); use :func:`distinguisher3_scores` for the audit.
    """
    if num_coordinates < 1:
        raise ValueError(f"num_coordinates must be >= 1, got {num_coordinates}")
    _check_mechanism(1.0, noise_std)
    d = np.asarray(sign_aligned_sums, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"sign_aligned_sums must be [trials, steps], got shape {d.shape}")
    n = num_coordinates / 2.0
    log_norm = np.log(2.0 * np.sqrt(np.pi * n * noise_std**2))
    return (-log_norm - (d - clip_norm) ** 2 / (2.0 * noise_std**2)).sum(axis=1)


# ---------------------------------------------------------------------------------------------
# Simulation (threat model F's idealisation) and the PLD oracle
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimulatedGame:
    """Distinguisher 3's statistic Λ per trial in both worlds and the per-step moments behind it."""

    scores_d: np.ndarray
    scores_dprime: np.ndarray
    steps_d: StepMoments
    steps_dprime: StepMoments


def simulate_subsampled_gaussian(
    trials_per_world: int,
    *,
    sampling_rate: float,
    steps: int,
    noise_multiplier: float,
    seed: int,
    chunk: int = 20_000,
) -> SimulatedGame:
    """Monte Carlo of Distinguisher 3 on the ideal mechanism: Λ in both worlds and the step moments.

    Units of C (C = 1, σ = z): per trial and step, d_t = σ·ξ in world D and d_t = B_t + σ·ξ in world
    D′ with B_t ~ Bernoulli(q), ξ ~ N(0, 1), and Λ = :func:`distinguisher3_scores`; the d_t's count,
    sum and sum of squares per world feed :func:`dpaudit.bounds.stepwise.stepwise_family_bound`.
    Trials are drawn ``chunk`` at a time (memory ≈ 3 · chunk · steps · 8 bytes), each chunk from its
    own ``SeedSequence(seed).spawn`` stream, so results are reproducible for a given (seed, chunk).
    Measured on one CPU core of the development machine: 10⁶ trials per world at 100 steps take ≈ 12 s.
    """
    if trials_per_world < 1 or steps < 1 or chunk < 1:
        raise ValueError(
            f"trials_per_world, steps and chunk must be >= 1, got {trials_per_world}, {steps}, {chunk}"
        )
    _check_mechanism(sampling_rate, noise_multiplier)
    num_chunks = -(-trials_per_world // chunk)
    streams = np.random.SeedSequence(seed).spawn(2 * num_chunks)
    scores = np.empty((2, trials_per_world), dtype=np.float64)
    moments = [StepMoments(0, 0.0, 0.0), StepMoments(0, 0.0, 0.0)]
    for world in range(2):
        for i in range(num_chunks):
            start = i * chunk
            size = min(chunk, trials_per_world - start)
            rng = np.random.default_rng(streams[world * num_chunks + i])
            d = rng.standard_normal((size, steps))
            d *= noise_multiplier
            if world == 1:
                d += rng.random((size, steps)) < sampling_rate
            moments[world] = moments[world] + StepMoments.of(d)
            scores[world, start : start + size] = _llr_sum(d, sampling_rate, noise_multiplier, 1.0)
    return SimulatedGame(scores[0], scores[1], moments[0], moments[1])


def simulate_subsampled_gaussian_scores(
    trials_per_world: int,
    *,
    sampling_rate: float,
    steps: int,
    noise_multiplier: float,
    seed: int,
    chunk: int = 20_000,
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores_D, scores_Dprime)`` of :func:`simulate_subsampled_gaussian` (same draws)."""
    game = simulate_subsampled_gaussian(
        trials_per_world, sampling_rate=sampling_rate, steps=steps, noise_multiplier=noise_multiplier,
        seed=seed, chunk=chunk,
    )  # fmt: skip
    return game.scores_d, game.scores_dprime


def _composed_pld(
    sampling_rate: float, steps: int, noise_multiplier: float, value_discretization_interval: float
) -> object:
    from dp_accounting.pld import privacy_loss_distribution

    single = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        sensitivity=1.0,
        sampling_prob=sampling_rate,
        value_discretization_interval=value_discretization_interval,
        pessimistic_estimate=True,
    )
    return single.self_compose(steps)


def pld_tradeoff_tpr_at_fpr(
    fpr: float | np.ndarray,
    *,
    sampling_rate: float,
    steps: int,
    noise_multiplier: float,
    direction: Direction = "remove",
    value_discretization_interval: float = 1e-3,
    num_epsilons: int = 3001,
) -> np.ndarray:
    """The most TPR any test reaches at ``fpr`` on the T-fold subsampled Gaussian, from dp_accounting's PLD.

    World D gives P = N(0, z²)^⊗T, world D′ gives Q = ((1 − q)N(0, z²) + qN(1, z²))^⊗T. For every ε,
    any test has TPR ≤ e^ε·FPR + δ_{Q‖P}(ε), and the Neyman–Pearson test attains the infimum
    over ε ∈ ℝ, so TPR*(α) = inf_ε [δ_{Q‖P}(ε) + e^ε α], i.e. 1 − β(α) with
    β(α) = sup_ε [1 − δ(ε) − e^ε α] (the primal–dual relation between trade-off functions and privacy
    profiles, Dong, Roth & Su 2022; the inequality is the one behind Nasr et al. Eq. 4).

    - ``direction="remove"`` (default) uses the hockey-stick divergence δ_{Q‖P} alone: dp_accounting's
      REMOVE privacy-loss distribution has μ_upper = the mixture and μ_lower = N(0, z²), exactly our
      (Q, P). It is read from the PLD's ``_pmf_remove`` (dp_accounting 0.4.3), because the public
      ``get_delta_for_epsilon`` returns the maximum over the REMOVE and ADD directions. This is the
      exact curve up to the pessimistic discretisation (an upper estimate of δ, hence of TPR, by at
      most ~1e-5 at the default interval).
    - ``direction="both"`` uses the public δ(ε) = max(δ_REMOVE, δ_ADD) over ε ≥ 0 — the (ε, δ) profile
      an accountant reports for add/remove adjacency — and the two constraints it implies,
      TPR ≤ e^ε α + δ(ε) and TPR ≤ 1 − e^{−ε}(1 − α − δ(ε)). It is an upper envelope of the
      exact curve (equal to it when the REMOVE direction dominates).

    Returns an array of TPRs of ``fpr``'s shape. ε is searched on a grid of ``num_epsilons`` points and
    refined around the minimum; a grid can only overestimate the infimum, so the result stays an upper
    bound.
    """
    if direction not in ("remove", "both"):
        raise ValueError(f"direction must be 'remove' or 'both', got {direction!r}")
    alpha = np.atleast_1d(np.asarray(fpr, dtype=np.float64))
    if np.any((alpha < 0) | (alpha > 1)):
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    _check_mechanism(sampling_rate, noise_multiplier)
    pld = _composed_pld(sampling_rate, steps, noise_multiplier, value_discretization_interval)
    eps_top = float(pld.get_epsilon_for_delta(1e-14)) + 1.0
    if direction == "remove":
        pmf = pld._pmf_remove  # the REMOVE direction alone; see the docstring
        delta_of = pmf.get_delta_for_epsilon
        grid = np.linspace(-eps_top, eps_top, num_epsilons)
    else:
        delta_of = pld.get_delta_for_epsilon
        grid = np.linspace(0.0, eps_top, num_epsilons)

    def bound(eps: np.ndarray) -> np.ndarray:
        delta = np.asarray(delta_of(eps), dtype=np.float64)[None, :]
        scale = np.exp(eps)[None, :]
        a = alpha[:, None]
        tpr = delta + scale * a
        if direction == "both":
            tpr = np.minimum(tpr, 1.0 - (1.0 - a - delta) / scale)
        return tpr

    coarse = bound(grid)
    best = grid[np.argmin(coarse, axis=1)]
    step = grid[1] - grid[0]
    fine = np.unique(np.concatenate([np.linspace(b - step, b + step, 41) for b in best]))
    if direction == "both":
        fine = fine[fine >= 0]
    tpr = np.minimum(coarse.min(axis=1), bound(fine).min(axis=1))
    tpr = np.clip(tpr, alpha, 1.0)
    return tpr.reshape(np.shape(fpr))


def gaussian_tradeoff_tpr_at_fpr(fpr: float | np.ndarray, mu: float) -> np.ndarray:
    """TPR = Φ(Φ⁻¹(FPR) + μ) of the μ-GDP trade-off G_μ (Dong, Roth & Su 2022).

    For q = 1 the T-fold Gaussian mechanism with sensitivity C and noise z·C is exactly μ-GDP with
    μ = √T / z, which is what Distinguisher 3 must approach as the trial count grows.
    """
    return norm.cdf(norm.ppf(np.asarray(fpr, dtype=np.float64)) + mu)


def mc_tpr_at_fpr(scores_d: np.ndarray, scores_dprime: np.ndarray, fpr: float) -> float:
    """Empirical TPR of the threshold whose empirical FPR on world D is at most ``fpr``.

    The threshold is the ⌊fpr·N_D⌋-th largest D score, and a trial is called D′ when its score is
    strictly above it. Only for the PLD cross-check; audits go through the scores auditor.
    """
    null = np.sort(np.asarray(scores_d, dtype=np.float64))[::-1]
    allowed = int(np.floor(fpr * null.size))
    if allowed >= null.size:
        return 1.0
    return float(np.mean(np.asarray(scores_dprime) > null[allowed]))


@dataclass(frozen=True)
class PldAgreement:
    """One FPR of the Monte Carlo vs PLD comparison; ``z_score`` = (tpr_mc − tpr_pld)/std_error."""

    fpr: float
    tpr_mc: float
    tpr_pld: float
    std_error: float
    z_score: float


def compare_simulation_with_pld(
    scores_d: np.ndarray,
    scores_dprime: np.ndarray,
    fprs: np.ndarray | list[float],
    *,
    sampling_rate: float,
    steps: int,
    noise_multiplier: float,
    direction: Direction = "remove",
) -> list[PldAgreement]:
    """The simulated ROC of Λ against the PLD oracle at each FPR, with a Monte Carlo standard error.

    The error of the empirical TPR at an empirical threshold has two parts (delta method): the
    binomial error of the TPR, TPR(1 − TPR)/N_D′, and the threshold's error, f′(α)²·α(1 − α)/N_D,
    with f′ the slope of the oracle curve (a central difference at ±5 % of α).
    """
    alphas = np.asarray(fprs, dtype=np.float64)
    kwargs = {"sampling_rate": sampling_rate, "steps": steps, "noise_multiplier": noise_multiplier}
    probes = np.concatenate([alphas, alphas * 0.95, alphas * 1.05])
    oracle = pld_tradeoff_tpr_at_fpr(probes, direction=direction, **kwargs)
    tpr_pld, lower, upper = np.split(oracle, 3)
    slope = (upper - lower) / (0.1 * alphas)
    n_d, n_dp = np.size(scores_d), np.size(scores_dprime)
    result = []
    for alpha, pld_tpr, f_prime in zip(alphas, tpr_pld, slope, strict=True):
        tpr = mc_tpr_at_fpr(scores_d, scores_dprime, float(alpha))
        var = pld_tpr * (1 - pld_tpr) / n_dp + f_prime**2 * alpha * (1 - alpha) / n_d
        se = float(np.sqrt(var))
        result.append(PldAgreement(float(alpha), tpr, float(pld_tpr), se, (tpr - float(pld_tpr)) / se))
    return result
