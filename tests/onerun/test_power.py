"""The power statement: the smallest true ε a one-run audit shows above the claim with 80 % probability."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.bounds.onerun import audit_one_run, gdp_mu_for_epsilon
from dpaudit.bounds.steinke import epsilon_from_guesses
from dpaudit.onerun.power import detectable_epsilon, detection_mu, detection_rate, guess_thresholds

CLAIM, DELTA, M, CONFIDENCE = 2.0, 1e-5, 1000, 0.975


@pytest.fixture(scope="module")
def stated():
    return detectable_epsilon(CLAIM, DELTA, M, confidence=CONFIDENCE)


def test_stated_epsilon_is_detected_with_its_power_on_independent_games(stated):
    assert math.isfinite(stated) and stated > CLAIM
    rate = detection_rate(stated, CLAIM, DELTA, M, confidence=CONFIDENCE, simulations=800, seed=12345)
    assert 0.70 <= rate <= 0.90


def test_shortcut_decides_as_audit_one_run(stated):
    thresholds = guess_thresholds(CLAIM, DELTA, M, confidence=CONFIDENCE)
    rng = np.random.default_rng(4)
    decisions = []
    for epsilon in (0.85 * stated, stated, 1.15 * stated):
        mu = gdp_mu_for_epsilon(epsilon, DELTA)
        base, included = rng.standard_normal((5, M)), rng.random((5, M)) < 0.5
        shortcut = mu > detection_mu(base, included, thresholds)
        for i in range(5):
            audit = audit_one_run(base[i] + mu * included[i], included[i], delta=DELTA, confidence=CONFIDENCE)
            assert (audit.epsilon_lower > CLAIM) == shortcut[i]
            decisions.append(bool(shortcut[i]))
    assert any(decisions) and not all(decisions)  # both outcomes were exercised


def test_thresholds_are_the_fewest_correct_guesses_above_the_claim():
    per_confidence = 1 - (1 - CONFIDENCE) / 5
    for k, v in guess_thresholds(CLAIM, DELTA, M, confidence=CONFIDENCE):
        if v <= 2 * k:
            assert epsilon_from_guesses(2 * k, v, M, DELTA, per_confidence) > CLAIM
            assert epsilon_from_guesses(2 * k, v - 1, M, DELTA, per_confidence) <= CLAIM
        else:  # even 2k correct guesses cannot show the claim
            assert epsilon_from_guesses(2 * k, 2 * k, M, DELTA, per_confidence) <= CLAIM


def test_detection_mu_on_a_four_canary_game():
    # Included base scores 0 and 3, excluded 1 and 2; one guess each way (k = 1).
    base, included = np.array([[0.0, 1.0, 2.0, 3.0]]), np.array([[True, False, False, True]])
    # top-1 is included iff 3 + μ > 2 (μ > −1); bottom-1 is excluded iff μ > 1.
    assert detection_mu(base, included, [(1, 2)])[0] == pytest.approx(1.0)
    assert detection_mu(base, included, [(1, 1)])[0] == pytest.approx(-1.0)
    assert detection_mu(base, included, [(1, 3)])[0] == math.inf


def test_claims_beyond_reach_and_monotone_in_the_claim(stated):
    assert detectable_epsilon(8.0, DELTA, M, confidence=CONFIDENCE) == math.inf  # m = 1000 never shows 8
    assert detectable_epsilon(1.0, DELTA, M, confidence=CONFIDENCE) < stated
