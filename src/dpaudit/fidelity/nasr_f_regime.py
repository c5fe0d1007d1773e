"""Threat model F of Nasr et al. 2021 in the paper's own regime: what Eq. 5 can certify, and why.

Nasr et al. 2021 (:data:`dpaudit.references.NASR_2021`, §IV-F) audit the malicious-dataset attack on
MNIST (Poisson rate q = 256/60000, 60 epochs, so T = 60·60000/256 steps; z calibrated by RDP) with
Distinguisher 3 and the Clopper–Pearson threshold sweep of their Eqs. 4–5. On the ideal mechanism
(Crafter 5 at learning rate 0) Distinguisher 3 is the Neyman–Pearson test of the Poisson-subsampled
Gaussian (:mod:`dpaudit.attacks.gradient_canary`), so its score has a law we can compute:

- :func:`simulate_distinguisher3`: the Monte Carlo of :func:`dpaudit.attacks.gradient_canary.
  simulate_subsampled_gaussian`, drawn in blocks (integer seeds derived from the seed and the block)
  and, inside each block, chunks whose size keeps an array at ≈ 32 MB whatever T is.
- :func:`exact_law`: the score's exact law in both worlds from dp_accounting's privacy-loss
  distribution. Its REMOVE pmf is the law of the privacy loss ℓ under world D′ (the mixture); world
  D's mass at ℓ is that mass times e^{−ℓ}. Thresholding Λ is thresholding ℓ, so every threshold's
  (FPR, FNR) is a pair of tail sums, taken from the small end of each so that rates of 10⁻¹² keep
  their digits. The pessimistic grid rounds losses up: a slightly MORE distinguishable law, i.e. a
  ceiling that errs high.
- :func:`eq5_ceiling`: the plug-in ceiling of the Eq. 5 sweep at N trials per world: the sweep's
  value if the counts at every threshold were exactly N·FPR and N·FNR (Clopper–Pearson limits at
  non-integer counts are Beta quantiles all the same), maximised over every threshold of the law.
  An oracle threshold (no Bonferroni) is the most generous reading of the estimator.
- :func:`eq5_simulated_audits`: whole audits drawn from the exact law (multinomial counts over the
  law's support), the Eq. 5 sweep over every support point at a given per-limit level; their
  distribution, not only the plug-in value.

Why hand-written: no library evaluates a Clopper–Pearson sweep on an exact law; the law itself
comes from dp_accounting, the Clopper–Pearson limits and Eq. 4 from :mod:`dpaudit.bounds.empirical`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from tqdm import tqdm

from dpaudit.attacks.gradient_canary import SimulatedGame, simulate_subsampled_gaussian
from dpaudit.bounds.empirical import clopper_pearson_upper, epsilon_from_rates
from dpaudit.scores import StepMoments

__all__ = [
    "MNIST_TRAIN_SIZE",
    "PAPER_BATCH",
    "PAPER_EPOCHS",
    "ExactLaw",
    "Regime",
    "bonferroni_level",
    "eq5_ceiling",
    "eq5_simulated_audits",
    "exact_law",
    "gaussian_law",
    "paper_regime",
    "simulate_distinguisher3",
]

#: Nasr et al. 2021 Appendix A (hyper-parameters; Fig. 10): MNIST, batch 256 of 60000, 60 epochs.
MNIST_TRAIN_SIZE = 60_000
PAPER_BATCH = 256
PAPER_EPOCHS = 60
#: Elements of one simulated [chunk, steps] array (≈ 32 MB in float64).
CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class Regime:
    """A DP-SGD setting: Poisson rate q, T steps, the (ε, δ) it is calibrated to and its noise z."""

    sampling_rate: float
    steps: int
    epsilon: float
    delta: float
    noise_multiplier: float

    @classmethod
    def calibrated(cls, sampling_rate: float, steps: int, epsilon: float, delta: float) -> Regime:
        """z calibrated by RDP (the paper's accountant, Appendix A) to reach ``epsilon`` at ``delta``."""
        from dpaudit.bounds.accountants import calibrate_noise_multiplier

        z = calibrate_noise_multiplier(epsilon, delta, sampling_rate, steps, "rdp")
        return cls(float(sampling_rate), int(steps), float(epsilon), float(delta), float(z))

    def epsilon_pld(self) -> float:
        """ε of the calibrated mechanism under dp_accounting's (pessimistic) PLD: the tight value."""
        from dpaudit.bounds.accountants import epsilon_pld

        return float(epsilon_pld(self.noise_multiplier, self.sampling_rate, self.steps, self.delta))


def paper_regime(epsilon: float = 4.0, delta: float = 1e-5) -> Regime:
    """The paper's MNIST regime: q = 256/60000, T = ⌊60 · 60000/256⌋ = 14062, z by RDP."""
    q = PAPER_BATCH / MNIST_TRAIN_SIZE
    steps = PAPER_EPOCHS * MNIST_TRAIN_SIZE // PAPER_BATCH
    return Regime.calibrated(q, steps, epsilon, delta)


def _block_seed(seed: int, block: int) -> int:
    """An integer seed for block ``block`` derived from the integers (seed, block) alone."""
    return int(np.random.SeedSequence([int(seed), int(block)]).generate_state(1, dtype=np.uint32)[0])


def simulate_distinguisher3(
    trials_per_world: int,
    *,
    sampling_rate: float,
    steps: int,
    noise_multiplier: float,
    seed: int,
    block: int = 10_000,
    progress: bool = False,
) -> SimulatedGame:
    """Distinguisher 3's score Λ in both worlds on the ideal subsampled Gaussian, in bounded memory.

    Blocks of ``block`` trials per world go through
    :func:`~dpaudit.attacks.gradient_canary.simulate_subsampled_gaussian` (its scoring, its moments)
    with a chunk of ⌊2²²/T⌋ trials, so 10⁵ trials at T = 14062 never hold more than ≈ 100 MB; block
    b draws from the integer seed derived from (seed, b). Returns the concatenated scores and the
    summed per-step moments.
    """
    if trials_per_world < 1 or block < 1:
        raise ValueError(f"trials_per_world and block must be >= 1, got {trials_per_world}, {block}")
    chunk = max(1, CHUNK_ELEMENTS // int(steps))
    scores_d, scores_dp = [], []
    moments_d, moments_dp = StepMoments(0, 0.0, 0.0), StepMoments(0, 0.0, 0.0)
    starts = range(0, trials_per_world, block)
    for b, start in enumerate(tqdm(starts, desc="Distinguisher 3 blocks", disable=not progress)):
        game = simulate_subsampled_gaussian(
            min(block, trials_per_world - start), sampling_rate=sampling_rate, steps=steps,
            noise_multiplier=noise_multiplier, seed=_block_seed(seed, b), chunk=chunk,
        )  # fmt: skip
        scores_d.append(game.scores_d)
        scores_dp.append(game.scores_dprime)
        moments_d, moments_dp = moments_d + game.steps_d, moments_dp + game.steps_dprime
    return SimulatedGame(np.concatenate(scores_d), np.concatenate(scores_dp), moments_d, moments_dp)


@dataclass(frozen=True)
class ExactLaw:
    """A score's law in both worlds on a finite support, thresholds ascending.

    ``mass_d``/``mass_dprime``: the probability of each support point under world D / D′ (the D′
    mass may have a part at +∞, ``top_dprime``, above every point). A trial is called D′ when its
    score is ≥ the threshold, so at support point i: FPR_i = Σ_{j ≥ i} mass_d, FNR_i = Σ_{j < i}
    mass_dprime; :attr:`fpr`, :attr:`fnr` and :attr:`tpr` sum from the small end.
    """

    support: np.ndarray
    mass_d: np.ndarray
    mass_dprime: np.ndarray
    top_dprime: float = 0.0

    @property
    def fpr(self) -> np.ndarray:
        return np.cumsum(self.mass_d[::-1])[::-1]

    @property
    def fnr(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(self.mass_dprime)[:-1]])

    @property
    def tpr(self) -> np.ndarray:
        return np.cumsum(self.mass_dprime[::-1])[::-1] + self.top_dprime

    def coarsened(self, max_points: int) -> ExactLaw:
        """The law on at most ``max_points`` groups of adjacent support points (fewer thresholds:
        every remaining threshold's rates are exact, the sweep only loses the ones dropped)."""
        n = self.support.size
        if n <= max_points:
            return self
        edges = np.unique(np.linspace(0, n, max_points + 1).round().astype(int))[:-1]
        return ExactLaw(
            self.support[edges],
            np.add.reduceat(self.mass_d, edges),
            np.add.reduceat(self.mass_dprime, edges),
            self.top_dprime,
        )


def exact_law(
    sampling_rate: float, steps: int, noise_multiplier: float, *, discretization: float = 1e-3
) -> ExactLaw:
    """Distinguisher 3's exact law on the T-fold Poisson-subsampled Gaussian (dp_accounting's PLD).

    The support is the privacy loss ℓ (Λ up to the grid); D′ mass = the REMOVE pmf (pessimistic, so
    losses round up), D mass = that times e^{−ℓ}, renormalised where the grid leaves D short of 1.
    """
    from dp_accounting.pld import privacy_loss_distribution

    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=float(noise_multiplier),
        sensitivity=1.0,
        sampling_prob=float(sampling_rate),
        value_discretization_interval=float(discretization),
        pessimistic_estimate=True,
    ).self_compose(int(steps))
    pmf = pld._pmf_remove  # REMOVE alone: μ_upper = the mixture (D′), μ_lower = N(0, z²) (D)
    probs = np.asarray(pmf._probs, dtype=np.float64)
    losses = (pmf._lower_loss + np.arange(probs.size)) * pmf._discretization
    keep = probs > 0
    probs, losses = probs[keep], losses[keep]
    mass_d = np.exp(np.log(probs) - losses)
    mass_d /= mass_d.sum()  # the pessimistic grid leaves D's total a hair below 1
    return ExactLaw(losses, mass_d, probs, float(pmf._infinity_mass))


def gaussian_law(mu: float, thresholds: np.ndarray) -> ExactLaw:
    """The μ-GDP law (D: N(0, 1), D′: N(μ, 1)) cut at ascending ``thresholds`` (a point at −∞ first):
    at threshold t, FPR = Φ̄(t) and FNR = Φ(t − μ) exactly."""
    s = np.concatenate([[-np.inf], np.asarray(thresholds, dtype=np.float64)])
    sf_d = np.append(norm.sf(s), 0.0)
    cdf_dp = np.append(norm.cdf(s - mu), 1.0)
    return ExactLaw(s, sf_d[:-1] - sf_d[1:], cdf_dp[1:] - cdf_dp[:-1], 0.0)


@dataclass(frozen=True)
class Ceiling:
    """:func:`eq5_ceiling`'s value and the true rates at the threshold that attains it."""

    epsilon: float
    fpr: float
    fnr: float
    per_world: int
    limit_level: float


def eq5_ceiling(law: ExactLaw, per_world: int, delta: float, limit_level: float = 0.975) -> Ceiling:
    """The Eq. 5 sweep at N = ``per_world`` trials per world if its counts were exactly N·FPR, N·FNR.

    max over the law's thresholds of Eq. 4 (:func:`~dpaudit.bounds.empirical.epsilon_from_rates`) on
    the one-sided Clopper–Pearson limits at ``limit_level`` (0.975: a threshold fixed in advance at a
    joint 95 %; the Bonferroni sweep over K thresholds uses 1 − 0.05/(2K)). Both Eq. 4 expressions
    count, so thresholds at either end of the curve compete.
    """
    n = int(per_world)
    fpr, fnr = law.fpr, law.fnr
    fpr_u = clopper_pearson_upper(np.minimum(fpr * n, n), n, limit_level)
    fnr_u = clopper_pearson_upper(np.minimum(fnr * n, n), n, limit_level)
    values = epsilon_from_rates(fpr_u, fnr_u, delta)
    if np.any(np.isnan(values)):
        raise ValueError(f"Clopper–Pearson limits failed at N = {n} (scipy's Beta quantile returned NaN)")
    best = int(np.argmax(values))
    return Ceiling(float(values[best]), float(fpr[best]), float(fnr[best]), n, float(limit_level))


def eq5_simulated_audits(
    law: ExactLaw,
    per_world: int,
    delta: float,
    limit_levels: dict[str, float],
    *,
    audits: int,
    seed: int,
    max_points: int = 4000,
) -> dict[str, np.ndarray]:
    """``audits`` Eq. 5 sweeps on N = ``per_world`` trials per world drawn from ``law``.

    Each audit draws multinomial counts over the (coarsened) support in both worlds and takes the
    largest Eq. 4 value on Clopper–Pearson limits at each named per-limit level (e.g. ``"naive"``:
    0.975, ``"bonferroni"``: 1 − 0.05/(2K)) over every support point — more thresholds than a
    sweep over observed scores can try, so this favours the estimator. Seeds: integers
    (seed, audit). Returns level name → ``[audits]`` values.
    """
    small = law.coarsened(max_points)
    p_d = np.append(small.mass_d, 0.0)
    p_dp = np.append(small.mass_dprime, small.top_dprime)
    p_d, p_dp = p_d / p_d.sum(), p_dp / p_dp.sum()
    out = {name: np.empty(audits) for name in limit_levels}
    for a in range(audits):
        rng = np.random.default_rng([int(seed), int(a)])
        c_d, c_dp = rng.multinomial(per_world, p_d), rng.multinomial(per_world, p_dp)
        fp = np.cumsum(c_d[::-1])[::-1][:-1]
        fn = np.concatenate([[0], np.cumsum(c_dp)[:-2]])
        for name, level in limit_levels.items():
            fpr_u = clopper_pearson_upper(fp, per_world, level)
            fnr_u = clopper_pearson_upper(fn, per_world, level)
            out[name][a] = float(np.max(epsilon_from_rates(fpr_u, fnr_u, delta)))
    return out


def bonferroni_level(thresholds: int, confidence: float = 0.95) -> float:
    """Per-limit level of the Bonferroni sweep: 1 − (1 − c)/(2K) (:func:`dpaudit.bounds.empirical.
    limit_level` with 2K limits)."""
    from dpaudit.bounds.empirical import limit_level

    return limit_level(confidence, 2 * int(thresholds))
