"""Estimator ``loss_threshold``: one model's loss-threshold attack on a one-run membership split.

Fed by a score set of one model's negated losses on a candidate population whose members were each
drawn independently (``member``); params ``delta``, ``seed``, ``inclusion_probability`` and
``selection`` (``split`` or ``bonferroni``). The candidates are records of ONE training run, not
independent runs of the mechanism, so a threshold sweep over them tests this model's split and is
no bound on the mechanism's ε: it is reported as the estimate ``per_model_test``. The bound is the
one-run audit (Steinke, Nasr & Jagielski 2023, Thm. 5.2, :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`),
valid (tag ``one-run``) when ``inclusion_probability`` is ½ and counted unless the set withholds it
(``registered=()``). Beside it: TPR at 0.1/1/5 %
FPR, AUROC and the best-threshold advantage with their intervals, Yeom et al.'s rule (threshold:
the members' mean loss) as advantage ``yeom``, and Erlingsson et al.'s Prop. 3 at three advantages
(Yeom's, the naive best threshold's, the validly selected threshold's on its held-out half) as
estimates ``yeom_prop3``, ``naive_prop3`` and ``heldout_prop3``.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.attacks.membership import best_threshold_advantage, loss_threshold_attack
from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.empirical import epsilon_from_advantage
from dpaudit.bounds.registry import estimator, pre_registered
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow, fpr_tag

FPR_LEVELS = (0.001, 0.01, 0.05)


def one_run_valid(s: ScoreSet) -> bool:
    """The one-run bound holds only when every candidate was included with probability ½."""
    return math.isclose(float(s.params.get("inclusion_probability", 0.0)), 0.5)


def one_run_counted(s: ScoreSet) -> bool:
    """Valid and pre-registered for the headline (``s.registered``; default: yes).

    An experiment with several models per setting may pre-register one of them: the one-run bound
    has a floor from δ in its p-value (Steinke et al. Thm. 5.2), so splitting the level over many
    models can take every bound to 0 where one model at the full level proves a positive ε.
    """
    return bool(pre_registered(s, ["one_run"] * one_run_valid(s), ["one_run"]))


def _prop3(advantage: float, delta: float) -> float:
    return epsilon_from_advantage(min(max(float(advantage), 0.0), 1.0), delta)


def _rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
    delta = s.param("delta")
    one_run, counted = one_run_valid(s), one_run_counted(s)
    result = audit_scores(
        s.in_scores,
        s.out_scores,
        delta=delta,
        confidence=confidence,
        seed=int(s.param("seed")),
        one_run=one_run,
        headline=("one_run",) if one_run else None,
        counted_level=counted_level if counted else None,
    )
    rows: list[ResultRow] = []
    if one_run:
        b = result.lower_bounds["one_run"]
        rows.append(
            ResultRow(
                s.key,
                "epsilon_lower",
                b.epsilon,
                "one_run",
                "bound",
                level=b.confidence,
                assumes="one-run",
                counted=counted,
            )
        )
    selected = result.lower_bounds[f"sweep_{s.params.get('selection', 'split')}"]
    members, nonmembers = -s.in_scores, -s.out_scores
    yeom = loss_threshold_attack(members, nonmembers)
    naive = best_threshold_advantage(members, nonmembers)
    rows += [
        ResultRow(s.key, "epsilon_estimate", selected.epsilon, "per_model_test", "estimate", confidence),
        ResultRow(s.key, "epsilon_estimate", _prop3(yeom.advantage, delta), "yeom_prop3", "estimate"),
        ResultRow(s.key, "epsilon_estimate", _prop3(naive.advantage, delta), "naive_prop3", "estimate"),
        ResultRow(
            s.key,
            "epsilon_estimate",
            _prop3(selected.details["advantage"], delta),
            "heldout_prop3",
            "estimate",
        ),
        ResultRow(s.key, "advantage", yeom.advantage, "yeom", "rate"),
    ]
    for fpr in FPR_LEVELS:
        tpr, low, high, _ = result.tpr_at_fpr[fpr]
        name = f"tpr_at_fpr_{fpr_tag(fpr)}"
        rows.append(ResultRow(s.key, name, tpr, "threshold", "rate", confidence, low, high))
    for quantity, (value, low, high) in (("auroc", result.auroc), ("advantage", result.advantage)):
        rows.append(ResultRow(s.key, quantity, value, "scores", "rate", confidence, low, high))
    return [r for r in rows if not np.isnan(r.value)]


estimator("loss_threshold", counted=lambda s: int(one_run_counted(s)))(_rows)
