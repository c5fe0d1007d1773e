"""The nasr-e-paper-placement profile: its overrides, the design effect and the per-seed summary."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dpaudit.fidelity.profiles import nasr_e


def _record(seed: int, **changes: float) -> nasr_e.SeedRecord:
    base = nasr_e.SeedRecord(
        seed=seed, epsilon_pld=2.0, noise_multiplier=2.4, best_counted=0.4,
        best_counted_estimator="subsampled_gaussian", best_assumption_free=0.0, threshold_family=0.4,
        eq5_naive=0.3,
        stepwise_all=1.2, stepwise_all_estimate=1.5,
        stepwise_inert=0.0, inert_trials=10, shift_lower=0.7, noise_upper=2.45, shift_estimate=0.9,
        baseline_z=0.1, design_effect_d=1.0, design_effect_dprime=1.0, counted_above_pld=0, seconds=100.0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_profile_names_its_paper_and_module() -> None:
    assert nasr_e.PROFILE.name == "nasr-e-paper-placement" and nasr_e.PROFILE.paper == "NASR_2021"
    assert nasr_e.PROFILE.run is nasr_e.run


def test_run_params_override_only_the_profile_keys() -> None:
    base = {"instantiation": {"train": {"seed": 0, "trials_per_world": 100, "canary_placement": "inert",
                                        "threat_models": ["A", "E"], "steps": 100}}}  # fmt: skip
    params = nasr_e.run_params(base, 5, "update")
    train = params["instantiation"]["train"]
    assert (train["seed"], train["trials_per_world"], train["canary_placement"]) == (5, 500, "update")
    assert train["threat_models"] == ["E"] and train["target_epsilons"] == [2.0] and train["steps"] == 100
    assert base["instantiation"]["train"]["canary_placement"] == "inert"  # the base is not modified


def test_design_effect_is_one_for_independent_steps_and_grows_with_a_trial_effect() -> None:
    rng = np.random.default_rng(0)
    trials, steps, sigma, tau = 4000, 50, 2.0, 0.5
    iid = rng.normal(0.0, sigma, (trials, steps))
    assert nasr_e.design_effect(iid.sum(1), np.square(iid).sum(1), steps) == pytest.approx(1.0, abs=0.08)
    # A per-trial offset of s.d. τ: var of trial means σ²/T + τ², so the factor is 1 + T·τ²/σ² = 4.125.
    shared = iid + rng.normal(0.0, tau, (trials, 1))
    expected = 1 + steps * tau**2 / sigma**2
    measured = nasr_e.design_effect(shared.sum(1), np.square(shared).sum(1), steps)
    assert measured == pytest.approx(expected, rel=0.1)


def test_summary_counts_overclaims_and_validity_checks() -> None:
    records = [
        _record(0),
        _record(1, stepwise_all=2.5, shift_lower=1.1, counted_above_pld=1, best_counted=2.2),
        _record(2, noise_upper=2.0, shift_estimate=1.1),
    ]
    numbers = nasr_e.summarise(records, 0.95)
    assert numbers["overclaim_seeds.counted"].value == 1
    assert numbers["overclaim_seeds.stepwise_all"].value == 1
    assert numbers["shift_lower_above_clip_seeds"].value == 1
    assert numbers["noise_upper_below_true_seeds"].value == 1
    best = numbers["best_counted_ratio"]
    assert (best.value, best.low, best.high) == pytest.approx(((0.2 + 1.1 + 0.2) / 3, 0.2, 1.1))
    assert numbers["best_counted_ratio.seed1"].value == pytest.approx(1.1)
    # 1 − Δ̂/C = 0.1, 0.1, −0.1: mean 1/30, sample s.d. 0.2/√3 = 0.11547, s.e. 0.2/3 = 0.06667
    answer = numbers["data_answer"]
    assert answer.value == pytest.approx(1 / 30)
    assert answer.high - answer.value == pytest.approx(0.2 / math.sqrt(3) / math.sqrt(3))


def test_findings_say_whether_the_target_is_met() -> None:
    records = [_record(k) for k in range(2)]
    numbers = nasr_e.summarise(records, 0.95)
    text = nasr_e.findings(records, numbers, None)
    assert "misses the 0.5·ε_PLD target" in text[0]
    assert any("subsampled-Gaussian bound (counted) stays valid" in t for t in text)
    met = [_record(k, best_counted=1.2, best_counted_estimator="sweep_bonferroni") for k in range(2)]
    text = nasr_e.findings(met, nasr_e.summarise(met, 0.95), None)
    assert "meets the 0.5·ε_PLD target" in text[0]
    assert not any("subsampled-Gaussian bound (counted) stays valid" in t for t in text)
