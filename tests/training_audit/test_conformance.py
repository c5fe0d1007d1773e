"""Conformance checks of a transcript against its declared DP-SGD, on simulated runs with known answers."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.stats import norm

from dpaudit.bounds.onerun import audit_one_run
from dpaudit.training_audit.conformance import (
    ASSUMES_SGD_UPDATE,
    STOCHASTIC_MISMATCH_CHECKS,
    check_summary,
    run_checks,
)
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.snr import POOLED_WEIGHT
from dpaudit.training_audit.transcript import transcript_scores

POISSON = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=100, epsilon=2.0)  # q = 0.05
SHUFFLE = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=100, epsilon=2.0, sampling="shuffle")


def simulate(declared, seed, canaries=200, **knobs):
    rng = np.random.default_rng(seed)
    return simulate_transcript(declared, canaries, rng.random(canaries) < 0.5, rng, **knobs)


def rejected(results, kind="mismatch"):
    return {r.name for r in results if r.rejected and r.kind == kind}


def by_name(results):
    return {r.name: r for r in results}


@pytest.mark.parametrize("declared", [POISSON, SHUFFLE], ids=["poisson", "shuffle"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correct_dpsgd_passes_every_mismatch_check(declared, seed):
    results = run_checks(simulate(declared, seed), declared, 0.01, seed=seed)
    assert rejected(results) == set(), check_summary(results)
    expected_warnings = {"fixed_size_batches"} if declared.sampling == "shuffle" else set()
    assert rejected(results, "warning") == expected_warnings
    assert {"steps", "repeated_batches", "noise_present", *STOCHASTIC_MISMATCH_CHECKS} - {
        "batch_size_mean"
    } <= set(by_name(results))


@pytest.mark.parametrize(
    ("knobs", "caught"),
    [
        ({"noise_ratio": 0.3}, {"signal_to_noise_high"}),
        ({"signal_ratio": 3.0}, {"signal_to_noise_high"}),
        ({"signal_ratio": 0.3}, {"signal_to_noise_low"}),
        ({"skip_noise_every": 5}, {"noise_present", "noise_floor"}),
    ],
)
def test_each_planted_bug_is_caught_by_its_own_check(knobs, caught):
    results = run_checks(simulate(POISSON, 5, **knobs), POISSON, 0.01, seed=5)
    assert rejected(results) == caught, check_summary(results)


def test_reused_noise_is_caught_and_named():
    results = run_checks(simulate(POISSON, 6, reuse_noise=True), POISSON, 0.01)
    reuse = by_name(results)["noise_reuse"]
    assert reuse.rejected and reuse.statistic == pytest.approx(1.0, abs=1e-9) and reuse.p_value == 0.0
    assert "reused" in reuse.message


def test_extra_steps_and_a_higher_sampling_rate_are_mismatches():
    longer = simulate(dataclasses.replace(POISSON, steps=110), 7)
    results = run_checks(longer, POISSON, 0.01)
    assert rejected(results) == {"steps"}
    assert by_name(results)["steps"].statistic == 10.0 and "more privacy" in by_name(results)["steps"].message
    larger = simulate(dataclasses.replace(POISSON, batch_size=130), 7)
    assert rejected(run_checks(larger, POISSON, 0.01)) == {"batch_size_mean"}


def test_oversampled_epochs_break_records_per_epoch():
    # The loader feeds 2N records per Keras epoch (every record twice) in batches of B; the run is
    # declared by epochs, so Keras epochs are the passes over the data.
    declared = dataclasses.replace(SHUFFLE, steps=None, epochs=5)
    doubled = simulate(dataclasses.replace(declared, dataset_size=4000), 8)
    results = run_checks(doubled, declared, 0.01)
    assert rejected(results) == {"records_per_epoch", "steps"}
    check = by_name(results)["records_per_epoch"]
    assert check.statistic == 2.0 and check.level == 0.0 and "more than the N = 2000" in check.message


def test_a_run_by_steps_may_end_inside_its_last_epoch():
    declared = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=50, epsilon=2.0, sampling="shuffle")  # 2.5 epochs
    results = run_checks(simulate(declared, 9), declared, 0.01)
    assert by_name(results)["records_per_epoch"].status == "passed"


SHUFFLE_ODD = DeclaredDPSGD(1.0, 1.0, 64, 1000, steps=80, epsilon=2.0, sampling="shuffle")  # ⌈N/B⌉ = 16


def _reshaped(transcript, rows, epoch):
    """The transcript with the loader's batch sizes and Keras epochs replaced (the rest is noise)."""
    return dataclasses.replace(transcript, batch_rows=np.asarray(rows), epoch=np.asarray(epoch))


def test_steps_per_epoch_over_a_repeated_dataset_is_no_mismatch():
    """fit(steps_per_epoch=40) over ds.shuffle().batch(64).repeat(): Keras epochs of 40 steps span 2.5
    passes (1000 records per pass, the last batch of each pass holds 40). It used to be rejected."""
    base = simulate(SHUFFLE_ODD, 30)
    per_pass = [64] * 15 + [40]
    rows = (per_pass * 5)[:80]
    epoch = np.arange(80) // 40
    results = run_checks(_reshaped(base, rows, epoch), SHUFFLE_ODD, 0.01)
    assert by_name(results)["records_per_epoch"].status == "passed", check_summary(results)
    assert "steps" not in rejected(results)
    # a loader that feeds every record twice per pass (2000 records between partial batches) still is
    doubled = ([64] * 31 + [16]) * 3
    bad = run_checks(_reshaped(base, doubled[:80], epoch), SHUFFLE_ODD, 0.01)
    assert (
        "records_per_epoch" in rejected(bad)
        and "between two partial batches" in by_name(bad)["records_per_epoch"].message
    )


def test_dropped_or_filtered_last_batches_are_no_mismatch():
    """drop_remainder=True (or a filter on the batch size): every pass takes ⌊N/B⌋ = 15 steps.
    Declared by epochs (5 epochs: 75 steps, not 80) or by steps; neither is a mismatch, and with
    steps_per_epoch over a repeated dataset the check says it cannot see the passes (skipped)."""
    by_epochs = DeclaredDPSGD(1.0, 1.0, 64, 1000, epochs=5, epsilon=2.0, sampling="shuffle")
    base = simulate(dataclasses.replace(by_epochs, epochs=None, steps=75), 31)
    results = run_checks(_reshaped(base, [64] * 75, np.arange(75) // 15), by_epochs, 0.01)
    assert rejected(results) == set(), check_summary(results)
    assert by_name(results)["steps"].status == "passed" and "dropped" in by_name(results)["steps"].message
    by_steps = dataclasses.replace(by_epochs, epochs=None, steps=75)
    results = run_checks(_reshaped(base, [64] * 75, np.arange(75) // 15), by_steps, 0.01)
    assert rejected(results) == set(), check_summary(results)
    # Keras epochs of 25 full steps (1600 records) with no pass end in sight: skipped, never passed
    results = run_checks(_reshaped(base, [64] * 75, np.arange(75) // 25), by_steps, 0.01)
    check = by_name(results)["records_per_epoch"]
    assert rejected(results) == set() and check.status == "skipped" and "steps_per_epoch" in check.message


def test_a_real_extra_epoch_is_still_a_mismatch():
    declared = DeclaredDPSGD(1.0, 1.0, 64, 1000, epochs=5, epsilon=2.0, sampling="shuffle")
    longer = simulate(dataclasses.replace(declared, epochs=6), 32)
    assert "steps" in rejected(run_checks(longer, declared, 0.01))
    dropped = simulate(dataclasses.replace(declared, epochs=None, steps=90), 32)  # 6 epochs of 15
    rows, epoch = [64] * 90, np.arange(90) // 15
    assert "steps" in rejected(run_checks(_reshaped(dropped, rows, epoch), declared, 0.01))


def test_a_batch_larger_than_declared_is_a_mismatch_under_shuffle():
    base = simulate(SHUFFLE_ODD, 33)
    rows = base.batch_rows.copy()
    rows[5] = 128
    check = by_name(run_checks(dataclasses.replace(base, batch_rows=rows), SHUFFLE_ODD, 0.01))
    assert check["records_per_epoch"].rejected and "step 5 held 128" in check["records_per_epoch"].message


def test_fixed_size_batches_under_a_poisson_declaration_only_warn():
    results = run_checks(simulate(POISSON, 10, fixed_batches=True), POISSON, 0.01)
    assert rejected(results) == set()
    warning = by_name(results)["fixed_size_batches"]
    assert warning.rejected and warning.kind == "warning" and "not proven" in warning.message


def test_replayed_batch_is_a_mismatch():
    base = simulate(POISSON, 11)
    keys, rows = base.batch_keys.copy(), base.batch_rows.copy()
    keys[50], rows[50] = keys[10], rows[10]
    results = run_checks(dataclasses.replace(base, batch_keys=keys, batch_rows=rows), POISSON, 0.01)
    check = by_name(results)["repeated_batches"]
    assert check.rejected and check.level < 1e-50 and "steps 10 and 50" in check.message


def test_tiny_probe_noise_counts_as_no_noise():
    base = simulate(POISSON, 12)
    probe = base.probe.copy()
    probe[3] *= 1e-9
    probe[70] = 0.0
    check = by_name(run_checks(dataclasses.replace(base, probe=probe), POISSON, 0.01))["noise_present"]
    assert check.rejected and check.statistic == 2.0 and "[3, 70]" in check.message


def _two_steps(probe):
    """A two-step transcript (N = 2000, B = 100) with the given [2, k] probe."""
    declared = dataclasses.replace(POISSON, steps=2)
    base = simulate(declared, 13, probe_dims=probe.shape[1])
    return dataclasses.replace(base, probe=probe), declared


@pytest.mark.parametrize(
    ("k", "cosine", "p"),
    [(3, 0.6, 0.4), (5, 0.5, 2 * (1 - (3 * 0.75**2 - 2 * 0.75**3)))],  # Beta(1, 1), Beta(2, 2) tails
)
def test_noise_reuse_p_value_is_the_beta_tail_of_the_cosine(k, cosine, p):
    probe = np.zeros((2, k))
    probe[0, 0] = 2.0
    probe[1, :2] = [cosine, math.sqrt(1 - cosine**2)]
    transcript, declared = _two_steps(probe)
    check = by_name(run_checks(transcript, declared, 0.05))["noise_reuse"]
    assert check.statistic == pytest.approx(cosine) and check.p_value == pytest.approx(p, rel=1e-9)


def test_batch_size_mean_is_an_exact_binomial_test():
    declared = DeclaredDPSGD(1.0, 1.0, 5, 10, steps=1, epsilon=2.0)  # q = 1/2
    base = simulate(declared, 14, canaries=4)
    full = dataclasses.replace(base, batch_rows=np.array([10]))
    check = by_name(run_checks(full, declared, 0.05))["batch_size_mean"]
    assert check.p_value == pytest.approx(2 / 2**10)  # both tails of Binomial(10, 1/2) at 10


def test_fixed_size_warning_p_value_is_the_union_over_sizes():
    declared = DeclaredDPSGD(1.0, 1.0, 1, 2, steps=2, epsilon=2.0)  # rows ~ Binomial(2, 1/2)
    base = simulate(declared, 15, canaries=4)
    check = by_name(run_checks(dataclasses.replace(base, batch_rows=np.array([1, 1])), declared, 0.05))
    # P(some size fills both steps) <= Σ_v pmf(v)² = 1/16 + 1/4 + 1/16
    assert check["fixed_size_batches"].p_value == pytest.approx(3 / 8)


def test_repeated_batch_bounds_are_the_closed_forms():
    shuffle = DeclaredDPSGD(1.0, 1.0, 5, 10, steps=4, epsilon=2.0, sampling="shuffle")
    check = by_name(run_checks(simulate(shuffle, 16, canaries=4), shuffle, 0.2))["repeated_batches"]
    assert check.level == pytest.approx(6 / 252)  # 6 pairs, 1 / C(10, 5) each
    poisson = DeclaredDPSGD(1.0, 1.0, 2, 4, steps=2, epsilon=2.0)  # q = 1/2, N = 4
    check = by_name(run_checks(simulate(poisson, 16, canaries=4), poisson, 0.2))["repeated_batches"]
    # Σ_{n ≥ 2} pmf(n)² / C(4, n) = (6/16)²/6 + (4/16)²/4 + (1/16)²
    assert check.level == pytest.approx(11 / 256)


def test_signal_to_noise_null_matches_the_normal_limit():
    """k large (ŝ exact): ρ̂ ~ N(1, 1/Σb²); with Σb² = 100, ρ̂ = 1.2 sits 2 s.d. high."""
    declared = dataclasses.replace(POISSON, steps=100)
    base = simulate(declared, 17, probe_dims=4000)
    b = np.ones(100)
    t = dataclasses.replace(base, signal=b, signal_observed=np.full(100, 1.2))
    checks = by_name(run_checks(t, declared, 0.05, seed=3))
    high, low = checks["signal_to_noise_high"], checks["signal_to_noise_low"]
    assert high.statistic == pytest.approx(1.2)
    # the pooled ρ̂ gets POOLED_WEIGHT of the level; every part sits 1 s.d. high, far from mattering
    assert high.p_value * POOLED_WEIGHT == pytest.approx(norm.sf(2.0), abs=0.006)  # MC s.e. 0.0024
    assert low.p_value == 1.0
    assert high.rejected == (high.p_value <= high.level)


def test_signal_to_noise_is_skipped_when_no_canary_joined():
    rng = np.random.default_rng(18)
    t = simulate_transcript(POISSON, 50, np.zeros(50, bool), rng)
    checks = by_name(run_checks(t, POISSON, 0.05))
    for name in ("signal_to_noise_high", "signal_to_noise_low"):
        assert not checks[name].rejected and math.isnan(checks[name].statistic)
        assert "no canary joined" in checks[name].message
    # the four stochastic checks left share the level
    assert checks["noise_reuse"].level == pytest.approx(0.05 / 3, rel=1e-9)


def test_level_split_and_iterates_warning():
    results = run_checks(simulate(POISSON, 19), POISSON, 0.05)
    mismatch_levels = [r.level for r in results if r.kind == "mismatch"]
    assert sum(mismatch_levels) <= 0.05
    shares = {r.name: r.level for r in results if r.name in STOCHASTIC_MISMATCH_CHECKS}
    # no residuals recorded: that check is skipped (level 0) and the other five share the level
    assert shares == pytest.approx(
        {**dict.fromkeys(STOCHASTIC_MISMATCH_CHECKS, 0.01), "clipped_sum_residual": 0.0}
    )
    dims = np.array([100, 10])
    with_residual = dataclasses.replace(
        simulate(POISSON, 19),
        residual=np.full((100, 2), 1.0) * dims,
        residual_dims=dims,
        residual_names=("a", "b"),
    )
    levels = {r.name: r.level for r in run_checks(with_residual, POISSON, 0.05)}
    assert [levels[n] for n in STOCHASTIC_MISMATCH_CHECKS] == pytest.approx([0.05 / 6] * 6, rel=1e-9)
    iterates = by_name(run_checks(dataclasses.replace(with_residual, source="iterates"), POISSON, 0.05))
    for name in ASSUMES_SGD_UPDATE:  # from the weights' change: labelled warnings at the full level
        assert iterates[name].kind == "warning" and iterates[name].level == 0.05
        assert "assuming a plain SGD update" in iterates[name].message
    assert iterates["batch_size_mean"].kind == "mismatch" and iterates[
        "batch_size_mean"
    ].level == pytest.approx(0.05)


def test_summary_names_the_mismatches():
    results = run_checks(simulate(POISSON, 20, noise_ratio=0.3), POISSON, 0.01)
    text = check_summary(results)
    assert text.splitlines()[0] == "DOES NOT MATCH the declared DP-SGD: signal_to_noise_high"
    assert "[REJECTED] signal_to_noise_high" in text and "noise below σC" in text
    assert check_summary(run_checks(simulate(POISSON, 0), POISSON, 0.01)).startswith("matches")


def test_false_alarm_rate_of_the_mismatch_verdict_is_at_most_its_level():
    """150 correct runs (T = 60, m = 100): any mismatch rejected in at most 5 % + 2 s.e."""
    declared = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=60, epsilon=2.0)
    runs = 150
    alarms = sum(
        bool(rejected(run_checks(simulate(declared, 1000 + s, canaries=100), declared, 0.05, seed=s)))
        for s in range(runs)
    )
    assert alarms / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)


def test_transcript_score_bound_stays_below_the_declared_epsilon():
    declared = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=100)  # PLD ε ≈ 3.5 at δ = 1e-5
    claimed = declared.claimed_epsilon
    assert 3.0 < claimed < 4.0
    for seed in (21, 22):
        rng = np.random.default_rng(seed)
        included = rng.random(1000) < 0.5
        transcript = simulate_transcript(declared, 1000, included, rng)
        scores = transcript_scores(transcript, declared.sampling_rate)
        bound = audit_one_run(scores, included, delta=declared.delta, confidence=0.95)
        assert bound.correct > bound.guesses / 2  # the score does separate in from out
        assert bound.epsilon_lower <= claimed
