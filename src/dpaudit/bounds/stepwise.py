"""A family bound from every step's release: the subsampled Gaussian's shift-to-noise ratio, bounded.

When the audit sees each step's privatized sum projected on a gradient canary's direction (Nasr et al.
2021 §IV-E/F, threat models E and F), the mechanism family it assumes fixes the law of every
observation, not only a trade-off curve. Per step, independently over steps and trials,

    world D:  d = σ·ξ,        world D′:  d = Δ·B + σ·ξ,   B ~ Bernoulli(q), ξ ~ N(0, 1),

the Poisson-subsampled Gaussian mechanism with sensitivity Δ and noise σ, i.e. noise multiplier
z = σ/Δ (DP-SGD's own step when the other records contribute nothing on the canary coordinates, exact
for Crafter 5's malicious dataset at learning rate 0). A threshold on a whole-trial score keeps one
point of the ROC and pays the Clopper–Pearson width there; this bound instead estimates (σ, Δ) from all
n·T observations, which at 10⁴ trials per world reaches within a few per cent of the Cramér–Rao limit:

- σ_UB: Σ_D d² / σ² ~ χ²(m₀) exactly, so σ²_UB = Σ_D d² / χ²_{α₁}(m₀) (lower α₁ quantile).
- Δ_LB: the mean of world D′'s m₁ observations is W = (Δ·K + σ·√m₁·ξ)/m₁ with K ~ Binomial(m₁, q).
  Its upper tail under (Δ, σ) for any σ ≤ σ_UB is at most
  G(w; Δ) = Σ_k P(K = k)·[Φ̄((w − Δk/m₁)·√m₁/σ_UB) if w > Δk/m₁ else 1]
  (each term rises with σ where w > Δk/m₁ and is at most 1 elsewhere), and G rises with Δ. A value
  Δ with G(W_obs; Δ) ≤ α₂ is rejected; Δ_LB is the root of G(W_obs; Δ) = α₂ (0 if Δ = 0 is kept).
- z_UB = σ_UB/Δ_LB, and ε_LB = ε(z_UB) of the T-fold composition from the caller's family (an
  *optimistic* PLD, so that ε is not overstated). Both limits hold jointly at 1 − α₁ − α₂ = c
  (Bonferroni); σ is pinned by m₀ ≥ 10⁴ draws, so it gets only a tenth of the error budget.

Exact in finite samples under the family; nothing in it is asymptotic. Also reported: the point
estimate (σ̂/Δ̂ and its ε, an estimate, never a bound) and world D's standardised mean, a check of the
family's zero baseline (|value| ≫ 3 says the other records do reach the canary coordinates and the
assumption fails).

Hand-written: no maintained library bounds the parameters of a Bernoulli-shifted Gaussian; the
binomial pmf, normal tails and χ² quantiles come from scipy, ε(z) from dp_accounting via the family.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import optimize, stats

__all__ = ["NOISE_SHARE", "StepMoments", "StepwiseBound", "stepwise_family_bound"]

#: Share of the error budget 1 − c spent on σ_UB (the rest bounds Δ).
NOISE_SHARE = 0.1


class Family(Protocol):
    """What the bound needs of the assumed mechanism family (e.g. :class:`~.tradeoff.SubsampledGaussian`)."""

    sampling_rate: float
    steps: int

    def epsilon(self, noise_multiplier: float, delta: float) -> float: ...


@dataclass(frozen=True)
class StepMoments:
    """Sufficient statistics of one world's per-step observations: count, Σ d and Σ d²."""

    count: int
    total: float
    total_squares: float

    @classmethod
    def of(cls, values: np.ndarray) -> StepMoments:
        """Moments of every entry of ``values`` (any shape, e.g. ``[trials, steps]``)."""
        v = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(v)):
            raise ValueError("step observations must be finite")
        return cls(int(v.size), float(v.sum()), float(np.square(v).sum()))

    def __add__(self, other: StepMoments) -> StepMoments:
        return StepMoments(
            self.count + other.count, self.total + other.total, self.total_squares + other.total_squares
        )

    @property
    def mean(self) -> float:
        return self.total / self.count


@dataclass(frozen=True)
class StepwiseBound:
    """:func:`stepwise_family_bound`'s result; ``epsilon`` is the bound, ``epsilon_estimate`` is not."""

    epsilon: float
    noise_multiplier_upper: float  # z_UB = σ_UB / Δ_LB (∞ when Δ_LB = 0)
    noise_upper: float  # σ_UB
    shift_lower: float  # Δ_LB
    epsilon_estimate: float  # ε(σ̂/Δ̂): a point estimate
    noise_multiplier_estimate: float
    baseline_z: float  # world D's mean in standard errors (0 under the family)
    confidence: float
    label: str


def _tail_upper(
    w: float, shift: float, sd: float, count: int, ks: np.ndarray, pmf: np.ndarray, top: float
) -> float:
    """G(w; Δ) of the module docstring: an upper bound on P(W ≥ w) over every σ ≤ σ_UB. ``pmf`` covers
    ``ks`` (with the mass below them at ``ks[0]``, where the term is larger); ``top``, the mass above
    them, counts in full."""
    centres = shift * ks / count
    if sd > 0:
        terms = np.where(w > centres, stats.norm.sf((w - centres) / max(sd, 1e-300)), 1.0)
    else:
        terms = (w <= centres).astype(float)
    return float(np.dot(pmf, terms)) + top


def _epsilon(family: Family, noise_multiplier: float, delta: float) -> float:
    """ε(z) of the family; 0 for z = ∞ (no shift), ∞ for z = 0 (no noise)."""
    if not math.isfinite(noise_multiplier):
        return 0.0
    if noise_multiplier <= 0:
        return math.inf
    return float(family.epsilon(noise_multiplier, delta))


def stepwise_family_bound(
    inserted: StepMoments,
    absent: StepMoments,
    family: Family,
    *,
    delta: float,
    confidence: float = 0.95,
    noise_share: float = NOISE_SHARE,
) -> StepwiseBound:
    """ε lower bound of the subsampled-Gaussian family from world D′'s (``inserted``) and world D's
    (``absent``) per-step canary observations; see the module docstring for the construction.

    ``family`` gives q, the T of the composition ε refers to (the steps each trial observes) and an ε(z)
    that does not overstate ε. Holds at the joint level ``confidence`` if the observations follow the
    family.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if not 0 < noise_share < 1:
        raise ValueError(f"noise_share must lie in (0, 1), got {noise_share!r}")
    if inserted.count < 1 or absent.count < 2:
        raise ValueError(
            f"need observations in both worlds, got {inserted.count} (D′) and {absent.count} (D)"
        )
    q = float(family.sampling_rate)
    alpha = 1.0 - confidence
    alpha_noise, alpha_shift = noise_share * alpha, (1.0 - noise_share) * alpha
    m0, m1 = absent.count, inserted.count
    sigma_hat = math.sqrt(absent.total_squares / m0)
    sigma_upper = math.sqrt(absent.total_squares / stats.chi2.ppf(alpha_noise, m0))
    baseline_z = absent.mean / (sigma_hat / math.sqrt(m0)) if sigma_hat > 0 else 0.0
    w = inserted.mean
    shift_hat = max(w / q, 0.0)
    z_hat = sigma_hat / shift_hat if shift_hat > 0 else math.inf
    label = (
        f"{family.steps} steps of the Poisson-subsampled Gaussian (q={q:g}) observed per step: "
        "Δ·Bernoulli(q) + N(0, σ²) in D′, N(0, σ²) in D, σ and Δ unknown"
    )
    sd = sigma_upper / math.sqrt(m1)
    spread = 12.0 * math.sqrt(m1 * q * (1.0 - q)) + 12.0
    ks = np.arange(max(0, math.floor(m1 * q - spread)), min(m1, math.ceil(m1 * q + spread)) + 1)
    pmf = stats.binom.pmf(ks, m1, q)
    pmf[0] += stats.binom.cdf(ks[0] - 1, m1, q)
    top = float(stats.binom.sf(ks[-1], m1, q))

    def excess(shift: float) -> float:
        return _tail_upper(w, shift, sd, m1, ks, pmf, top) - alpha_shift

    shift_lower = 0.0
    if excess(0.0) < 0:
        hi = max(shift_hat, sd / q, 1e-12)
        for _ in range(200):
            if excess(hi) >= 0:
                break
            hi *= 2.0
        else:  # only when D′ holds so few expected insertions (m₁q ≪ 1) that no shift explains its mean
            raise ValueError(
                f"world D′'s mean {w:.4g} over {m1} steps is unlikely under the family at any shift "
                f"(q = {q:g}): too few observations, or not the assumed mechanism"
            )
        shift_lower = float(optimize.brentq(excess, 0.0, hi, xtol=1e-10 * hi, rtol=1e-10))
    z_upper = sigma_upper / shift_lower if shift_lower > 0 else math.inf
    return StepwiseBound(
        epsilon=_epsilon(family, z_upper, delta),
        noise_multiplier_upper=z_upper,
        noise_upper=sigma_upper,
        shift_lower=shift_lower,
        epsilon_estimate=_epsilon(family, z_hat, delta),
        noise_multiplier_estimate=z_hat,
        baseline_z=float(baseline_z),
        confidence=confidence,
        label=label,
    )
