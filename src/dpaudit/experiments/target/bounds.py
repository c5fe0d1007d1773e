"""Bounds stage of the target audit: per-model membership evidence, Epsilon*, and declared accountants.

The audited model is ONE model trained once on the user's member list. What its member and
non-member scores show is evidence about this model and these records, not a lower bound on ε of the
training algorithm: the audit did not choose who became a member, so a distribution shift between
the two lists (a leak-free ε = 0 mechanism whose members differ from its non-members by 0.2 sd)
raises every statistic as a real leak would. A bound on the algorithm needs its own randomness:
shadow models retrained under the declared algorithm, or one run with canaries included with
probability ½ (Steinke et al. 2023). So nothing here is called an ε lower bound, and the summary
row's ε-lower cell stays empty. The attack stage's score sets go through
:func:`dpaudit.bounds.audit.audit_score_sets` once, with estimators that emit no bound; per attack,
at ``target.attack.confidence`` for each statistic:

- ``rates``: TPR at each fixed FPR with its Clopper–Pearson interval, AUROC with the Hanley–McNeil
  interval, the advantage max(TPR − FPR) with a DKW interval; beside it Yeom et al.'s fixed
  threshold (the members' mean loss) as advantage ``yeom``.
- ``epsilon_star``: Epsilon* (Negoescu et al. Def. 2, App. B) from the logit losses beside its null
  level at the same n (label permutations) and a bootstrap spread of ``target.bounds.bootstrap``
  resamples (an estimate).
- With ``target.bounds.declared``: every accountant's ε for the declared DP-SGD
  (:func:`dpaudit.bounds.accountants.epsilons_for_event`), an upper bound IF the model was trained
  that way — the owner's declaration, which the audit cannot check.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
from sklearn.metrics import roc_curve

from dpaudit.attacks.membership import loss_threshold_attack
from dpaudit.bounds.accountants import ACCOUNTANTS, epsilons_for_event
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.epsilon_star.null import NULL_PERMUTATIONS
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.target.config import DeclaredTraining, TargetConfig
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow
from dpaudit.scores import group_key, read_score_sets
from dpaudit.table import ResultRow, ResultsTable

#: The attacks in a fixed order; the headline row is the first (offline LiRA, chosen before the
#: audit ran, so no maximum over attacks is taken).
ATTACKS = {"lira_offline": "offline LiRA (Carlini et al.)", "loss_threshold": "loss threshold (Yeom et al.)"}
#: The estimator text of every target summary row: its ε-lower cell is empty on purpose.
EVIDENCE_ONLY = "per-model evidence; no bound on the training algorithm"


def _roc(scores: np.ndarray, is_member: np.ndarray, attack: str) -> pd.DataFrame:
    fpr, tpr, _ = roc_curve(is_member.astype(int), scores)
    return pd.DataFrame({"attack": attack, "fpr": fpr, "tpr": tpr})


def evidence_of(table: ResultsTable, attack: str) -> dict[str, float]:
    """The ``rates`` rows of one attack as ``{quantity: value, quantity_low: …, quantity_high: …}``."""
    out: dict[str, float] = {}
    for row in table.select(group=group_key(attack=attack)):
        if row.estimator in ("threshold", "scores"):
            out[row.quantity] = finite_number(row.value)
            out[f"{row.quantity}_low"] = finite_number(row.low)
            out[f"{row.quantity}_high"] = finite_number(row.high)
    return out


def declared_epsilons(declared: DeclaredTraining, audit_delta: float) -> dict[str, float]:
    """Every accountant's ε for the declared DP-SGD at its δ (the audit's δ when none is declared)."""
    if not declared.declared:
        return {}
    delta = declared.delta if declared.delta is not None else audit_delta
    return epsilons_for_event(declared.dp_event(), delta)


def bounds(config: TargetConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The results table (rates, Epsilon*, declared accountants, utility), the ROC table, summary rows."""
    sets = {s.group["attack"]: s for s in read_score_sets(audit.scores_path)}
    star_set = sets["logit_loss"]
    sets["logit_loss"] = replace(star_set, params={**star_set.params, "n_bootstrap": config.bounds.bootstrap})
    with open_npz(audit.losses_path) as f:
        accuracy = float(f["accuracy"])
    confidence = config.attack.confidence
    table = audit_score_sets(list(sets.values()), confidence)
    loss = sets["loss_threshold"]
    yeom_attack = loss_threshold_attack(-loss.in_scores, -loss.out_scores)
    yeom = {"threshold": yeom_attack.threshold, "tpr": yeom_attack.tpr, "fpr": yeom_attack.fpr}
    table.add(ResultRow("attack=loss_threshold", "advantage", yeom_attack.advantage, "yeom", "rate"))
    table.add(ResultRow("", "utility", accuracy, "accuracy_nonmembers", "utility"))
    declared = config.bounds.declared
    upper = declared_epsilons(declared, manifest.delta)
    table.extend(ResultRow("", "epsilon_upper", v, name, "accountant") for name, v in upper.items())
    evidence = {name: evidence_of(table, name) for name in ATTACKS}
    star_rows = {r.estimator: r for r in table.select("epsilon_star", "attack=logit_loss")}
    star = {
        "value": finite_number(star_rows["parametric"].value),
        "null_mean": finite_number(star_rows["null_mean"].value),
        "null_high": finite_number(star_rows["null_high"].value),
        "above_null": float(star_rows["parametric"].value > star_rows["null_high"].value),
        "null_permutations": float(NULL_PERMUTATIONS),
        "spread_low": finite_number(star_rows["parametric"].low),
        "spread_high": finite_number(star_rows["parametric"].high),
        "delta": finite_number(manifest.delta),
    }
    declared_facts = None
    if upper:
        declared_facts = {
            "sampling_rate": declared.q,
            "steps": float(declared.total_steps),
            "noise_multiplier": float(declared.noise_multiplier),  # type: ignore[arg-type]
            "delta": float(declared.delta if declared.delta is not None else manifest.delta),
            "epsilon_upper": {a: finite_number(upper[a]) for a in ACCOUNTANTS},
        }
        if declared.clip_norm is not None:
            declared_facts["clip_norm"] = float(declared.clip_norm)
    epsilon_upper = {a: float(v) for a, v in upper.items() if math.isfinite(v)}
    star_scores = {"epsilon_star": star["value"], "epsilon_star_null_high": star["null_high"]}
    rows = [
        SummaryRow(
            setting=f"your model: {label}",
            epsilon_upper=dict(epsilon_upper),
            epsilon_lower=None,
            epsilon_lower_estimator=EVIDENCE_ONLY,
            scores={**star_scores, "auroc": evidence[name]["auroc"]},
            utility_name="accuracy on non-members",
            utility=accuracy,
        )
        for name, label in ATTACKS.items()
    ]
    roc = pd.concat([_roc(sets[name].scores, sets[name].member, name) for name in ATTACKS], ignore_index=True)
    context = {
        "evidence": evidence,
        "epsilon_star": star,
        "declared": declared_facts,
        "yeom": yeom,
        "headline": 0,
    }
    return BoundsResult(
        metrics=table.metrics(), plots={"roc.csv": roc}, summary=rows, context=context, table=table
    )
