"""Estimator ``decision``: the advantage of an adversary's own per-trial decisions.

Some adversaries decide before any threshold sweep: A_DI,Gau guesses D iff its final belief is at
least 1/2 (Bernau et al. Algorithm 1) and Yeom et al.'s adversary guesses "member" iff the loss is
at most the model's mean training loss. The attack stage stores that guess as the score set's array
``decision`` (True = "in"); this estimator reports Adv = 2·wins/n − 1 (Bernau Def. 5; equal to
TPR − FPR for balanced worlds) with its exact Clopper–Pearson interval at the audit's confidence.
A rate, not a bound: it never enters a headline.
"""

from __future__ import annotations

from dpaudit.attacks.di import advantage_of_guesses
from dpaudit.bounds.registry import estimator
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    adv = advantage_of_guesses(s.arrays["decision"].astype(bool), s.member.astype(int), confidence)
    return [ResultRow(s.key, "advantage", adv.advantage, "decision", "rate", confidence, adv.low, adv.high)]


estimator("decision", counted=lambda s: 0)(_rows)
