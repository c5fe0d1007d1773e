"""The one-run verdict's power line, measured on the statistic it states it for (issue 44, items 1–2).

(a) Calibration: for each setting, one simulated correct run
    (:func:`dpaudit.training_audit.simulate.simulate_transcript` at the declared σ) gives the statement of
    :func:`dpaudit.training_audit.power_transcript.audit_power`
    (ε at 80 % power, and its σ'); then ``--runs`` fresh simulated runs at σ' (independent seeds, fresh
    inclusion bits) are audited as the verdict audits them (``transcript_scores`` → ``audit_one_run``,
    steinke at 97.5 %), and the share whose bound exceeds the claim is printed beside the ideal game's
    statement (:func:`dpaudit.training_audit.power.detectable_epsilon`) and the share at ITS σ.
(b) Where the transcript score loses against the ideal game: the median bound at true ε = 8 and 20
    (claim 2, digits-like q = 64/1437, T = 230, m = 500) with one idealisation removed at a time.

Run: ``python benchmarks/power_onerun.py`` (about 10 minutes on 2 busy cores; ``--quick``: fewer runs).
Results: benchmarks/README.md ("Power of the one-run verdict").
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from dpaudit.bounds.onerun import audit_one_run, gdp_mu_for_epsilon
from dpaudit.training.accounting import calibrate_noise_multiplier
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.power import detectable_epsilon
from dpaudit.training_audit.power_transcript import audit_power
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.transcript import Transcript, transcript_scores

CONFIDENCE = 0.975  # the verdict's share of its 95 % for the bound
#: name: (declaration, canaries, simulate_transcript keywords)
SETTINGS = {
    "σ=3, q=0.1, T=200, m=400, D=1000, k=64": (DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200), 400,
                                              {"canary_dims": 1000, "probe_dims": 64}),
    "σ=3, q=0.1, T=200, m=400, D=2000, k=64": (DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200), 400,
                                              {"canary_dims": 2000, "probe_dims": 64}),
    "σ=3, q=0.1, T=200, m=1000, D=2000, k=64": (DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200), 1000,
                                               {"canary_dims": 2000, "probe_dims": 64}),
    "σ=3, q=0.1, T=200, m=400, D=4000, k=64": (DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200), 400,
                                              {"canary_dims": 4000, "probe_dims": 64}),
    "σ=3, q=0.1, T=200, m=1000, D=20000, k=256": (DeclaredDPSGD(3.0, 1.0, 100, 1000, steps=200), 1000,
                                                 {"canary_dims": 20000, "probe_dims": 256}),
    "digits: σ=1.61, q=0.045, T=230, m=500, D=128, k=64": (DeclaredDPSGD(1.6089, 1.0, 64, 1437, steps=230),
                                                          500, {"canary_dims": 128, "probe_dims": 64}),
}  # fmt: skip


def bound(
    declared: DeclaredDPSGD, m: int, sigma: float, seed: int, score: Callable | None = None, **knobs: Any
) -> float:
    """ε lower bound of one fresh simulated run whose noise is ``sigma`` (the declaration's σ elsewhere)."""
    rng = np.random.default_rng([seed, 44])
    included = rng.random(m) < 0.5
    ratio = sigma / declared.noise_multiplier
    t = simulate_transcript(declared, m, included, rng, noise_ratio=ratio, **knobs)
    scores = (score or transcript_scores)(t, declared.sampling_rate)
    return audit_one_run(scores, included, delta=declared.delta, confidence=CONFIDENCE).epsilon_lower


def rate(declared: DeclaredDPSGD, m: int, sigma: float, runs: int, seed: int, **knobs: Any) -> float:
    claim = declared.claimed_epsilon
    return float(np.mean([bound(declared, m, sigma, seed + r, **knobs) > claim for r in range(runs)]))


def calibration(runs: int) -> None:
    for name, (declared, m, knobs) in SETTINGS.items():
        rng = np.random.default_rng(7)
        included = rng.random(m) < 0.5
        run = simulate_transcript(declared, m, included, rng, **knobs)
        start = time.perf_counter()
        stated = audit_power([run], [included], declared, confidence=CONFIDENCE)
        seconds = time.perf_counter() - start
        row = {"setting": name, "claim": round(declared.claimed_epsilon, 3), "stated": stated.epsilon,
               "seconds": round(seconds, 1), "simulations": stated.simulations}  # fmt: skip
        if math.isfinite(stated.epsilon):
            row["rate_at_stated"] = rate(declared, m, stated.noise_multiplier, runs, 1000, **knobs)
        else:
            row["rate_at_cap_model"] = stated.rate_at_cap
        ideal = detectable_epsilon(declared.claimed_epsilon, declared.delta, m, confidence=CONFIDENCE)
        row["ideal_stated"] = ideal
        if math.isfinite(ideal):
            sigma = calibrate_noise_multiplier(
                ideal, declared.delta, declared.sampling_rate, declared.total_steps, accountant="rdp"
            )
            row["rate_at_ideal_stated"] = rate(declared, m, sigma, min(runs, 40), 5000, **knobs)
        print(json.dumps(row), flush=True)


def oracle_scores(t: Transcript, q: float) -> np.ndarray:
    """NOT an audit: the score told which steps each canary joined (Σ over those steps of μy − μ²/2)."""
    mu, y = np.asarray(t.expected), np.asarray(t.projections)
    return np.where(t.present, mu * y - 0.5 * mu * mu, 0.0).sum(axis=0)


def ladder(seeds: int) -> None:
    declared, m = DeclaredDPSGD(1.6089, 1.0, 64, 1437, steps=230, epsilon=2.0), 500
    steps = [
        ("transcript score, D = 128, k = 64, c ~ U(0.3, 1)·C (the simulator's digits-like run)",
         {"canary_dims": 128, "probe_dims": 64}, None),
        ("… no interference (D = 20000)", {"canary_dims": 20000, "probe_dims": 64}, None),
        ("… and exact normalisation (k = 20000)", {"canary_dims": 20000, "probe_dims": 20000}, None),
        ("… and every canary at the clip norm (c = C)",
         {"canary_dims": 20000, "probe_dims": 20000, "contribution": (1.0, 1.0)}, None),
        ("… and told which steps each canary joined (not an audit)",
         {"canary_dims": 20000, "probe_dims": 20000, "contribution": (1.0, 1.0)}, oracle_scores),
    ]  # fmt: skip
    for eps in (8.0, 20.0):
        sigma = calibrate_noise_multiplier(eps, 1e-5, declared.sampling_rate, 230, accountant="pld")
        for name, knobs, score in steps:
            values = [bound(declared, m, sigma, s, score=score, **knobs) for s in range(seeds)]
            row = {"true_eps": eps, "step": name, "median_bound": float(np.median(values))}
            print(json.dumps(row), flush=True)
        mu = gdp_mu_for_epsilon(eps, 1e-5)
        rng = np.random.default_rng(1)
        ideal = []
        for _ in range(seeds):
            inc = rng.random(m) < 0.5
            ideal.append(audit_one_run(rng.standard_normal(m) + mu * inc, inc, delta=1e-5,
                                       confidence=CONFIDENCE).epsilon_lower)  # fmt: skip
        print(json.dumps({"true_eps": eps, "step": f"ideal Gaussian game, μ = {mu:.2f}",
                          "median_bound": float(np.median(ideal))}), flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--part", choices=["all", "calibration", "ladder"], default="all")
    args = parser.parse_args()
    if args.part in ("all", "calibration"):
        calibration(40 if args.quick else 100)
    if args.part in ("all", "ladder"):
        ladder(5 if args.quick else 15)


if __name__ == "__main__":
    main()
