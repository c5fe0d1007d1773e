"""Can the training audit's bound alone prove a violation of 4× the claim with m ≤ 1000 canaries?

For true ε = 8 and 20 against a claim of 2 (digits-like DP-SGD: σ from PLD, q = 64/1437, T = 230,
δ = 1e-5), the share of seeds whose bound exceeds the claim (``VIOLATION PROVEN``) and the median bound,
at m = 500 and 1000, for the transcript score on simulated runs
(:func:`dpaudit.training_audit.simulate.simulate_transcript`) in three canary geometries:

* digits-like: the canaries share D = 128 inert weights (two always-zero pixels), contributions
  c ~ U(0.3, 1)·C (what the digits MLP's canary gradients put on those weights);
* audit-only room, D = 10 m inert weights (the documented remedy of audit-only input columns), same c;
* audit-only room, D = 10 m, every canary's clipped gradient on the inert weights (c = C): the best a
  canary design can do;

beside the ideal Gaussian canary game at the same ε (its GDP μ; no subsampling, every canary seen at
full strength), which no audit of subsampled DP-SGD reaches. Each bound is the steinke analysis at the
verdict's 97.5 %. Run: ``python benchmarks/bound_target.py [--seeds 20]``; results in
benchmarks/README.md ("What the bound alone can prove").
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from dpaudit.bounds.onerun import audit_one_run, gdp_mu_for_epsilon
from dpaudit.logs import progress
from dpaudit.training.accounting import calibrate_noise_multiplier
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.simulate import simulate_transcript
from dpaudit.training_audit.transcript import transcript_scores

CONFIDENCE = 0.975  # the verdict's share of its 95 % for the bound
CLAIM, DELTA = 2.0, 1e-5


def geometries(m: int) -> dict[str, dict]:
    """The simulated canary geometries, by name, as ``simulate_transcript`` keywords."""
    return {
        "digits-like (D = 128, c ~ U(0.3, 1)·C)": {"canary_dims": 128, "probe_dims": 64},
        "audit-only room (D = 10 m, c ~ U(0.3, 1)·C)": {"canary_dims": 10 * m, "probe_dims": 64},
        "audit-only room, c = C (best design)": {
            "canary_dims": 10 * m,
            "probe_dims": 64,
            "contribution": (1.0, 1.0),
        },
    }


def transcript_bound(declared: DeclaredDPSGD, m: int, ratio: float, seed: int, knobs: dict) -> float:
    """The bound of one simulated run whose noise is ``ratio`` times the declared σ."""
    rng = np.random.default_rng([seed, 4044])
    included = rng.random(m) < 0.5
    run = simulate_transcript(declared, m, included, rng, noise_ratio=ratio, **knobs)
    scores = transcript_scores(run, declared.sampling_rate)
    return audit_one_run(scores, included, delta=DELTA, confidence=CONFIDENCE).epsilon_lower


def ideal_bound(epsilon: float, m: int, seed: int) -> float:
    """The bound of one ideal Gaussian canary game at the GDP μ of ``epsilon``."""
    rng = np.random.default_rng([seed, 4045])
    included = rng.random(m) < 0.5
    scores = rng.standard_normal(m) + gdp_mu_for_epsilon(epsilon, DELTA) * included
    return audit_one_run(scores, included, delta=DELTA, confidence=CONFIDENCE).epsilon_lower


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--canaries", type=int, nargs="+", default=[500, 1000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[8.0, 20.0])
    args = parser.parse_args()
    q, steps = 64 / 1437, 230
    sigma_claim = calibrate_noise_multiplier(CLAIM, DELTA, q, steps, accountant="pld")
    declared = DeclaredDPSGD(sigma_claim, 1.0, 64, 1437, steps=steps, epsilon=CLAIM)
    start = time.perf_counter()
    for epsilon in args.epsilons:
        sigma = calibrate_noise_multiplier(epsilon, DELTA, q, steps, accountant="pld")
        for m in args.canaries:
            ratio, seeds = sigma / sigma_claim, range(args.seeds)
            rows = {
                name: [transcript_bound(declared, m, ratio, s, knobs) for s in seeds]
                for name, knobs in progress(geometries(m).items(), desc=f"ε={epsilon:g}, m={m}")
            }
            rows["ideal Gaussian game (not reachable)"] = [ideal_bound(epsilon, m, s) for s in seeds]
            for name, values in rows.items():
                row = {"true_epsilon": epsilon, "canaries": m, "geometry": name,
                       "proven": int(np.sum(np.asarray(values) > CLAIM)), "seeds": args.seeds,
                       "median_bound": round(float(np.median(values)), 2)}  # fmt: skip
                print(json.dumps(row), flush=True)
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
