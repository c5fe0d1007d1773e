"""Accountants: agreement with TF Privacy, ordering of the four bounds, monotonicity, calibration."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from dpaudit.bounds import accountants as acc
from dpaudit.training import accounting as training_accounting

# (noise multiplier, sampling rate, steps, delta)
SETTINGS = [
    (1.1, 0.01, 1000, 1e-5),  # Abadi et al.-style minibatch training
    (0.8, 0.05, 200, 1e-5),
    (2.0, 1.0, 30, 1e-3),  # full batch, as in Bernau et al.
    (4.0, 0.2, 50, 1e-4),
]


@pytest.fixture(scope="module")
def tf_privacy_statement():
    lib = pytest.importorskip("tensorflow_privacy.privacy.analysis.compute_dp_sgd_privacy_lib")
    return lib.compute_dp_sgd_privacy_statement


def _statement_epsilons(text: str) -> tuple[float, float]:
    once = re.search(r"occurring once per epoch:\s+([0-9.]+)", text)
    poisson = re.search(r"assuming Poisson sampling \(\*\):\s+([0-9.]+)", text)
    assert once and poisson, text
    return float(once.group(1)), float(poisson.group(1))


@pytest.mark.parametrize(
    ("n", "batch", "epochs", "z", "delta"),
    [(1000, 10, 2, 1.1, 1e-5), (60000, 256, 5, 1.3, 1e-5), (500, 500, 30, 2.0, 1e-3)],
)
def test_rdp_matches_tf_privacy_statement(tf_privacy_statement, n, batch, epochs, z, delta):
    text = tf_privacy_statement(n, batch, epochs, z, delta, used_microbatching=False)
    once, poisson = _statement_epsilons(text)
    q = batch / n
    # TF Privacy composes ceil(epochs / q) Poisson-sampled Gaussian steps, and ceil(epochs) plain ones.
    assert acc.compute_epsilon(z, q, math.ceil(epochs / q), delta, "rdp") == pytest.approx(poisson, abs=6e-4)
    assert acc.compute_epsilon(z, 1.0, math.ceil(epochs), delta, "rdp") == pytest.approx(once, abs=6e-4)


def test_pld_matches_tf_privacy_statement(tf_privacy_statement):
    from tensorflow_privacy.privacy.analysis.compute_dp_sgd_privacy_lib import AccountantType

    text = tf_privacy_statement(
        1000, 10, 2, 1.1, 1e-5, used_microbatching=False, accountant_type=AccountantType.PLD
    )
    _, poisson = _statement_epsilons(text)
    # Same events; TF Privacy discretises the loss at 1e-4, we at 1e-3 (pessimistic, so ours is ≥).
    ours = acc.compute_epsilon(1.1, 0.01, 200, 1e-5, "pld")
    assert poisson - 6e-4 <= ours <= poisson + 5e-3


@pytest.mark.parametrize("setting", SETTINGS)
def test_accountant_ordering(setting):
    eps = acc.all_epsilons(*setting)
    assert set(eps) == set(acc.ACCOUNTANTS)
    assert all(np.isfinite(v) and v > 0 for v in eps.values())
    assert eps["pld"] <= eps["rdp"] + 1e-2
    assert max(eps["rdp"], eps["pld"]) <= min(eps["naive"], eps["advanced"])


def test_abadi_setting_numbers():
    # z = 1.1, q = 0.01, 1000 steps (10 epochs), δ = 1e-5: RDP gives about 1.71 (TF Privacy tutorials).
    eps = acc.all_epsilons(1.1, 0.01, 1000, 1e-5)
    assert eps["rdp"] == pytest.approx(1.712, abs=2e-3)
    assert eps["pld"] == pytest.approx(1.516, abs=5e-3)


def test_full_batch_pld_is_exact_gaussian():
    # T full-batch Gaussian steps with multiplier z are one Gaussian with sensitivity/σ = √T / z, whose
    # exact ε(δ) is the analytic Gaussian curve (Balle & Wang 2018); PLD must agree, RDP is looser.
    z, steps, delta = 1.0, 30, 1e-5
    exact = acc.gaussian_epsilon(math.sqrt(steps) / z, delta)
    assert exact == pytest.approx(37.6225, abs=1e-3)
    assert acc.compute_epsilon(z, 1.0, steps, delta, "pld") == pytest.approx(exact, rel=1e-4)
    assert acc.compute_epsilon(z, 1.0, steps, delta, "rdp") > exact


def test_gaussian_curve_closed_form():
    # δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2); at ε = 0 it is 2Φ(μ/2) − 1 (total variation).
    from scipy.stats import norm

    assert acc.gaussian_delta(0.0, 1.0) == pytest.approx(2 * norm.cdf(0.5) - 1)
    assert acc.gaussian_delta(1.0, 1.0) == pytest.approx(norm.cdf(-0.5) - math.e * norm.cdf(-1.5))
    eps = acc.gaussian_epsilon(1.0, 1e-5)
    assert acc.gaussian_delta(eps, 1.0) == pytest.approx(1e-5, rel=1e-8)


def test_gaussian_curve_has_scipy_stats_bits_and_survives_large_epsilon():
    """The curve calls scipy.special's ndtr/log_ndtr directly; they must give norm.cdf/logcdf's bits."""
    from scipy.stats import norm

    for mu in (0.05, 0.7, 3.0, 25.0):
        for eps in (0.0, 0.3, 2.0, 40.0, 800.0):
            a = -eps / mu
            log_cdf = float(norm.logcdf(a - mu / 2))
            second = 0.0 if log_cdf == -math.inf else math.exp(eps + log_cdf)
            assert acc.gaussian_delta(eps, mu) == max(0.0, float(norm.cdf(a + mu / 2)) - second), (mu, eps)
    assert acc.gaussian_delta(800.0, 3.0) == 0.0  # e^800 Φ(·) in log space: no overflow, no NaN


def test_naive_single_step_is_analytic_gaussian():
    assert acc.epsilon_naive(2.0, 1.0, 1, 1e-5) == pytest.approx(acc.gaussian_epsilon(0.5, 1e-5))
    # T steps at δ/T each, then amplified: log(1 + q(e^{ε0} − 1)) per step.
    z, q, steps, delta = 1.5, 0.1, 40, 1e-5
    eps0 = acc.gaussian_epsilon(1 / z, delta / (steps * q))
    assert acc.epsilon_naive(z, q, steps, delta) == pytest.approx(steps * math.log1p(q * math.expm1(eps0)))


def test_amplification_formula():
    eps, delta = acc.amplify_by_subsampling(1.0, 1e-5, 0.01)
    assert eps == pytest.approx(math.log(1 + 0.01 * (math.e - 1)))
    assert delta == pytest.approx(1e-7)


def test_advanced_optimises_delta_split():
    z, q, steps, delta = 3.0, 0.01, 10_000, 1e-5

    def drv(fraction: float) -> float:
        eps_step, _ = acc.per_step_epsilon(z, q, (1 - fraction) * delta / (steps * q))
        slack = fraction * delta
        return math.sqrt(2 * steps * math.log(1 / slack)) * eps_step + steps * eps_step * math.expm1(eps_step)

    brute = min(drv(f) for f in np.linspace(0.001, 0.999, 199))
    got = acc.epsilon_advanced(z, q, steps, delta)
    assert got <= brute + 1e-9
    assert got == pytest.approx(brute, rel=1e-3)
    assert got < acc.epsilon_naive(z, q, steps, delta)  # many small steps: advanced beats naive here


@pytest.mark.parametrize("name", acc.ACCOUNTANTS)
def test_monotone_in_noise(name):
    zs = [0.7, 1.0, 1.5, 3.0]
    eps = [acc.compute_epsilon(z, 0.02, 100, 1e-5, name) for z in zs]
    assert all(a > b for a, b in itertools.pairwise(eps)), eps


@pytest.mark.parametrize(
    ("name", "q", "steps"),
    [("rdp", 0.02, 300), ("rdp", 1.0, 30), ("naive", 0.1, 50), ("advanced", 0.01, 1000), ("pld", 0.05, 100)],
)
def test_calibration_round_trip(name, q, steps):
    target, delta = 3.0, 1e-5
    z = acc.calibrate_noise_multiplier(target, delta, q, steps, name)
    eps = acc.compute_epsilon(z, q, steps, delta, name)
    assert eps <= target
    assert eps == pytest.approx(target, rel=2e-3)
    assert acc.compute_epsilon(z * 0.995, q, steps, delta, name) > target - 1e-9


def test_heterogeneous_matches_constant_and_gaussian_sum():
    delta = 1e-3
    assert acc.epsilon_rdp_heterogeneous([2.0] * 30, delta) == pytest.approx(
        acc.compute_epsilon(2.0, 1.0, 30, delta)
    )
    assert acc.epsilon_rdp_heterogeneous([1.5] * 50, 1e-5, 0.05) == pytest.approx(
        acc.compute_epsilon(1.5, 0.05, 50, 1e-5)
    )
    # Full batch, different σ_i: same as composing one Gaussian event per step in dp_accounting.
    import dp_accounting

    sigmas = np.array([1.0, 2.0, 4.0, 8.0, 3.0])
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(x) for x in sigmas]))
    assert acc.epsilon_rdp_heterogeneous(sigmas, delta) == pytest.approx(
        accountant.get_epsilon(delta), rel=1e-9
    )
    # Subsampled steps; rounding σ down to a 2 % grid is conservative and close.
    exact = acc.epsilon_rdp_heterogeneous(sigmas, 1e-5, 0.1)
    assert exact < acc.epsilon_rdp_heterogeneous(sigmas, 1e-5, 0.1, relative_resolution=0.02) < 1.05 * exact
    # A step with zero local sensitivity (σ_i = ∞) adds nothing.
    with_inf = np.append(sigmas, np.inf)
    assert acc.epsilon_rdp_heterogeneous(with_inf, delta) == pytest.approx(
        acc.epsilon_rdp_heterogeneous(sigmas, delta)
    )
    assert acc.epsilon_rdp_heterogeneous([np.inf, np.inf], delta) == 0.0


def test_rdp_order_is_reported():
    eps, order = acc.rdp_epsilon_and_order(1.1, 0.01, 1000, 1e-5)
    assert eps == pytest.approx(acc.compute_epsilon(1.1, 0.01, 1000, 1e-5))
    assert order > 1


@pytest.mark.parametrize(
    ("args", "word"),
    [
        ((0.0, 0.1, 10, 1e-5), "noise_multiplier"),
        ((1.0, 0.0, 10, 1e-5), "sampling_rate"),
        ((1.0, 1.5, 10, 1e-5), "sampling_rate"),
        ((1.0, 0.1, 0, 1e-5), "steps"),
        ((1.0, 0.1, 10, 1.0), "delta"),
    ],
)
def test_bad_input_names_argument(args, word):
    with pytest.raises(ValueError, match=word):
        acc.compute_epsilon(*args)
    with pytest.raises(ValueError, match="accountant"):
        acc.compute_epsilon(1.0, 0.1, 10, 1e-5, "zcdp")


def test_tiny_noise_does_not_overflow():
    """Per-step ε beyond e^709: q = 1 is no amplification; naive stays the exact T·ε_Gauss(δ/T)."""
    from dpaudit.bounds.accountants import (
        amplify_by_subsampling,
        epsilon_advanced,
        epsilon_naive,
        gaussian_epsilon,
    )

    assert amplify_by_subsampling(800.0, 1e-5, 1.0) == (800.0, 1e-5)
    eps, step_delta = amplify_by_subsampling(800.0, 1e-5, 0.01)
    assert eps == pytest.approx(800.0 + math.log(0.01), rel=1e-12) and step_delta == pytest.approx(1e-7)
    assert epsilon_naive(0.01, 1.0, 100, 1e-5) == pytest.approx(100 * gaussian_epsilon(100.0, 1e-7), rel=1e-9)
    assert epsilon_advanced(0.01, 1.0, 100, 1e-5) == math.inf


def test_calibration_reaches_the_top_of_its_range():
    """A target met only between the last doubling and max_noise is still found."""
    from dpaudit.bounds.accountants import calibrate_noise_multiplier, compute_epsilon

    target = compute_epsilon(9000.0, 1.0, 1, 1e-5, "rdp")
    z = calibrate_noise_multiplier(target, 1e-5, 1.0, 1, "rdp", max_noise=1e4)
    assert 8192.0 < z <= 1e4 and compute_epsilon(z, 1.0, 1, 1e-5, "rdp") <= target


def _pld_default(z: float, q: float, steps: int, delta: float, interval: float = 1e-4) -> float:
    import dp_accounting

    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=interval)
    accountant.compose(training_accounting._dpsgd_event(z, q, steps))
    return float(accountant.get_epsilon(delta))


@pytest.mark.parametrize(
    ("z", "q", "steps"),
    [(64.0, 0.1, 100), (1.1, 0.01, 1000), (5.0, 1.0, 30), (1.0, 0.02, 500)],
)
def test_pld_agrees_with_dp_accounting_default_within_0_1_percent(z, q, steps):
    ours = acc.epsilon_pld(z, q, steps, 1e-5)
    assert ours == pytest.approx(_pld_default(z, q, steps, 1e-5), rel=1e-3)


def test_pld_strong_noise_converges_below_the_default_grid():
    # At (136.67, 0.02, 5000) dp_accounting's default grid (1e-4) is itself 4 % high (0.02948); the
    # adaptive grid converges to the 1e-6 value 0.02828 (within 0.1 %) and stays below the default.
    ours = acc.epsilon_pld(136.67, 0.02, 5000, 1e-5)
    reference = _pld_default(136.67, 0.02, 5000, 1e-5, interval=1e-6)
    assert ours == pytest.approx(reference, rel=1e-3)
    assert ours <= _pld_default(136.67, 0.02, 5000, 1e-5)
    assert ours <= acc.epsilon_rdp(136.67, 0.02, 5000, 1e-5)
    # The optimistic estimate lower-bounds ε (used for ε of an audit's lower-bounding mechanism).
    assert acc.epsilon_pld(136.67, 0.02, 5000, 1e-5, pessimistic=False) <= ours


def test_pld_refuses_more_steps_than_it_can_hold():
    with pytest.raises(ValueError, match="steps=1000000000000 exceeds"):
        acc.epsilon_pld(1.0, 0.01, 10**12, 1e-5)
    with pytest.raises(ValueError, match="exceeds the PLD accountant's limit"):
        acc.calibrate_noise_multiplier(1.0, 1e-5, 0.001, 10**9, "pld")


@pytest.mark.parametrize(
    ("z", "q", "steps"),
    # Strong noise: the 1e-3 and 1e-4 optimistic grids round every step's loss to 0 (z = 30: ε = 0.0289;
    # z = 10: ε = 0.0277, z = 64: ε = 0.0448, from PLDAccountant at a 1e-6 grid).
    [(30.0, 0.01, 1000), (10.0, 0.01, 100), (64.0, 0.1, 100)],
)
def test_optimistic_pld_at_strong_noise_is_within_5_percent_and_below(z, q, steps):
    """The optimistic ε is a lower bound, within 5 % of dp_accounting's PLDAccountant at a 1e-6 grid
    (pessimistic, so an upper bound on ε: the two bracket the true ε)."""
    ours = acc.epsilon_pld(z, q, steps, 1e-5, pessimistic=False)
    reference = _pld_default(z, q, steps, 1e-5, interval=1e-6)
    assert 0.95 * reference <= ours <= reference
    # The bracket it stops on is PLD_OPTIMISTIC_RTOL wide: within 1 % of the pessimistic ε.
    assert ours >= (1.0 - acc.PLD_OPTIMISTIC_RTOL) * acc.epsilon_pld(z, q, steps, 1e-5)


def test_optimistic_pld_is_zero_only_where_epsilon_is():
    assert acc.epsilon_pld(30.0, 0.01, 10, 0.5, pessimistic=False) == 0.0  # δ above the total variation
    assert 0.0 < acc.epsilon_pld(30.0, 0.01, 1000, 1e-5, pessimistic=False) < 0.0289


def test_one_grid_family_epsilon_falls_back_where_its_grid_rounds_to_zero():
    """The family bounds' ε(z_UB) on a fixed 1e-4 grid (about T·1e-4/2 low) takes the adaptive
    optimistic ε where that bias passes 1 %: still below the 1e-6 PLDAccountant value, within 5 %."""
    from dpaudit.bounds.tradeoff import SubsampledGaussian

    family = SubsampledGaussian(0.01, 1000, epsilon_discretization=1e-4)
    reference = _pld_default(30.0, 0.01, 1000, 1e-5, interval=1e-6)
    assert 0.95 * reference <= family.epsilon(30.0, 1e-5) <= reference


def test_the_trainers_accounting_is_the_report_sides_and_loads_no_tensorflow() -> None:
    """The train stage calibrates with :mod:`dpaudit.training.accounting`; the bounds re-export the
    same functions (one implementation, so calibration and reported ε cannot drift), and importing
    either loads no TensorFlow (the accountants are pure numbers)."""
    import subprocess
    import sys

    assert acc.calibrate_noise_multiplier is training_accounting.calibrate_noise_multiplier
    assert acc.compute_epsilon is training_accounting.compute_epsilon
    assert acc.default_delta(1000) == pytest.approx(1.0 / (1000 * math.log(1000)))
    code = (
        "import sys, dpaudit.bounds.accountants, dpaudit.bounds.identifiability, dpaudit.training.accounting;"
        "print('tensorflow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
