"""Validity of the TPR-at-FPR interval and of the canaries audit's "canaries above population" finding.

:func:`dpaudit.bounds.strength.tpr_at_fpr` sets its threshold from the same negatives it reports on;
its 95 % interval must still cover the true TPR at FPR f, T(f) = sup{TPR(t) : FPR(t) ≤ f}, in at
least 95 % of repeats, each one-sided limit missing on its side in at most 2.5 %. Rows:

* Gaussian score games: positives N(s, 1), negatives N(0, 1), n of each, T(f) = Φ̄(Φ̄⁻¹(f) − s), at
  s = 0, 1, 2, 3, n = 640 and 1600 (the canaries audit's 20- and 50-canary sets over 64 models) and
  f = 1 % and 0.1 % where n·f ≥ 1. The "overclaims" of a row are the repeats whose interval misses
  T(f); the setting lists the misses on each side. A row passes when the miss rate is ≤ 5 % + 2 s.e.,
  the coverage is ≥ 94 %, and each side misses in ≤ 2.5 % + 2 s.e.
* Least favourable games (continuous negatives, positives massed just beside the quantile), where the
  union bound behind each limit is nearly tight: each one-sided limit at its 2.5 %.
* The finding, through :func:`dpaudit.experiments.canaries.design.heuristics.evaluate` with the
  default run's layout (RelaxLoss: 4 canary types × 5 adaptive attacks = 20 candidate sets, 64
  models, the default canary counts; the published attack on 70 clean records): with in-scores
  N(s, 1) in every set, all true TPRs are equal and the finding is false, so it may be claimed in at
  most 5 % of the runs; on least favourable nulls, the largest of the 20 candidates' lower limits
  (the one the finding uses) and the population's upper limit each miss in at most their 2.5 %
  shares.

Run: `python benchmarks/validity_rates.py` (full, about a minute on 2 cores) or `--quick` (< 10 s);
`benchmarks/validity.py` runs it too.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import norm

from dpaudit.bounds.strength import tpr_at_fpr, tpr_interval
from dpaudit.experiments.canaries.config import CanaryCounts, TrainParams
from dpaudit.experiments.canaries.design import HEURISTICS, balanced_membership
from dpaudit.experiments.canaries.design.heuristics import ADAPTIVE_ATTACKS, evaluate, joint_limits
from dpaudit.scores import ScoreSet

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by file path (validity.py, the tests): find the shared helpers
    sys.path.insert(0, str(HERE))
from _validity_common import LEVEL, row, table  # noqa: E402, F401 (table: the tests print it)
from _validity_common import main as run_main  # noqa: E402

#: The findings' FPR (``check_level`` of the default FPR levels) and the default layout's sizes.
CHECK = 0.01
MODELS = TrainParams().models
HEURISTIC = "relaxloss"
SIZES = {t: getattr(CanaryCounts(), t) for t in (*HEURISTICS[HEURISTIC].canary_types, "clean")}
INFO = {HEURISTIC: {"kind": HEURISTIC, "label": "RelaxLoss", "accuracy": 0.95}}
#: Coverage the acceptance asks of every Gaussian row (issue 47), beside the MC criterion.
MIN_COVERAGE = 0.94
#: Each one-sided limit's share of the 95 % level.
HALF = (1.0 - LEVEL) / 2.0
Draw = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def one_sided_ok(misses: int, repeats: int, share: float) -> bool:
    return misses / repeats <= share + 2.0 * math.sqrt(share * (1.0 - share) / repeats)


def gaussian_rows(quick: bool, seed: int) -> list[dict]:
    """Coverage of the 95 % interval on Gaussian games, one row per (n, f, s)."""
    repeats = 200 if quick else 1000
    grid = [(640, 0.01), (1600, 0.001)] if quick else [(640, 0.01), (640, 0.001), (1600, 0.01), (1600, 0.001)]
    rows = []
    for n, fpr in grid:
        if n * fpr < 1:
            continue
        for s in (0.0, 2.0) if quick else (0.0, 1.0, 2.0, 3.0):
            truth = float(norm.sf(norm.isf(fpr) - s))
            rng = np.random.default_rng([seed, n, int(fpr * 1e4), int(s)])
            pos, neg = rng.normal(s, 1.0, (repeats, n)), rng.normal(0.0, 1.0, (repeats, n))
            limits = np.array([tpr_at_fpr(p, q, fpr, LEVEL)[1:3] for p, q in zip(pos, neg, strict=True)])
            low, high = int(np.sum(limits[:, 0] > truth)), int(np.sum(limits[:, 1] < truth))
            width = float(np.mean(limits[:, 1] - limits[:, 0]))
            setting = (
                f"N({s:g}, 1) vs N(0, 1), n = {n} each, f = {fpr:g}, TPR = {truth:.4f}; "
                f"misses low {low}, high {high}; mean width {width:.3f}"
            )
            r = row("tpr_at_fpr 95 % interval", "Gaussian score game", setting, low + high, repeats)
            sides = one_sided_ok(low, repeats, HALF) and one_sided_ok(high, repeats, HALF)
            r["ok"] = r["ok"] and 1.0 - r["rate"] >= MIN_COVERAGE and sides
            rows.append(r)
    return rows


def flat_below(tpr: float, jump: float, fpr: float = CHECK) -> Draw:
    """In-scores above every out-score (U(0, 1)) with probability ``tpr``, just below the out-scores'
    1 − f quantile with probability ``jump``: a threshold a little too low gains ``jump``."""

    def draw(rng: np.random.Generator, member: np.ndarray) -> np.ndarray:
        u = rng.random(member.shape)
        near = 1.0 - fpr - 1e-4 * rng.random(member.shape)
        hit = np.where(u < tpr, 2.0, np.where(u < tpr + jump, near, -1.0))
        return np.where(member, hit, rng.random(member.shape))

    return draw


def flat_above(tpr: float, drop: float, fpr: float = CHECK) -> Draw:
    """TPR ``tpr`` at FPR f, a share ``drop`` of it just above the quantile: a threshold a little too
    high loses ``drop``."""

    def draw(rng: np.random.Generator, member: np.ndarray) -> np.ndarray:
        u = rng.random(member.shape)
        near = 1.0 - fpr + 1e-4 * rng.random(member.shape)
        hit = np.where(u < drop, near, np.where(u < tpr, 2.0, -1.0))
        return np.where(member, hit, rng.random(member.shape))

    return draw


def least_favourable_rows(quick: bool, seed: int) -> list[dict]:
    """Each one-sided limit on the game that makes its union bound nearly tight."""
    repeats = 300 if quick else 2000
    rows = []
    for n in (640,) if quick else (640, 1600):
        rng = np.random.default_rng([seed, n, 3])
        member = np.repeat([True, False], n)
        below, above = flat_below(0.3, 0.6), flat_above(0.3, 0.25)
        low_miss = high_miss = 0
        for _ in range(repeats):
            low_miss += tpr_interval(*_split(below(rng, member), member), CHECK, HALF, 0.0)[1] > 0.3
            high_miss += tpr_interval(*_split(above(rng, member), member), CHECK, 0.0, HALF)[2] < 0.3
        for side, misses, where in (("lower", low_miss, "below"), ("upper", high_miss, "above")):
            setting = f"positives just {where} the quantile, n = {n} each, f = 0.01, TPR = 0.3"
            name = f"tpr_interval {side} limit (one-sided)"
            rows.append(row(name, "least favourable game", setting, misses, repeats, 1.0 - HALF))
    return rows


def _split(scores: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return scores[member], scores[~member]


def _score_set(attack: str, ctype: str, scores: np.ndarray, member: np.ndarray) -> ScoreSet:
    k, m = np.meshgrid(np.arange(scores.shape[0]), np.arange(MODELS), indexing="ij")
    return ScoreSet({"defence": HEURISTIC, "attack": attack, "canary_type": ctype}, scores.ravel(),
                    member.ravel(), ("rates",), arrays={"canary": k.ravel(), "model": m.ravel()})  # fmt: skip


def layout(rng: np.random.Generator, canaries: Draw, population: Draw) -> list[ScoreSet]:
    """The heuristic's score sets in the default run's layout: every adaptive attack on every canary
    type of the defence (the candidates) and on clean records, and the published attack on clean."""
    sets = []
    for ctype, k in SIZES.items():
        member = balanced_membership(k, MODELS, rng)
        sets += [_score_set(a, ctype, canaries(rng, member), member) for a in ADAPTIVE_ATTACKS]
    member = balanced_membership(SIZES["clean"], MODELS, rng)
    published = HEURISTICS[HEURISTIC].published_attack
    return [*sets, _score_set(published, "clean", population(rng, member), member)]


def finding_rows(quick: bool, seed: int) -> list[dict]:
    """ "Canaries above population" on nulls with signal, through ``evaluate``."""
    runs = 50 if quick else 300
    rows = []
    for s in (1.0, 3.0) if quick else (0.0, 1.0, 2.0, 3.0):
        rng = np.random.default_rng([seed, 47, int(s)])

        def gaussian(r: np.random.Generator, member: np.ndarray, s: float = s) -> np.ndarray:
            return r.normal(size=member.shape) + s * member

        claimed = candidates = 0
        for _ in range(runs):
            (found,) = evaluate(layout(rng, gaussian, gaussian), INFO, [CHECK], CHECK, LEVEL)
            claimed += found["canary_above_population"]
            candidates = found["candidates"]
        setting = f"in N({s:g}, 1), out N(0, 1) in every set: equal true TPRs; {candidates} candidates"
        name = "canaries above population (evaluate)"
        rows.append(row(name, "default layout, null", setting, claimed, runs))
    picked_runs, population_runs = (80, 300) if quick else (400, 2000)
    rng = np.random.default_rng([seed, 48])
    misses = 0
    for _ in range(picked_runs):
        sets = layout(rng, flat_below(0.5, 0.0), flat_above(0.5, 0.0))
        (found,) = evaluate(sets, INFO, [CHECK], CHECK, LEVEL)
        misses += found["joint_canary_low"] > 0.5
    setting = "every candidate's in-scores above all out-scores w.p. 0.5, else below them: TPR 0.5"
    name = "finding: largest of 20 candidates' lower limits"
    rows.append(row(name, "least favourable null", setting, misses, picked_runs, 1.0 - HALF))
    rng = np.random.default_rng([seed, 49])
    dummy = _score_set("none", "clean", np.zeros((2, MODELS)), balanced_membership(2, MODELS, rng))
    misses = 0
    for _ in range(population_runs):
        member = balanced_membership(SIZES["clean"], MODELS, rng)
        clean = _score_set("published", "clean", flat_above(0.5, 0.45)(rng, member), member)
        misses += joint_limits([dummy] * 20, clean, CHECK, LEVEL)[1] < 0.5
    setting = f"{SIZES['clean']} clean records × {MODELS} models, 0.45 of TPR 0.5 just above the quantile"
    name = "finding: population's upper limit"
    rows.append(row(name, "least favourable null", setting, misses, population_runs, 1.0 - HALF))
    return rows


def run(quick: bool = False, seed: int = 0) -> list[dict]:
    """Every row (see the module docstring)."""
    return gaussian_rows(quick, seed) + least_favourable_rows(quick, seed) + finding_rows(quick, seed)


def main(argv: list[str] | None = None) -> int:
    """Run the checks and print their table; exit status 1 on any failure."""
    return run_main(run, __doc__.splitlines()[0], "fewer sizes and repeats (< 10 s)", argv)


if __name__ == "__main__":
    sys.exit(main())
