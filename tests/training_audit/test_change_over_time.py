"""A bug in part of training only: the signal-to-noise checks' null comes from the declaration alone.

The null used to be widened by the run's own batch-means spread, which such a bug inflates: a clip norm
of 3C (or the noise halved) in the last 20 % of steps then went unflagged. These tests fail on that code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.training_audit.conformance import run_checks
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.snr import NAMES, segment_estimates, snr_null

DECLARED = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=200, epsilon=2.0)  # q = 0.05
LEVEL = 0.025  # one run's share of the verdict's joint 95 %


def _snr_flags(seed: int, level: float = LEVEL, declared: DeclaredDPSGD = DECLARED, **knobs) -> bool:
    rng = np.random.default_rng(seed)
    transcript = simulate_transcript(declared, 200, rng.random(200) < 0.5, rng, **knobs)
    return any(r.rejected for r in run_checks(transcript, declared, level, seed=seed) if r.name in NAMES)


@pytest.mark.parametrize(
    "knobs",
    [{"signal_ratio": 3.0, "from_step": 0.8}, {"noise_ratio": 0.5, "from_step": 0.8}],
    ids=["clip 3C in the last 20 %", "noise σC/2 in the last 20 %"],
)
def test_a_change_in_the_last_fifth_of_training_is_flagged_in_nine_of_ten_seeds(knobs) -> None:
    assert sum(_snr_flags(100 + s, **knobs) for s in range(10)) >= 9


def test_correct_runs_stay_within_the_level() -> None:
    """100 correct runs at level 0.2 (large, so that 100 runs measure it): at most 20 % + 2 s.e."""
    short = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=40, epsilon=2.0)
    runs, level = 100, 0.2
    alarms = sum(_snr_flags(2000 + s, level, short) for s in range(runs))
    assert alarms / runs <= level + 2 * math.sqrt(level * (1 - level) / runs)


def test_the_null_is_the_declared_law_of_every_part() -> None:
    """With unit b_t and k large, ρ̂ on a part of n steps is N(1, 1/n) and the pooled one N(1, 1/T)."""
    b = np.ones(100)
    null = snr_null(b, 4000, 20_000, np.random.default_rng(0))
    assert null.shape == (20_000, 5)
    np.testing.assert_allclose(null.mean(axis=0), 1.0, atol=0.01)
    np.testing.assert_allclose(null.std(axis=0), [0.1, 0.2, 0.2, 0.2, 0.2], rtol=0.03)
    a = np.concatenate([np.ones(75), np.full(25, 3.0)])
    np.testing.assert_allclose(segment_estimates(a, b), [1.5, 1.0, 1.0, 1.0, 3.0])
