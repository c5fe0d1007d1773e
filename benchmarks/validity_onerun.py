"""Validity of the one-run ε lower bounds (`dpaudit.bounds.onerun.audit_one_run`) on known-ε games.

Each repeat is one simulated training run: m canaries, each included independently with
probability 1/2, scored by a mechanism whose ε is known exactly, then audited at the stated level
(95 %, joint over the (k₊, k₋) grid). An overclaim is ε_LB > ε. Mechanisms:

* ideal Gaussian canary game — score N(μ, 1) if included, N(0, 1) if not, μ chosen so that this
  μ-GDP mechanism is exactly (ε, 1e-5)-DP; both analyses (``fdp_gaussian`` assumes exactly this
  trade-off family, ``steinke`` assumes nothing);
* randomised response at ε = 1 — score = included XOR flip, P(flip) = 1/(1 + e): a non-Gaussian
  mechanism on which Steinke et al.'s analysis is tight; ``steinke`` only (``fdp_gaussian`` does
  not claim validity there).

A check passes when the overclaim rate is ≤ (1 − level) + 2 Monte Carlo standard errors.

Run: `python benchmarks/validity_onerun.py` (full, a few minutes on one core) or `--quick` (< 20 s).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from dpaudit.bounds.onerun import audit_one_run, gdp_mu_for_epsilon

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by file path (validity.py, the tests): find the shared helpers
    sys.path.insert(0, str(HERE))
from _validity_common import LEVEL, row, table  # noqa: E402, F401 (table: the tests print it)
from _validity_common import main as run_main  # noqa: E402

DELTA = 1e-5


def _gaussian_game(rng: np.random.Generator, epsilon: float, canaries: int) -> tuple[np.ndarray, np.ndarray]:
    mu = gdp_mu_for_epsilon(epsilon, DELTA)
    included = rng.random(canaries) < 0.5
    return rng.normal(size=canaries) + mu * included, included


def _randomised_response(
    rng: np.random.Generator, epsilon: float, canaries: int
) -> tuple[np.ndarray, np.ndarray]:
    included = rng.random(canaries) < 0.5
    flip = rng.random(canaries) < 1.0 / (1.0 + math.exp(epsilon))
    return (included ^ flip).astype(float), included


def _check(estimator: str, mechanism: str, epsilon: float, canaries: int, repeats: int, seed: int) -> dict:
    game = _gaussian_game if mechanism == "gaussian" else _randomised_response
    rng = np.random.default_rng([seed, round(1000 * epsilon), canaries, len(estimator), len(mechanism)])
    overclaims = 0
    for rep in range(repeats):
        scores, included = game(rng, epsilon, canaries)
        audit = audit_one_run(scores, included, delta=DELTA, confidence=LEVEL, analysis=estimator, seed=rep)
        overclaims += audit.epsilon_lower > epsilon
    name = (
        f"ideal Gaussian canary game, ε={epsilon:g}, δ={DELTA:g}"
        if mechanism == "gaussian"
        else f"randomised response, ε={epsilon:g}"
    )
    return row(estimator, name, f"m={canaries} canaries, one run per repeat", overclaims, repeats)


def run(quick: bool = False, seed: int = 0) -> list[dict]:
    """One dict per check; ``quick`` uses 60 repeats (20 at m = 10000) instead of 1000 (300)."""
    repeats, repeats_large = (60, 20) if quick else (1000, 300)
    rows = []
    for estimator in ("steinke", "fdp_gaussian"):
        for epsilon in (2.0, 4.0):
            rows.append(_check(estimator, "gaussian", epsilon, 1000, repeats, seed))
    rows.append(_check("steinke", "randomised_response", 1.0, 1000, repeats, seed))
    rows.append(_check("steinke", "randomised_response", 1.0, 10000, repeats_large, seed))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the checks and print their table; exit status 1 on any failure."""
    return run_main(run, __doc__.splitlines()[0], "fewer repeats (< 20 s)", argv)


if __name__ == "__main__":
    sys.exit(main())
