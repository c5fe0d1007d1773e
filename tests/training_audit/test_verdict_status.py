"""Every check has a status, and the verdict never says more than it showed.

A skipped check used to be listed under "these checks passed" (the clipped-sum residual check with any
Dropout or BatchNormalization layer), and the bound was labelled "assumes nothing" even when its scores
came from the gradient handed to ``apply_gradients``. These tests fail on that code.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import dpaudit.training_audit.verdict as verdict_module
from dpaudit.training_audit.check import CATCHES, TAP, CheckResult
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.verdict import MISMATCH, NO_VIOLATION, decide

DECLARED = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=60, epsilon=2.0)


def _run(seed: int = 0, **fields):
    rng = np.random.default_rng(seed)
    included = rng.random(100) < 0.5
    transcript = simulate_transcript(DECLARED, 100, included, rng)
    dims = np.array([50, 10])
    residual = rng.chisquare(dims, size=(60, 2)) / (rng.chisquare(64, size=(60, 1)) / 64)
    transcript = dataclasses.replace(
        transcript, residual=residual, residual_dims=dims, residual_names=("w", "b")
    )
    return dataclasses.replace(transcript, **fields), included


def test_status_is_one_of_four_and_agrees_with_rejected() -> None:
    assert CheckResult("x", "mismatch", True, 0.1, 0.01, 1.0, "m").status == "rejected"
    assert CheckResult("x", "mismatch", False, 0.1, 0.5, 1.0, "m").status == "passed"
    skipped = CheckResult.skipped("x", "mismatch", "why")
    assert skipped.status == "skipped" and not skipped.rejected and not skipped.ran
    assert skipped.message == "skipped: why" and math.isnan(skipped.statistic)
    with pytest.raises(ValueError, match="contradicts"):
        CheckResult("x", "mismatch", True, 0.1, None, 1.0, "m", "skipped")
    with pytest.raises(ValueError, match="status"):
        CheckResult("x", "mismatch", False, 0.1, None, 1.0, "m", "maybe")


def test_a_clean_run_lists_every_status_under_its_heading() -> None:
    transcript, included = _run()
    verdict = decide([transcript], [included], DECLARED, seed=1)
    text = str(verdict)
    assert verdict.status == NO_VIOLATION and not verdict.skipped
    assert "every check that applies ran and passed" in verdict.headline()
    passed = next(line for line in text.splitlines() if line.startswith("  passed: "))
    assert "clipped_sum_residual" in passed and "signal_to_noise_high" in passed
    assert "; not applicable: records_per_epoch" in passed
    assert text.splitlines()[-1].startswith("  next: nothing found at this power")
    statuses = {c["name"]: c["status"] for c in verdict.as_dict()["checks"]}
    assert statuses["records_per_epoch"] == "not applicable" and statuses["clipped_sum_residual"] == "passed"


def test_a_model_with_dropout_and_batch_norm_never_reads_as_a_clean_pass() -> None:
    layers = ("Dropout 'dropout'", "BatchNormalization 'bn'")
    transcript, included = _run(
        residual=None, residual_dims=None, residual_names=(), stochastic_layers=layers
    )
    verdict = decide([transcript], [included], DECLARED, seed=1)
    head, text = verdict.headline(), str(verdict)
    assert head.startswith(
        f"{NO_VIOLATION}, but 2 check(s) could not run: clipped_sum_residual, signal_to_noise_low"
    )
    assert "these checks passed" not in head
    passed = next(line for line in text.splitlines() if line.startswith("  passed: "))
    assert "clipped_sum_residual" not in passed.split(";")[0]
    skipped = next(line for line in text.splitlines() if line.startswith("  skipped: clipped_sum_residual"))
    assert "Dropout 'dropout' is random in training" in skipped
    assert "BatchNormalization 'bn' mixes the examples of a batch" in skipped
    assert f"unseen: {CATCHES['clipped_sum_residual']}" in skipped and "per-layer" in skipped
    assert any(
        "BatchNormalization 'bn' mixes the examples" in w and "without noise" in w for w in verdict.warnings
    )
    assert "the bugs of the skipped checks are unseen" in verdict.next_step()
    assert verdict.as_dict()["skipped"] == ["clipped_sum_residual", "signal_to_noise_low"]


def test_no_canary_in_any_batch_skips_the_signal_checks() -> None:
    transcript, _ = _run()
    none = np.zeros(100, bool)
    rng = np.random.default_rng(3)
    keep = {k: getattr(transcript, k) for k in ("residual", "residual_dims", "residual_names")}
    empty = dataclasses.replace(simulate_transcript(DECLARED, 100, none, rng), **keep)
    verdict = decide([empty], [none], DECLARED, seed=1)
    assert {c.name for c in verdict.skipped} == {"signal_to_noise_high", "signal_to_noise_low"}
    assert "could not run" in verdict.headline()


def test_the_bound_says_what_it_assumes(monkeypatch) -> None:
    transcript, included = _run()
    iterates = decide([dataclasses.replace(transcript, source="iterates")], [included], DECLARED)
    assert iterates.assumption.startswith("assumes nothing about the mechanism")
    unchecked = decide([transcript], [included], DECLARED)
    assert unchecked.assumption.endswith("is the released update; not checked")
    assert "assumes nothing" not in str(unchecked)

    def with_tap(rejected: bool):
        original = verdict_module.run_checks

        def run_checks(*args, **kwargs):
            tap = CheckResult(TAP, "mismatch", rejected, 0.0, None, 0.0, "tap")
            return [*(c for c in original(*args, **kwargs) if c.name != TAP), tap]

        return run_checks

    monkeypatch.setattr(verdict_module, "run_checks", with_tap(False))
    checked = decide([transcript], [included], DECLARED)
    assert checked.assumption.endswith("is the released update; checked at every step")
    monkeypatch.setattr(verdict_module, "run_checks", with_tap(True))
    refuted = decide([transcript], [included], DECLARED)
    assert refuted.status == MISMATCH and refuted.assumption.endswith("the tap check found it is not")
    assert "does not hold for this code" in str(refuted).splitlines()[-1]


def test_layers_random_in_training_skip_the_low_signal_check_not_flag_correct_code() -> None:
    """Dropout makes the step's canary gradients differ from the audit's recomputation: on correct
    Keras code ρ̂ fell to ≈ 0.8 and signal_to_noise_low rejected. Planted here as a weaker signal
    (0.7×) with the layers named: the low side is skipped and said, the high side still runs."""
    rng = np.random.default_rng(3)
    included = rng.random(100) < 0.5
    weak = simulate_transcript(DECLARED, 100, included, rng, signal_ratio=0.7)
    low = decide([weak], [included], DECLARED, seed=1)
    assert "signal_to_noise_low" in {c.name for c in low.mismatches}  # the control: it does fire
    layers = dataclasses.replace(weak, stochastic_layers=("Dropout 'dropout'",))
    verdict = decide([layers], [included], DECLARED, seed=1)
    statuses = {c.name: c.status for c in verdict.checks}
    assert statuses["signal_to_noise_low"] == "skipped" and statuses["signal_to_noise_high"] == "passed"
    assert verdict.status == NO_VIOLATION and "could not run" in verdict.headline()
    assert "Dropout 'dropout'" in str(verdict)
