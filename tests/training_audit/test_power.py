"""The power statement: the smallest true ε a one-run audit shows above the claim with 80 % probability."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.bounds.onerun import audit_one_run, gdp_mu_for_epsilon
from dpaudit.bounds.steinke import epsilon_from_guesses
from dpaudit.training_audit.power import detectable_epsilon, detection_mu, detection_rate, guess_thresholds

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


# ---------------------------------------------------------------- the power of this audit's own statistic

#: A DP-SGD claiming ε = 2 (σ = 3, q = 0.1, T = 200), 400 canaries in 2000 dimensions, k = 64 probe weights:
#: D̂ ≤ 20 m, so the statement comes from the exact Gram-structure model.
RUN = {"m": 400, "canary_dims": 2000, "probe_dims": 64}


@pytest.fixture(scope="module")
def audited():
    from dpaudit.training_audit.declaration import DeclaredDPSGD
    from dpaudit.training_audit.power_transcript import audit_power
    from dpaudit.training_audit.simulate import simulate_transcript

    declared = DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200)
    rng = np.random.default_rng(7)
    included = rng.random(RUN["m"]) < 0.5
    transcript = simulate_transcript(
        declared, RUN["m"], included, rng, canary_dims=RUN["canary_dims"], probe_dims=RUN["probe_dims"]
    )
    statement = audit_power([transcript], [included], declared, confidence=CONFIDENCE)
    return declared, transcript, included, statement


def _transcript_rate(declared, noise_multiplier: float, runs: int, seed: int) -> float:
    """Share of fresh simulated runs at ``noise_multiplier`` whose transcript-score bound beats the claim."""
    from dpaudit.training_audit.simulate import simulate_transcript
    from dpaudit.training_audit.transcript import transcript_scores

    hits = 0
    for run in range(runs):
        rng = np.random.default_rng([seed, run])
        included = rng.random(RUN["m"]) < 0.5
        transcript = simulate_transcript(
            declared, RUN["m"], included, rng, canary_dims=RUN["canary_dims"], probe_dims=RUN["probe_dims"],
            noise_ratio=noise_multiplier / declared.noise_multiplier,
        )  # fmt: skip
        bound = audit_one_run(
            transcript_scores(transcript, declared.sampling_rate), included, delta=declared.delta,
            confidence=CONFIDENCE,
        )  # fmt: skip
        hits += bound.epsilon_lower > declared.claimed_epsilon
    return hits / runs


def test_audit_power_is_calibrated_on_independent_simulated_runs(audited):
    declared, _, _, statement = audited
    assert declared.claimed_epsilon < statement.epsilon < math.inf
    rate = _transcript_rate(declared, statement.noise_multiplier, runs=60, seed=2024)
    assert 0.65 <= rate <= 0.95  # 80 % ± 3 Monte Carlo s.e.
    # the ideal game's statement (the old power line) is far below it: its ε would be detected almost never
    ideal = detectable_epsilon(declared.claimed_epsilon, declared.delta, RUN["m"], confidence=CONFIDENCE)
    assert ideal < statement.epsilon / 2


def test_the_ideal_game_statement_fails_that_calibration(audited):
    from dpaudit.training.accounting import calibrate_noise_multiplier

    declared = audited[0]
    ideal = detectable_epsilon(declared.claimed_epsilon, declared.delta, RUN["m"], confidence=CONFIDENCE)
    sigma = calibrate_noise_multiplier(ideal, declared.delta, declared.sampling_rate, 200, accountant="rdp")
    assert _transcript_rate(declared, sigma, runs=20, seed=99) < 0.6


def test_audit_power_is_monotone_in_the_power_asked(audited):
    from dpaudit.training_audit.power_transcript import audit_power

    declared, transcript, included, statement = audited
    lower = audit_power([transcript], [included], declared, confidence=CONFIDENCE, power=0.5).epsilon
    assert declared.claimed_epsilon < lower < statement.epsilon


def test_audit_power_is_inf_when_the_canaries_crowd_their_room():
    from dpaudit.training_audit.declaration import DeclaredDPSGD
    from dpaudit.training_audit.power_transcript import audit_power, interference_dims
    from dpaudit.training_audit.simulate import simulate_transcript

    declared = DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200)
    rng = np.random.default_rng(3)
    included = rng.random(400) < 0.5
    transcript = simulate_transcript(declared, 400, included, rng, canary_dims=32)
    assert 20 < interference_dims(transcript, included) < 50  # the 32 shared dimensions are seen
    assert audit_power([transcript], [included], declared, confidence=CONFIDENCE).epsilon == math.inf


def test_interference_dims_sees_the_simulated_room():
    from dpaudit.training_audit.declaration import DeclaredDPSGD
    from dpaudit.training_audit.power_transcript import interference_dims
    from dpaudit.training_audit.simulate import simulate_transcript

    declared = DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200)
    for dims in (500, 1000):  # the centred null's 1/(T − 1) and the scales' spread are not bias any more
        estimates = []
        for seed in range(2):
            rng = np.random.default_rng([seed, dims])
            included = rng.random(400) < 0.5
            transcript = simulate_transcript(declared, 400, included, rng, canary_dims=dims)
            estimates.append(interference_dims(transcript, included))
        assert 0.85 * dims < np.mean(estimates) < 1.2 * dims


def test_gram_factor_is_the_gram_matrix_of_random_unit_vectors():
    from dpaudit.training_audit.power_transcript import _gram_factor

    rng = np.random.default_rng(5)
    for dims in (50.0, 300.0, 2500.0):  # rank D (vectors) and rank m (Bartlett)
        factor = _gram_factor(200, dims, rng).astype(np.float64)
        gram = factor @ factor.T
        assert factor.shape == (200, min(200, int(dims)))
        np.testing.assert_allclose(np.diag(gram), 1.0, rtol=1e-5)
        off = gram[~np.eye(200, dtype=bool)]
        assert abs(np.mean(off**2) * dims - 1) < 0.1  # ⟨d_j, d_j'⟩² averages 1/D
