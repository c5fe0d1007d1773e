"""The clipped-sum residual check: its level on the exact null, its power, and its arithmetic."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.residual import residual_check
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.stepstats import residual_statistics

DIMS = np.array([4096, 64, 4096, 64, 640, 10])
DECLARED = DeclaredDPSGD(noise_multiplier=1.0, clip_norm=1.0, batch_size=20, dataset_size=400, steps=60)


def transcript(rng: np.random.Generator, inflate: float = 1.0, variable: int = 4):
    base = simulate_transcript(DECLARED, 50, rng.random(50) < 0.5, rng)
    k, steps = base.probe_dims, base.steps
    # Under the declaration ‖R_v‖²/ŝ² = χ²_{d_v} / (χ²_k / k), independently over steps.
    residual = rng.chisquare(DIMS, size=(steps, DIMS.size)) / (rng.chisquare(k, size=(steps, 1)) / k)
    residual[:, variable] *= inflate
    names = tuple(f"v{i}" for i in range(DIMS.size))
    return dataclasses.replace(base, residual=residual, residual_dims=DIMS, residual_names=names)


def test_false_alarms_stay_under_the_level_and_a_thirty_percent_excess_on_one_variable_is_found() -> None:
    rng = np.random.default_rng(0)
    level = 0.2  # large, so that 40 runs measure it
    runs = 15
    alarms = [residual_check(transcript(rng), level, seed=i).rejected for i in range(runs)]
    assert sum(alarms) <= runs * level + 2 * np.sqrt(runs * level * (1 - level))
    caught = residual_check(transcript(rng, inflate=1.3, variable=4), 0.001)
    assert caught.rejected and "v4" in caught.message
    assert caught.statistic == pytest.approx(1.3 * 64 / 62, rel=0.05)
    silent = residual_check(transcript(rng, inflate=0.0, variable=5), 0.001)  # no noise on the last bias
    assert silent.rejected and "v5 gets less noise" in silent.message


def test_no_residuals_is_skipped_and_said() -> None:
    base = simulate_transcript(DECLARED, 10, np.ones(10, bool), np.random.default_rng(1))
    result = residual_check(base, 0.01)
    assert not result.rejected and result.message.startswith("skipped")


def test_the_residual_is_what_the_clipped_sum_fit_leaves_per_variable_without_the_probe_rows() -> None:
    k_sum = [np.array([[1.0, 0.0], [2.0, 0.0], [5.0, 5.0]]), np.array([1.0, 1.0])]
    noise = [np.array([[0.0, 1.0], [0.0, 0.0], [9.0, 9.0]]), np.array([0.5, -0.5])]
    update = [3.0 * k + n for k, n in zip(k_sum, noise, strict=True)]  # divisor 1/3, row 2 is the probe
    out = residual_statistics(update, k_sum, 0, np.array([2]), s_hat=0.5)
    # α̂ = <G, K>/<K, K> over rows 0, 1 and the bias: noise ⟂ K there, so α̂ = 3 and R = noise
    np.testing.assert_allclose(out, [1.0 / 0.25, 0.5 / 0.25])
