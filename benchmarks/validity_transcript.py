"""Validity of the transcript audit (`dpaudit.training_audit`): conformance checks, transcript-score bound,
power.

Each repeat is one simulated DP-SGD run (:func:`dpaudit.training_audit.simulate.simulate_transcript`),
exactly the
declared mechanism, so every rejection is a false alarm and every ε_LB above the true ε an overclaim:

* (a) conformance (:func:`dpaudit.training_audit.conformance.run_checks`, total level 0.05): the run's "any
  mismatch" rate under 0.05 per setting, and each check's rejection rate (pooled over the settings)
  at or under the level it states (deterministic checks: never; ``--quick`` lists only the rows with
  slack, see :func:`conformance_checks`), on Poisson DP-SGD (divisor = the batch's size), shuffled
  epochs (whose "claim is for Poisson" warning is always on by design and not counted), and the ideal
  Gaussian game (constant divisor, k = 4 probe coordinates, batches of 5: the checks' nulls hold
  exactly, the tails are heavy);
* (b) the transcript score (:func:`dpaudit.training_audit.transcript.transcript_scores`) through the
  ``steinke`` one-run analysis at 95 %: ε_LB above the declared mechanism's PLD ε (σ = 1, q = 0.05,
  T = 100, computed once) at most 5 % of the time;
* (d) the clipped-sum residual check (:func:`dpaudit.training_audit.residual.residual_check`, level 0.05) on
  simulated runs whose residuals follow the declared DP-SGD exactly (χ²_{d_v} over the probe's
  χ²_k / k, per step and variable, for the digits MLP's six variables): rejections at most 5 %;
* (c) the power statement (:func:`dpaudit.training_audit.power.detectable_epsilon`, 80 %, claim 2, m = 1000,
  at the verdict's 97.5 %): ideal games at the stated ε, audited by ``audit_one_run`` itself, are
  detected in 70–90 % of runs (or within 2 Monte Carlo s.e. of 80 % when that is wider).

A check passes when its rate is ≤ its level + 2 Monte Carlo standard errors.

Run: `python benchmarks/validity_transcript.py` (full, a few minutes) or `--quick` (< 15 s).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import numpy as np

from dpaudit.bounds.onerun import audit_one_run, gdp_mu_for_epsilon
from dpaudit.training_audit.conformance import run_checks
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.power import detectable_epsilon
from dpaudit.training_audit.residual import residual_check
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.transcript import transcript_scores

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by file path (validity.py, the tests): find the shared helpers
    sys.path.insert(0, str(HERE))
from _validity_common import LEVEL, row, table  # noqa: E402, F401 (table: the tests print it)
from _validity_common import main as run_main  # noqa: E402

CHECK_LEVEL = 0.05
POWER, CLAIM, CANARIES, POWER_CONFIDENCE = 0.8, 2.0, 1000, 0.975
#: σ = 1, q = 0.05, T = 100: its PLD ε is computed once (claimed_epsilon caches it on the instance).
BOUND_DECLARED = DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=100)
#: Per-check rows of ``--quick``: the ones whose rate has slack below the stated level.
QUICK_ROWS = ("steps", "records_per_epoch", "noise_present", "fixed_size_batches")
SETTINGS = {  # name: (declaration, simulate_transcript keywords)
    "correct DP-SGD, Poisson (divisor: batch size)": (BOUND_DECLARED, {}),
    "correct DP-SGD, shuffled epochs": (
        DeclaredDPSGD(1.0, 1.0, 100, 2000, steps=100, sampling="shuffle"),
        {},
    ),
    "ideal Gaussian game (constant divisor, k = 4, B = 5)": (
        DeclaredDPSGD(1.0, 1.0, 5, 200, steps=100),
        {"probe_dims": 4, "divisor": "constant"},
    ),
}


def conformance_checks(quick: bool, seed: int) -> list[dict]:
    """(a): per setting, the run's "any mismatch" rate against the total level (Bonferroni leaves it
    some slack); per check, its rejection rate pooled over the settings against the mean of the levels
    it stated. A stochastic check that is exact at its level sits AT it, so its row fails by chance
    about once in 40 runs: ``quick`` keeps only the rows with slack (the verdict-level rows, the
    deterministic checks and the union-bounded warning)."""
    repeats = 150 if quick else 1000
    rows = []
    rejected: dict[str, int] = {}
    stated: dict[str, float] = {}
    runs: dict[str, int] = {}
    for s, (name, (declared, knobs)) in enumerate(SETTINGS.items()):
        any_mismatch = 0
        for rep in range(repeats):
            rng = np.random.default_rng([seed, s, rep])
            included = rng.random(200) < 0.5
            transcript = simulate_transcript(declared, 200, included, rng, **knobs)
            results = run_checks(transcript, declared, CHECK_LEVEL, seed=rep)
            for r in results:
                if r.kind == "warning" and declared.sampling == "shuffle" and r.name == "fixed_size_batches":
                    continue  # always on under a shuffle declaration: the claim is for Poisson (not an alarm)
                rejected[r.name] = rejected.get(r.name, 0) + int(r.rejected)
                stated[r.name] = stated.get(r.name, 0.0) + r.level
                runs[r.name] = runs.get(r.name, 0) + 1
            any_mismatch += any(r.rejected for r in results if r.kind == "mismatch")
        setting = (
            f"T = {declared.total_steps}, m = 200, q = {declared.sampling_rate:g}, level {CHECK_LEVEL:g}"
        )
        rows.append(
            row(
                "conformance: any mismatch check",
                name,
                setting,
                any_mismatch,
                repeats,
                level=1.0 - CHECK_LEVEL,
            )
        )
    for check, count in rejected.items():
        if quick and check not in QUICK_ROWS:
            continue
        level = stated[check] / runs[check]
        rows.append(
            row(
                f"conformance: {check}",
                "all settings above, pooled",
                "rate vs its mean stated level",
                count,
                runs[check],
                level=1.0 - level,
            )
        )
    return rows


def bound_checks(quick: bool, seed: int) -> list[dict]:
    """(b): the transcript score's ``steinke`` ε_LB against the declared mechanism's PLD ε."""
    repeats = 40 if quick else 500
    declared, truth = BOUND_DECLARED, BOUND_DECLARED.claimed_epsilon
    over = 0
    for rep in range(repeats):
        rng = np.random.default_rng([seed, rep, 37])
        included = rng.random(CANARIES) < 0.5
        transcript = simulate_transcript(declared, CANARIES, included, rng)
        scores = transcript_scores(transcript, declared.sampling_rate)
        audit = audit_one_run(scores, included, delta=declared.delta, confidence=LEVEL, seed=rep)
        over += audit.epsilon_lower > truth
    setting = f"σ = 1, q = 0.05, T = 100, m = {CANARIES}, PLD ε = {truth:.4g} at δ = {declared.delta:g}"
    return [row("transcript score + steinke", "simulated DP-SGD (Poisson)", setting, over, repeats)]


#: The digits MLP 64-64-10's variables, the first kernel less its probe row: the residual's d_v.
RESIDUAL_DIMS = np.array([63 * 64, 64, 64 * 64, 64, 64 * 10, 10])


def residual_checks(quick: bool, seed: int) -> list[dict]:
    """(d): the residual check's rejections when the update is exactly the clipped sum plus noise."""
    repeats = 60 if quick else 400
    declared = SETTINGS["correct DP-SGD, Poisson (divisor: batch size)"][0]
    names = tuple(f"v{i}" for i in range(RESIDUAL_DIMS.size))
    rejected = 0
    for rep in range(repeats):
        rng = np.random.default_rng([seed, rep, 53])
        base = simulate_transcript(declared, 50, rng.random(50) < 0.5, rng)
        k = base.probe_dims
        chi_k = rng.chisquare(k, size=(base.steps, 1)) / k
        residual = rng.chisquare(RESIDUAL_DIMS, size=(base.steps, RESIDUAL_DIMS.size)) / chi_k
        transcript = dataclasses.replace(
            base, residual=residual, residual_dims=RESIDUAL_DIMS, residual_names=names
        )
        rejected += residual_check(transcript, CHECK_LEVEL, seed=rep).rejected
    setting = f"T = {declared.total_steps}, k = 64, digits MLP's 6 variables, level {CHECK_LEVEL:g}"
    return [
        row(
            "conformance: clipped_sum_residual",
            "exact null",
            setting,
            rejected,
            repeats,
            level=1.0 - CHECK_LEVEL,
        )
    ]


def power_checks(quick: bool, seed: int) -> list[dict]:
    """(c): ideal games at the stated 80 %-power ε, each audited by ``audit_one_run``."""
    games = 100 if quick else 1000
    delta = 1e-5
    stated = detectable_epsilon(CLAIM, delta, CANARIES, confidence=POWER_CONFIDENCE, power=POWER, seed=seed)
    mu = gdp_mu_for_epsilon(stated, delta)
    rng = np.random.default_rng([seed, 41])  # independent of the draws that made the statement
    detected = 0
    for rep in range(games):
        included = rng.random(CANARIES) < 0.5
        scores = rng.standard_normal(CANARIES) + mu * included
        audit = audit_one_run(scores, included, delta=delta, confidence=POWER_CONFIDENCE, seed=rep)
        detected += audit.epsilon_lower > CLAIM
    out = row(
        "power statement (detectable_epsilon)",
        f"ideal Gaussian canary game at stated ε = {stated:.3g}",
        f"claim {CLAIM:g}, m = {CANARIES}, {100 * POWER:g} % power, detected share",
        detected,
        games,
        level=POWER,
    )
    margin = max(0.1, 2.0 * math.sqrt(POWER * (1.0 - POWER) / games))
    out["ok"] = math.isfinite(stated) and abs(out["rate"] - POWER) <= margin
    return [out]


def run(quick: bool = False, seed: int = 0) -> list[dict]:
    """One dict per check; ``quick`` uses about a tenth of the repeats."""
    return (
        conformance_checks(quick, seed)
        + bound_checks(quick, seed)
        + residual_checks(quick, seed)
        + power_checks(quick, seed)
    )


def main(argv: list[str] | None = None) -> int:
    """Run the checks and print their table; exit status 1 on any failure."""
    return run_main(run, __doc__.splitlines()[0], "fewer repeats (< 15 s)", argv)


if __name__ == "__main__":
    sys.exit(main())
