"""Bounds stage of the target audit: per-model membership evidence, Epsilon*, and declared accountants.

The audited model is ONE model trained once on the user's member list. What its member and
non-member scores show is evidence about this model and these records, not a lower bound on ε of the
training algorithm: the audit did not choose who became a member, so a distribution shift between
the two lists (a leak-free ε = 0 mechanism whose members differ from its non-members by 0.2 sd)
raises every statistic as a real leak would. A bound on the algorithm needs its own randomness:
shadow models retrained under the declared algorithm, or one run with canaries included with
probability ½ (Steinke et al. 2023). So nothing here is called an ε lower bound, and the summary
row's ε-lower cell stays empty. Per attack, at ``target.attack.confidence`` for each statistic:

- TPR at each fixed FPR with its Clopper–Pearson interval (:func:`dpaudit.bounds.auditor._tpr_at_fpr`),
  AUROC with the Hanley–McNeil interval (:func:`~dpaudit.bounds.auditor._auroc`), the advantage
  max(TPR − FPR) with a DKW interval (:func:`~dpaudit.bounds.auditor._advantage`).
- Epsilon* (Negoescu et al. Def. 2, App. B) from the logit losses beside its null level at the same
  n (label permutations) and a bootstrap spread
  (:func:`dpaudit.bounds.epsilon_star.epsilon_star_with_null`).
- With ``target.bounds.declared``: every accountant's ε for the declared DP-SGD
  (:func:`dpaudit.bounds.accountants.epsilons_for_event`), an upper bound IF the model was trained
  that way — the owner's declaration, which the audit cannot check.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import roc_curve

from dpaudit.bounds.accountants import ACCOUNTANTS, epsilons_for_event
from dpaudit.bounds.auditor import _advantage, _auroc, _level_tag, _tpr_at_fpr
from dpaudit.bounds.epsilon_star import epsilon_star_with_null
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.target.attack import SCORES_FILE
from dpaudit.experiments.target.config import DeclaredTraining, TargetConfig
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow

#: The attacks in a fixed order; the headline row is the first (offline LiRA, chosen before the
#: audit ran, so no maximum over attacks is taken).
ATTACKS = {"lira_offline": "offline LiRA (Carlini et al.)", "loss_threshold": "loss threshold (Yeom et al.)"}
#: The estimator text of every target summary row: its ε-lower cell is empty on purpose.
EVIDENCE_ONLY = "per-model evidence; no bound on the training algorithm"


def _roc(scores: np.ndarray, is_member: np.ndarray, attack: str) -> pd.DataFrame:
    fpr, tpr, _ = roc_curve(is_member.astype(int), scores)
    return pd.DataFrame({"attack": attack, "fpr": fpr, "tpr": tpr})


def membership_evidence(
    member_scores: np.ndarray, nonmember_scores: np.ndarray, fpr_levels: tuple[float, ...], confidence: float
) -> dict[str, float]:
    """TPR at each FPR level, AUROC and advantage of one attack on one model, each with its interval.

    Higher score = "member". Each interval is two-sided at ``confidence`` on its own (they are not
    joint). Keys: ``tpr_at_fpr_<level>`` (+ ``_low``, ``_high``, ``_achieved_fpr``), ``auroc``,
    ``advantage`` (+ ``_low``, ``_high``), ``confidence``, ``n_members``, ``n_nonmembers``.
    """
    pos = np.asarray(member_scores, dtype=np.float64)
    neg = np.asarray(nonmember_scores, dtype=np.float64)
    out: dict[str, float] = {"confidence": float(confidence), "n_members": float(pos.size),
                             "n_nonmembers": float(neg.size)}
    for level in fpr_levels:
        tag = _level_tag(level)
        tpr, low, high, achieved = _tpr_at_fpr(pos, neg, level, confidence)
        out.update({f"tpr_at_fpr_{tag}": tpr, f"tpr_at_fpr_{tag}_low": low, f"tpr_at_fpr_{tag}_high": high,
                    f"tpr_at_fpr_{tag}_achieved_fpr": achieved})
    out["auroc"], out["auroc_low"], out["auroc_high"] = _auroc(pos, neg, confidence)
    out["advantage"], out["advantage_low"], out["advantage_high"] = _advantage(pos, neg, confidence)
    return {key: finite_number(value) for key, value in out.items()}


def declared_epsilons(declared: DeclaredTraining, audit_delta: float) -> dict[str, float]:
    """Every accountant's ε for the declared DP-SGD at its δ (the audit's δ when none is declared)."""
    if not declared.declared:
        return {}
    delta = declared.delta if declared.delta is not None else audit_delta
    return epsilons_for_event(declared.dp_event(), delta)


def bounds(config: TargetConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """Metrics (numbers only), the ROC table and the summary rows of the audited model."""
    with np.load(audit.attack_dir / SCORES_FILE, allow_pickle=False) as f:
        scores = {name: f[name] for name in ATTACKS}
        is_member = f["is_member"].astype(bool)
        yeom = {k: float(f[f"yeom_{k}"]) for k in ("threshold", "tpr", "fpr")}
    with np.load(audit.losses_path, allow_pickle=False) as f:
        logit_loss, accuracy = f["logit_loss"], float(f["accuracy"])
    confidence = config.attack.confidence
    evidence = {
        name: membership_evidence(s[is_member], s[~is_member], config.attack.fpr_levels, confidence)
        for name, s in scores.items()
    }
    star = epsilon_star_with_null(logit_loss[is_member], logit_loss[~is_member], delta=manifest.delta,
                                  n_bootstrap=config.bounds.bootstrap, spread_level=confidence,
                                  seed=manifest.seeds["seed"])
    declared = config.bounds.declared
    upper = declared_epsilons(declared, manifest.delta)
    metrics: dict[str, Any] = {name: dict(e) for name, e in evidence.items()}
    metrics["loss_threshold"].update({f"yeom_{k}": finite_number(v) for k, v in yeom.items()})
    metrics["epsilon_star"] = {
        "value": finite_number(star.epsilon_star),
        "null_mean": finite_number(star.null_mean),
        "null_high": finite_number(star.null_high),
        "null_pvalue": finite_number(star.null_pvalue),
        "above_null": float(star.above_null),
        "null_permutations": float(star.null_permutations),
        "spread_low": finite_number(star.spread_low),
        "spread_high": finite_number(star.spread_high),
        "delta": finite_number(star.delta),
    }
    metrics["utility"] = {"accuracy_nonmembers": accuracy}
    if upper:
        metrics["declared"] = {
            "sampling_rate": declared.q,
            "steps": float(declared.total_steps),
            "noise_multiplier": float(declared.noise_multiplier),  # type: ignore[arg-type]
            "delta": float(declared.delta if declared.delta is not None else manifest.delta),
            "epsilon_upper": {a: finite_number(upper[a]) for a in ACCOUNTANTS},
        }
        if declared.clip_norm is not None:
            metrics["declared"]["clip_norm"] = float(declared.clip_norm)
    epsilon_upper = {a: float(v) for a, v in upper.items() if math.isfinite(v)}
    star_scores = {"epsilon_star": finite_number(star.epsilon_star),
                   "epsilon_star_null_high": finite_number(star.null_high)}
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
    roc = pd.concat([_roc(s, is_member, name) for name, s in scores.items()], ignore_index=True)
    context = {
        "evidence": evidence,
        "epsilon_star": metrics["epsilon_star"],
        "declared": metrics.get("declared"),
        "yeom": yeom,
        "headline": 0,
    }
    return BoundsResult(metrics=metrics, plots={"roc.csv": roc}, summary=rows, context=context)
