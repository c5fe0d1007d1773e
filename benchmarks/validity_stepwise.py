"""Validity of the per-step family bound when both worlds share an unknown baseline.

`dpaudit.bounds.stepwise_family_bound` (threat models E and F of Nasr et al. 2021, §IV-E/F) claims
ε ≥ ε(z_UB) at the stated level whenever the per-step canary projections follow the Poisson-subsampled
Gaussian family. The other records' clipped gradients may add an offset b to every step's projection
in both worlds; that changes nothing about privacy (z is the same), so a valid bound must keep its
level at every b. This Monte Carlo draws every per-step projection from the family's exact law,

    world D:  d = b + z·ξ,    world D′:  d = b + Bernoulli(q) + z·ξ    (Δ = C = 1, σ = z),

with b = 0, ½, 1 and 2 standard errors of world D's mean (z/√m₀), and counts an overclaim whenever
z_UB < z. Every overclaim ε_LB > ε(z) implies it (ε decreases in z and the family's ε is optimistic),
so the counted rate is at least the true overclaim rate. The family's ε(z) is the central-limit GDP
approximation (Dong, Roth & Su 2022, Thm. 3.4): only its ordering matters here, and it avoids a PLD
per repeat. A check passes when the rate is ≤ (1 − level) + 2 Monte Carlo standard errors.

Run: `python benchmarks/validity_stepwise.py` (full, ≈ 2–4 min on one core) or `--quick` (< 20 s).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from dpaudit.bounds.stepwise import StepMoments, stepwise_family_bound
from dpaudit.bounds.tradeoff import gdp_epsilon

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by file path (the tests, validity.py): find the shared helpers
    sys.path.insert(0, str(HERE))
from _validity_common import LEVEL, row, table  # noqa: E402, F401 (table: the tests print it)
from _validity_common import main as run_main  # noqa: E402

DELTA = 1e-5
OFFSETS_SE = (0.0, 0.5, 1.0, 2.0)
#: The instantiation audit's noise: z for each target ε, calibrated by RDP at q = 0.1, T = 100, δ = 1e-5
#: (``calibrate_noise_multiplier(ε, 1e-5, 0.1, 100)``).
NOISE = {2.0: 2.422402052739512, 10.0: 0.8867902055782846}


class CentralLimitFamily:
    """The subsampled Gaussian's ε(z) by its central-limit GDP fit μ = q√T·√(e^{1/z²} − 1); monotone
    in z, which is all the overclaim count (z_UB < z) depends on."""

    def __init__(self, sampling_rate: float, steps: int) -> None:
        self.sampling_rate, self.steps = sampling_rate, steps

    def epsilon(self, noise_multiplier: float, delta: float) -> float:
        mu = self.sampling_rate * math.sqrt(self.steps * math.expm1(noise_multiplier**-2.0))
        return gdp_epsilon(mu, delta)


def _one_check(
    rng: np.random.Generator, z: float, offset_se: float, trials: int, steps: int, q: float, repeats: int,
    known_baseline: float | None = None,
) -> int:
    """Overclaims among ``repeats`` audits of ``trials`` per world, each of ``steps`` observed steps."""
    family = CentralLimitFamily(q, steps)
    offset = offset_se * z / math.sqrt(trials * steps)
    overclaims = 0
    for _ in range(repeats):
        absent = offset + z * rng.standard_normal((trials, steps))
        inserted = offset + (rng.random((trials, steps)) < q) + z * rng.standard_normal((trials, steps))
        bound = stepwise_family_bound(
            StepMoments.of(inserted), StepMoments.of(absent), family, delta=DELTA, confidence=LEVEL,
            known_baseline=known_baseline,
        )
        overclaims += bound.noise_multiplier_upper < z
    return overclaims


def run(quick: bool = False, seed: int = 0) -> list[dict]:
    """One dict per (noise, offset) check; ``quick`` runs the default profile's ε = 2 only, with 300
    repeats of 100 trials per world, instead of 4000 repeats of 500 (the default profile's F)."""
    q, steps = 0.1, 100
    trials, repeats = (100, 300) if quick else (500, 4000)
    targets = (2.0,) if quick else (2.0, 10.0)
    rows = []
    # The estimated baseline at every offset; the known-baseline variant (b = 0, guaranteed by inert or
    # zero-mass canary coordinates) where its guarantee holds.
    checks = [(offset, None) for offset in OFFSETS_SE] + [(0.0, 0.0)]
    for target in targets:
        z = NOISE[target]
        for offset, known in checks:
            key = [seed, round(1000 * target), round(1000 * offset), trials, int(known is None)]
            rng = np.random.default_rng(key)
            overclaims = _one_check(rng, z, offset, trials, steps, q, repeats, known)
            name = "stepwise_family_bound" if known is None else "stepwise_family_bound (known b = 0)"
            mechanism = f"Poisson-subsampled Gaussian q={q:g}, T={steps}, z={z:.4g} (ε={target:g})"
            setting = f"baseline offset {offset:g} s.e. in both worlds, {trials} trials per world"
            rows.append(row(name, mechanism, setting, overclaims, repeats))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the checks and print their table; exit status 1 on any failure."""
    return run_main(run, __doc__.splitlines()[0], "ε = 2 only, fewer and smaller repeats (< 20 s)", argv)


if __name__ == "__main__":
    sys.exit(main())
