"""The finding "canaries above population" at its joint level: nulls with signal in every set, at the
default run's layout (20 candidate sets for RelaxLoss), through :func:`evaluate`."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from dpaudit.bounds.strength import tpr_at_fpr, tpr_interval
from dpaudit.experiments.canaries.config import CanaryCounts, TrainParams
from dpaudit.experiments.canaries.design import HEURISTICS, balanced_membership
from dpaudit.experiments.canaries.design.heuristics import ADAPTIVE_ATTACKS, evaluate, joint_limits
from dpaudit.experiments.canaries.report import heuristic_findings
from dpaudit.scores import ScoreSet

M = TrainParams().models  # models per defence (params.yaml canaries.train.models: 64)
#: Canaries per type of the default run (params.yaml: 50 mislabeled, 20 of each other type, 70 clean),
#: for RelaxLoss's four canary types and the clean records.
SIZES = {t: getattr(CanaryCounts(), t) for t in (*HEURISTICS["relaxloss"].canary_types, "clean")}
CHECK = 0.01  # the findings' FPR (check_level of the default levels)
INFO = {"relaxloss": {"kind": "relaxloss", "label": "RelaxLoss", "accuracy": 0.95}}
#: Draws the scores of a [K, M] grid of decisions from its membership.
Draw = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def _score_set(attack: str, ctype: str, scores: np.ndarray, member: np.ndarray) -> ScoreSet:
    k, m = np.meshgrid(np.arange(scores.shape[0]), np.arange(M), indexing="ij")
    return ScoreSet({"defence": "relaxloss", "attack": attack, "canary_type": ctype}, scores.ravel(),
                    member.ravel(), ("rates",), arrays={"canary": k.ravel(), "model": m.ravel()})  # fmt: skip


def layout(rng: np.random.Generator, canaries: Draw, population: Draw) -> list[ScoreSet]:
    """RelaxLoss's score sets in the default run's layout: each adaptive attack on each of its canary
    types (the candidates) and on clean records, and its published attack on clean records."""
    sets = []
    for ctype, k in SIZES.items():
        member = balanced_membership(k, M, rng)
        for attack in ADAPTIVE_ATTACKS:
            sets.append(_score_set(attack, ctype, canaries(rng, member), member))
    member = balanced_membership(SIZES["clean"], M, rng)
    sets.append(_score_set("threshold_confidence", "clean", population(rng, member), member))
    return sets


def gaussian(signal: float) -> Draw:
    return lambda rng, member: rng.normal(size=member.shape) + signal * member


def flat_below(tpr: float, jump: float) -> Draw:
    """In-decisions above every out-decision with probability ``tpr``, just below the out-decisions'
    99 % quantile with probability ``jump``: TPR at 1 % FPR = ``tpr``, but a threshold set a little
    too low gains ``jump`` (least favourable for a lower limit)."""

    def draw(rng: np.random.Generator, member: np.ndarray) -> np.ndarray:
        u = rng.random(member.shape)
        near = 1 - CHECK - 1e-4 * rng.random(member.shape)
        hit = np.where(u < tpr, 2.0, np.where(u < tpr + jump, near, -1.0))
        return np.where(member, hit, rng.random(member.shape))

    return draw


def flat_above(tpr: float, drop: float) -> Draw:
    """TPR at 1 % FPR = ``tpr``, a share ``drop`` of it just above the quantile: a threshold set a
    little too high loses ``drop`` (least favourable for an upper limit)."""

    def draw(rng: np.random.Generator, member: np.ndarray) -> np.ndarray:
        u = rng.random(member.shape)
        hit = np.where(u < drop, 1 - CHECK + 1e-4 * rng.random(member.shape), np.where(u < tpr, 2.0, -1.0))
        return np.where(member, hit, rng.random(member.shape))

    return draw


def claims(runs: int, seed: int, canaries: Draw, population: Draw) -> int:
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(runs):
        (row,) = evaluate(layout(rng, canaries, population), INFO, [CHECK], CHECK, 0.95)
        assert row["candidates"] == 20
        count += row["canary_above_population"]
    return count


def mc_limit(share: float, repeats: int) -> float:
    return share + 2.0 * math.sqrt(share * (1.0 - share) / repeats)


@pytest.mark.parametrize("signal", [1.0, 2.5])
def test_no_claim_when_every_set_has_the_same_true_tpr(signal: float) -> None:
    """Every candidate and the population: in-scores N(s, 1), out-scores N(0, 1), so every true TPR at
    1 % FPR is equal and the finding is false. Claimed in at most 5 % of 300 runs (the plain
    Clopper–Pearson interval at the empirical threshold claimed it in 21–60 %)."""
    runs = 300
    assert claims(runs, int(signal * 10), gaussian(signal), gaussian(signal)) <= 0.05 * runs


def test_the_candidates_limit_holds_its_share_through_the_pick() -> None:
    """Every candidate's in-decisions lie above all out-decisions with probability 0.5, the rest below
    them all: each true TPR at 1 % FPR is 0.5, and the finding's lower limit is the largest of the 20
    candidates'. It may miss in at most (1 − c)/2 = 2.5 % (+ 2 s.e.) of the runs; without the
    Bonferroni factor for the pick it misses in about a fifth."""
    runs, rng = 400, np.random.default_rng(5)
    misses = 0
    for _ in range(runs):
        (row,) = evaluate(layout(rng, flat_below(0.5, 0.0), flat_above(0.5, 0.0)), INFO, [CHECK], CHECK, 0.95)
        assert row["candidates"] == 20
        misses += row["joint_canary_low"] > 0.5
    assert misses / runs <= mc_limit(0.025, runs)


def test_the_population_limit_holds_its_share() -> None:
    """The population's upper limit on its least favourable null misses in at most (1 − c)/2 = 2.5 %
    (+ 2 s.e.) of the runs: its share of the joint level, not the whole 5 %."""
    runs, rng = 1500, np.random.default_rng(8)
    member = balanced_membership(2, M, rng)
    candidate = _score_set("lira_online_logit", "mislabeled", np.zeros((2, M)), member)
    misses = 0
    for _ in range(runs):
        member = balanced_membership(SIZES["clean"], M, rng)
        clean = _score_set("threshold_confidence", "clean", flat_above(0.5, 0.45)(rng, member), member)
        misses += joint_limits([candidate] * 20, clean, CHECK, 0.95)[1] < 0.5
    assert misses / runs <= mc_limit(0.025, runs)


def test_the_limits_are_one_sided_at_the_joint_shares() -> None:
    """Against the strength module directly: the largest of the 20 candidates' lower limits, each at
    miss 0.05 / (2 · 20), and the population's upper limit at miss 0.05 / 2 (which is the two-sided 95 %
    interval's upper end). The 20-canary sets (640 out-decisions) cannot place a threshold at 1 % FPR
    at that share, so the proof comes from the 50-canary type."""
    rng = np.random.default_rng(3)
    sets = layout(rng, gaussian(2.0), gaussian(1.0))
    (row,) = evaluate(sets, INFO, [CHECK], CHECK, 0.95)
    candidates, clean = [s for s in sets if s.group["canary_type"] != "clean"], sets[-1]
    lows = [tpr_interval(s.in_scores, s.out_scores, CHECK, 0.05 / 40, 0.0)[1] for s in candidates]
    low = max(lows)
    high = tpr_interval(clean.in_scores, clean.out_scores, CHECK, 0.0, 0.025)[2]
    assert row["joint_canary_low"] == low and row["joint_population_high"] == high
    assert row["joint_type"] == "mislabeled" and low > 0.2
    small = [v for s, v in zip(candidates, lows, strict=True) if s.group["canary_type"] != "mislabeled"]
    assert len(small) == 15 and max(small) == 0.0
    assert high == tpr_at_fpr(clean.in_scores, clean.out_scores, CHECK, 0.95)[2]
    # The shares are what they claim: a whole-level population limit or an unpaid pick would differ.
    assert tpr_interval(clean.in_scores, clean.out_scores, CHECK, 0.0, 0.05)[2] < high
    best = candidates[int(np.argmax(lows))]
    assert tpr_interval(best.in_scores, best.out_scores, CHECK, 0.025, 0.0)[1] > low
    assert row["canary_above_population"] and low > high
    (finding,) = heuristic_findings([row], CHECK)
    assert f"the lower limit of mislabeled canaries under {row['joint_attack']} lies above" in finding
