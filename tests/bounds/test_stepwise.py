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


def exact_audit(rng: np.random.Generator, q: float, z: float, count: int, shift: float = 1.0):
    """Sufficient statistics of ``count`` steps per world, drawn from their exact laws."""
    k = rng.binomial(count, q)
    inserted = StepMoments(count, shift * k + z * math.sqrt(count) * rng.standard_normal(), 0.0)
    absent = StepMoments(count, 0.0, z * z * rng.chisquare(count))
    return inserted, absent


@pytest.mark.parametrize("q, z, count", [(0.1, 2.42, 20_000), (0.1, 4.28, 1_000_000), (0.5, 1.0, 500)])
def test_the_bound_covers_the_true_noise_multiplier(q: float, z: float, count: int) -> None:
    rng = np.random.default_rng([7, count])
    repeats = 1000
    misses = 0
    for _ in range(repeats):
        bound = stepwise_family_bound(*exact_audit(rng, q, z, count), InverseZ(q), delta=1e-5)
        misses += bound.noise_multiplier_upper < z
    # The stated level is 95 %: at most 5 % misses, up to 3 Monte Carlo standard errors.
    assert misses / repeats <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / repeats)


def test_at_ten_thousand_trials_it_reaches_the_cramer_rao_limit() -> None:
    """q = 0.1, T = 100, 10⁴ trials per world, z = 4.28 (ε = 1): the Fisher information of one step
    about μ = 1/z is ≈ q², so no unbiased estimator's one-sided 95 % limit is above μ − 1.645·0.0096,
    i.e. 0.932 μ; a bound with a tenth of its budget on σ reaches ≈ 0.926 μ on average."""
    rng = np.random.default_rng(3)
    z = 4.28
    ratios = [
        z
        / stepwise_family_bound(
            *exact_audit(rng, 0.1, z, 1_000_000), InverseZ(0.1), delta=1e-5
        ).noise_multiplier_upper
        for _ in range(300)
    ]
    assert 0.915 <= float(np.mean(ratios)) <= 0.935


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


def test_noiseless_release_is_infinite_and_a_baseline_shift_is_flagged() -> None:
    inserted = StepMoments.of(np.repeat([[0.0, 1.0, 0.0, 0.0, 1.0]], 40, axis=0))
    absent = StepMoments.of(np.zeros((40, 5)))
    assert stepwise_family_bound(inserted, absent, InverseZ(0.4, 5), delta=1e-5).epsilon == math.inf
    rng = np.random.default_rng(2)
    shifted = StepMoments.of(0.05 + rng.standard_normal((1000, 100)))
    assert stepwise_family_bound(inserted, shifted, InverseZ(0.4), delta=1e-5).baseline_z > 10


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
