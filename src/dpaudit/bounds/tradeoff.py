"""Trade-off curves (type I vs type II error) of the mechanisms an audit may assume.

A test that tells M(D′) ("out") from M(D) ("in") with false-positive rate α (out called in) and
false-negative rate β (in called out) must satisfy β ≥ f(α), f the mechanism's trade-off curve
(Dong, Roth & Su 2022, Def. 2.1). Upper confidence limits (α_U, β_U) on a test's true rates then
lower-bound the mechanism's privacy loss:

* Gaussian trade-off G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (μ-GDP; Dong, Roth & Su 2022, Eq. 2.1): the
  smallest μ consistent with β_U ≥ G_μ(α_U) is μ_LB = Φ⁻¹(1 − α_U) − Φ⁻¹(β_U), and ε(δ) of μ-GDP
  follows from their Cor. 2.13 — the GDP audit of Nasr et al. 2023 ("Tight Auditing of
  Differentially Private Machine Learning", §4). Valid only where the mechanism's trade-off curve
  is Gaussian: the full-batch Gaussian mechanism (T steps of noise z: μ = √T/z).
* The Poisson-subsampled Gaussian composed T times (:class:`SubsampledGaussian`): its curve is read
  off dp_accounting's pessimistic privacy loss distribution (PLD). For a threshold t on the privacy
  loss ℓ = log(P/Q), α(t) = Σ_{ℓ_i ≥ t} p_i e^{−ℓ_i} and β(t) = Σ_{ℓ_i < t} p_i (Neyman–Pearson),
  linearly interpolated (randomised tests). The pessimistic PLD dominates the true pair, so this
  curve lies below the true one: a point it rules out is ruled out for the mechanism too.

Hand-written here: the two inversions and the NP sweep over a PLD's mass function (dp_accounting
exposes δ(ε) but not the trade-off curve; its dense pmf is read from the PLD object). Normal
quantiles come from scipy; PLDs from dp_accounting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.stats import norm

__all__ = [
    "TRADEOFF_DISCRETIZATION",
    "SubsampledGaussian",
    "gaussian_tradeoff",
    "gdp_epsilon",
    "gdp_mu_lower",
]

# Privacy-loss discretisation of the PLD behind the subsampled-Gaussian trade-off curve. Coarser is
# still valid (the PLD stays pessimistic, the curve only drops) and much faster: 0.3 s per noise
# multiplier at (q, T) = (0.1, 100) against 2.2 s at 1e-4.
TRADEOFF_DISCRETIZATION = 1e-3


def gaussian_tradeoff(alpha: np.ndarray | float, mu: float) -> np.ndarray:
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ): the trade-off curve of μ-GDP (Dong, Roth & Su 2022, Eq. 2.1)."""
    return norm.cdf(norm.isf(np.asarray(alpha, dtype=float)) - mu)


def gdp_mu_lower(fpr_upper: np.ndarray | float, fnr_upper: np.ndarray | float) -> np.ndarray:
    """μ_LB = max(0, Φ⁻¹(1 − α_U) − Φ⁻¹(β_U)): the smallest μ whose G_μ passes below (α_U, β_U).

    Nasr et al. 2023, §4 (GDP auditing): if the true rates satisfy α ≤ α_U, β ≤ β_U and the
    mechanism is μ-GDP, then β_U ≥ β ≥ G_μ(α) ≥ G_μ(α_U), i.e. μ ≥ μ_LB. G_μ is symmetric, so the
    swapped test gives the same formula. Vectorised; a limit of 1 gives 0.
    """
    a = np.asarray(fpr_upper, dtype=float)
    b = np.asarray(fnr_upper, dtype=float)
    with np.errstate(invalid="ignore"):
        mu = norm.isf(a) - norm.ppf(b)
    return np.where(np.isfinite(mu), np.maximum(mu, 0.0), np.where(mu > 0, np.inf, 0.0))


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε(δ) of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13; = the analytic Gaussian mechanism's curve).

    δ = 0: a μ-GDP mechanism with μ > 0 is not ε-DP for any finite ε, so ∞; μ = 0 gives 0.
    """
    from dpaudit.bounds.accountants import gaussian_epsilon

    if mu <= 0:
        return 0.0
    if delta <= 0:
        return math.inf
    if not math.isfinite(mu):
        return math.inf
    return gaussian_epsilon(mu, delta)


@lru_cache(maxsize=64)  # a curve can hold 10^5–10^6 points at small z: keep the cache bounded
def _pld_curves(
    noise_multiplier: float, sampling_rate: float, steps: int, discretization: float
) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(α, β) points of the NP tests on the privacy loss, for the remove and the add pair."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pld = pld_lib.from_gaussian_mechanism(
        noise_multiplier,
        sampling_prob=sampling_rate,
        value_discretization_interval=discretization,
        pessimistic_estimate=True,
    ).self_compose(steps)
    curves = []
    pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
    for pmf in pmfs:
        probs = np.asarray(pmf._probs, dtype=float)
        losses = (pmf._lower_loss + np.arange(probs.size)) * pmf._discretization
        # Test "in" when ℓ ≥ ℓ_i, sweeping i from the top: α = Q-mass above, β = P-mass below.
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            q_mass = np.where(probs > 0, np.exp(np.log(probs) - losses), 0.0)
        alpha = np.concatenate([[0.0], np.cumsum(q_mass[::-1])])
        beta_desc = 1.0 - pmf._infinity_mass - np.concatenate([[0.0], np.cumsum(probs[::-1])])
        alpha = np.minimum(np.append(alpha, 1.0), 1.0)
        beta = np.maximum(np.append(beta_desc, 0.0), 0.0)
        curves.append((alpha, beta))
    return tuple(curves)


@dataclass(frozen=True)
class SubsampledGaussian:
    """DP-SGD's mechanism family: T steps of the Gaussian mechanism on Poisson samples of rate q.

    Parametrised by the noise multiplier z (noise std / clipping norm). ``sampling_rate`` = 1 is
    full-batch training, whose curve is exactly Gaussian with μ = √T/z.
    """

    sampling_rate: float
    steps: int
    discretization: float = field(default=TRADEOFF_DISCRETIZATION)
    rtol: float = 0.01  # relative spacing of the noise-multiplier grid searched by noise_upper
    #: None: ε(z) from the accountants' refined optimistic PLD; a value: from one optimistic PLD on that
    #: grid (still an underestimate of ε, at a fraction of the cost: 0.1–0.5 s at 1e-4, q = 0.1, T = 100).
    epsilon_discretization: float | None = None

    def __post_init__(self) -> None:
        if not 0.0 < float(self.sampling_rate) <= 1.0:
            raise ValueError(f"sampling_rate must lie in (0, 1], got {self.sampling_rate!r}")
        if isinstance(self.steps, bool) or int(self.steps) != self.steps or self.steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {self.steps!r}")

    @property
    def label(self) -> str:
        return f"Poisson-subsampled Gaussian with q={self.sampling_rate:g}, T={int(self.steps)}"

    def tradeoff(self, alpha: np.ndarray | float, noise_multiplier: float) -> np.ndarray:
        """A lower bound on the mechanism's trade-off curve f_z(α), symmetrised over both neighbour
        relations (add and remove one record) — valid for either direction of the audit."""
        a = np.asarray(alpha, dtype=float)
        if self.sampling_rate >= 1.0:
            return gaussian_tradeoff(a, math.sqrt(self.steps) / noise_multiplier)
        values = []
        curves = _pld_curves(
            float(noise_multiplier), float(self.sampling_rate), int(self.steps), self.discretization
        )
        for xs, ys in curves:
            direct = np.interp(a, xs, ys)
            # The swapped pair (Q, P) has the inverse curve: β ≥ f⁻¹(α) ⇔ α ≥ f(β).
            inverse = np.interp(a, ys[::-1], xs[::-1])
            values.append(np.minimum(direct, inverse))
        return np.min(values, axis=0)

    def rules_out(self, fpr_upper: float, fnr_upper: float, noise_multiplier: float) -> bool:
        """True when no test against the mechanism with this z can have rates ≤ (α_U, β_U)."""
        return bool(fnr_upper < float(self.tradeoff(fpr_upper, noise_multiplier)))

    def noise_upper(
        self, fpr_upper: float, fnr_upper: float, z_min: float = 0.3, z_max: float = 1e4
    ) -> float:
        """z_UB: the smallest noise multiplier on a geometric grid (spacing ``rtol``) that (α_U, β_U)
        rules out; the mechanism's true z is at most z_UB (curves rise with z). A coarser grid only
        rounds z_UB up (ε down): still valid, and repeated audits share more cached curves.

        ∞ when even ``z_max`` is not ruled out; ``z_min`` when every z on the grid is (reporting
        ε(z_min) then stays a valid, if loose, bound: PLDs below z_min are slow and rarely needed).
        The search starts from the central-limit GDP fit μ ≈ q√T·√(e^{1/z²} − 1) (Dong, Roth & Su
        2022, Thm. 3.4's CLT for DP-SGD) and bisects on the grid, so that repeated audits share the
        cached curves.
        """
        if fpr_upper + fnr_upper >= 1.0:
            return math.inf
        mu = float(gdp_mu_lower(fpr_upper, fnr_upper))
        if self.sampling_rate >= 1.0:
            return math.sqrt(self.steps) / mu if mu > 0 else math.inf
        step = math.log1p(self.rtol)
        k_min, k_max = math.floor(math.log(z_min) / step), math.ceil(math.log(z_max) / step)
        ratio = mu / (self.sampling_rate * math.sqrt(self.steps))
        z0 = 1.0 / math.sqrt(math.log1p(ratio * ratio)) if ratio > 0 else z_max
        k0 = min(max(round(math.log(min(max(z0, z_min), z_max)) / step), k_min), k_max)

        def out(k: int) -> bool:
            return self.rules_out(fpr_upper, fnr_upper, math.exp(k * step))

        width = max(1, round(math.log(1.5) / step))
        hi = min(k0 + width, k_max)
        while not out(hi):  # grow until ruled out
            if hi == k_max:
                return math.inf
            hi = min(hi + 2 * (hi - k0) + width, k_max)
        lo = max(min(k0 - width, hi - 1), k_min)
        while out(lo):  # shrink until not ruled out
            if lo == k_min:
                return math.exp(k_min * step)
            hi, lo = lo, max(lo - 2 * width, k_min)
        while hi - lo > 1:  # invariant: lo not ruled out, hi ruled out
            mid = (lo + hi) // 2
            if out(mid):
                hi = mid
            else:
                lo = mid
        return math.exp(hi * step)

    def epsilon(self, noise_multiplier: float, delta: float) -> float:
        """ε(δ) of the mechanism at noise z from an optimistic PLD (so that a lower bound stays one)."""
        if not math.isfinite(noise_multiplier):
            return 0.0
        if delta <= 0:
            return math.inf
        if self.sampling_rate >= 1.0:  # exactly μ-GDP with μ = √T/z
            return gdp_epsilon(math.sqrt(self.steps) / noise_multiplier, delta)
        if self.epsilon_discretization is not None:
            return _one_grid_optimistic_epsilon(
                float(noise_multiplier), float(self.sampling_rate), int(self.steps), float(delta),
                float(self.epsilon_discretization),
            )  # fmt: skip
        return _optimistic_epsilon(
            float(noise_multiplier), float(self.sampling_rate), int(self.steps), float(delta)
        )


@lru_cache(maxsize=1024)
def _optimistic_epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    from dpaudit.bounds.accountants import epsilon_pld

    return epsilon_pld(noise_multiplier, sampling_rate, steps, delta, pessimistic=False)


@lru_cache(maxsize=256)
def _one_grid_optimistic_epsilon(
    noise_multiplier: float, sampling_rate: float, steps: int, delta: float, discretization: float
) -> float:
    """ε(δ) from dp_accounting's optimistic PLD on one grid: it underestimates ε by about
    T·grid/2 (q = 0.1, T = 100, z = 2.42: 1.765 at 1e-3, 1.810 at 1e-4, against 1.815 pessimistic).
    Where that exceeds 1 % of the value (strong noise: the grid rounds ε to 0 at z = 30, q = 0.01,
    T = 1000), the accountants' adaptive optimistic ε is taken if larger; both are lower bounds."""
    from dp_accounting.pld import privacy_loss_distribution

    from dpaudit.bounds.accountants import PLD_OPTIMISTIC_RTOL, epsilon_pld

    pld = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=noise_multiplier,
        sampling_prob=sampling_rate,
        value_discretization_interval=discretization,
        pessimistic_estimate=False,
        use_connect_dots=False,
    ).self_compose(steps)
    value = max(0.0, float(pld.get_epsilon_for_delta(delta)))
    if steps * discretization / 2.0 > PLD_OPTIMISTIC_RTOL * value:
        value = max(value, epsilon_pld(noise_multiplier, sampling_rate, steps, delta, pessimistic=False))
    return value
