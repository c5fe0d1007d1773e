"""The per-step family bound: coverage by Monte Carlo where z is known, tightness against the
Cramér–Rao limit, the null and noiseless limits, the baseline check and refused inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.bounds.accountants import calibrate_noise_multiplier, epsilon_pld
from dpaudit.bounds.stepwise import StepMoments, stepwise_family_bound
from dpaudit.bounds.tradeoff import SubsampledGaussian


class InverseZ:
    """A family whose ε(z) = 1/z: monotone, so ε coverage is z coverage, and no PLD is needed."""

    def __init__(self, q: float, steps: int = 100) -> None:
        self.sampling_rate, self.steps = q, steps

    def epsilon(self, noise_multiplier: float, delta: float) -> float:
        return 1.0 / noise_multiplier


def exact_audit(
    rng: np.random.Generator, q: float, z: float, count: int, shift: float = 1.0, baseline: float = 0.0
):
    """Sufficient statistics of ``count`` steps per world, drawn from their exact laws; ``baseline``
    is added to every step of both worlds. (D′'s sum of squares is not used by the bound.)"""
    k = rng.binomial(count, q)
    inserted = StepMoments(
        count, baseline * count + shift * k + z * math.sqrt(count) * rng.standard_normal(), 0.0
    )
    total = baseline * count + z * math.sqrt(count) * rng.standard_normal()
    absent = StepMoments(count, total, total * total / count + z * z * rng.chisquare(count - 1))
    return inserted, absent


@pytest.mark.parametrize(
    "q, z, count, baseline",
    [(0.1, 2.42, 20_000, 0.0), (0.1, 4.28, 1_000_000, 0.01), (0.5, 1.0, 500, -3.0)],
)
def test_the_bound_covers_the_true_noise_multiplier(q: float, z: float, count: int, baseline: float) -> None:
    """Whatever baseline both worlds share (0.01 is 2.3 standard errors of D's mean at 10⁶ steps)."""
    rng = np.random.default_rng([7, count])
    repeats = 1000
    misses = 0
    for _ in range(repeats):
        audit = exact_audit(rng, q, z, count, baseline=baseline)
        bound = stepwise_family_bound(*audit, InverseZ(q), delta=1e-5)
        misses += bound.noise_multiplier_upper < z
    # The stated level is 95 %: at most 5 % misses, up to 3 Monte Carlo standard errors.
    assert misses / repeats <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / repeats)


def test_at_ten_thousand_trials_it_reaches_the_cramer_rao_limit() -> None:
    """q = 0.1, T = 100, 10⁴ trials per world, z = 4.28 (ε = 1): with the baseline unknown, only world
    D's m₀ steps pin it, so the information about μ = 1/z from a pair of steps is ≈ q²/2 and no
    unbiased estimator's one-sided 95 % limit is above μ − 1.645·0.0096·√2, i.e. 0.904 μ; a bound with
    a tenth of its budget on σ reaches ≈ 0.897 μ on average."""
    rng = np.random.default_rng(3)
    z = 4.28
    ratios = [
        z
        / stepwise_family_bound(
            *exact_audit(rng, 0.1, z, 1_000_000), InverseZ(0.1), delta=1e-5
        ).noise_multiplier_upper
        for _ in range(300)
    ]
    assert 0.885 <= float(np.mean(ratios)) <= 0.905


def test_null_observations_give_zero() -> None:
    rng = np.random.default_rng(11)
    zeros = [
        stepwise_family_bound(
            *exact_audit(rng, 0.1, 1.0, 50_000, shift=0.0), InverseZ(0.1), delta=1e-5
        ).epsilon
        == 0.0
        for _ in range(400)
    ]
    assert np.mean(zeros) >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 400)


def test_from_per_step_arrays_with_the_real_family() -> None:
    """Arrays [trials, steps] as the trainer records them; ε from the optimistic PLD stays ≤ ε_PLD and
    the estimate lands near it (q = 0.1, T = 100, 2000 trials per world, ε = 4)."""
    q, steps, delta = 0.1, 100, 1e-5
    z = calibrate_noise_multiplier(4.0, delta, q, steps)
    rng = np.random.default_rng(5)
    absent = z * rng.standard_normal((2000, steps))
    inserted = z * rng.standard_normal((2000, steps)) + (rng.random((2000, steps)) < q)
    bound = stepwise_family_bound(
        StepMoments.of(inserted),
        StepMoments.of(absent),
        SubsampledGaussian(q, steps, epsilon_discretization=1e-4),
        delta=delta,
    )
    pld = epsilon_pld(z, q, steps, delta)
    assert 0.6 * pld < bound.epsilon <= pld
    assert bound.noise_multiplier_upper >= z
    assert abs(bound.epsilon_estimate / pld - 1) < 0.15
    assert abs(bound.baseline_z) < 4
    assert "Poisson-subsampled Gaussian (q=0.1)" in bound.label


def test_noiseless_release_is_infinite_and_a_baseline_is_measured() -> None:
    inserted = StepMoments.of(np.repeat([[0.0, 1.0, 0.0, 0.0, 1.0]], 40, axis=0))
    absent = StepMoments.of(np.zeros((40, 5)))
    assert stepwise_family_bound(inserted, absent, InverseZ(0.4, 5), delta=1e-5).epsilon == math.inf
    rng = np.random.default_rng(2)
    shifted = StepMoments.of(0.05 + rng.standard_normal((1000, 100)))
    assert stepwise_family_bound(inserted, shifted, InverseZ(0.4), delta=1e-5).baseline_z > 10


def test_a_baseline_shared_by_both_worlds_changes_nothing() -> None:
    """Adding b to every step of both worlds leaves the bound as it was (V and S are free of b), where
    assuming b = 0 would read b as canary shift. Here b is 5 standard errors of D's mean."""
    rng = np.random.default_rng(4)
    absent = 2.0 * rng.standard_normal((1000, 100))
    inserted = 2.0 * rng.standard_normal((1000, 100)) + (rng.random((1000, 100)) < 0.1)
    b = 5.0 * 2.0 / math.sqrt(absent.size)
    plain = stepwise_family_bound(StepMoments.of(inserted), StepMoments.of(absent), InverseZ(0.1), delta=1e-5)
    moved = stepwise_family_bound(
        StepMoments.of(inserted + b), StepMoments.of(absent + b), InverseZ(0.1), delta=1e-5
    )
    assert moved.noise_multiplier_upper == pytest.approx(plain.noise_multiplier_upper, rel=1e-6)
    assert moved.baseline_z == pytest.approx(plain.baseline_z + 5.0, abs=0.05)
    # By hand: σ_UB² = S / χ²_{0.005}(m₀ − 1) and Δ_LB ≈ (V − 1.695·σ_UB·√(2/m))/q (the binomial spread
    # of K adds a little), so z_UB is σ_UB/Δ_LB within a per cent.
    from scipy import stats

    m = absent.size
    sigma_upper = math.sqrt(((absent - absent.mean()) ** 2).sum() / stats.chi2.ppf(0.005, m - 1))
    margin = stats.norm.isf(0.045) * sigma_upper * math.sqrt(2 / m)
    shift_lower = (inserted.mean() - absent.mean() - margin) / 0.1
    assert plain.noise_upper == pytest.approx(sigma_upper, rel=1e-9)
    assert plain.noise_multiplier_upper == pytest.approx(sigma_upper / shift_lower, rel=0.01)


def test_moments_merge_and_bad_input_is_refused() -> None:
    a, b = StepMoments.of(np.array([1.0, 2.0])), StepMoments.of(np.array([[3.0]]))
    assert a + b == StepMoments(3, 6.0, 14.0)
    with pytest.raises(ValueError, match="finite"):
        StepMoments.of(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="both worlds"):
        stepwise_family_bound(StepMoments(0, 0.0, 0.0), a, InverseZ(0.1), delta=1e-5)
    with pytest.raises(ValueError, match="confidence"):
        stepwise_family_bound(a, a, InverseZ(0.1), delta=1e-5, confidence=1.0)


def test_a_mean_no_shift_explains_is_refused() -> None:
    """q·m₁ ≪ 1: P(K ≥ 1) < α, so a large D′ mean fits no Δ; the error says so instead of looping."""
    inserted = StepMoments(10, 50.0, 500.0)
    absent = StepMoments(10_000, 0.0, 10_000.0)
    with pytest.raises(ValueError, match="unlikely under the family"):
        stepwise_family_bound(inserted, absent, InverseZ(0.001), delta=1e-5)
