"""Bounds stage of the target audit: the scores auditor on both attacks, and Epsilon*.

- :func:`dpaudit.bounds.auditor.audit_scores` turns each attack's member / non-member scores into ε
  lower bounds (threshold sweep with split or Bonferroni selection, GDP), TPR at fixed FPR, AUROC and
  advantage with intervals at the joint ``target.attack.confidence``. One trained model and its
  records form one experiment of many records, as in Carlini et al.'s evaluation; the bounds hold for
  this model instance and these records.
- Epsilon* with its bootstrap interval and control (Negoescu et al. Def. 2 and App. B;
  :func:`dpaudit.bounds.epsilon_star.epsilon_star_with_interval`) from the logit losses.

No accountant applies: dpaudit does not know how the model was trained, so there is no upper bound.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import roc_curve

from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.epsilon_star import epsilon_star_with_interval
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.target.attack import SCORES_FILE
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.layout import Audit
from dpaudit.report.spec import SummaryRow

ATTACKS = {"loss_threshold": "loss threshold (Yeom et al.)", "lira_offline": "offline LiRA (Carlini et al.)"}


def _roc(scores: np.ndarray, is_member: np.ndarray, attack: str) -> pd.DataFrame:
    fpr, tpr, _ = roc_curve(is_member.astype(int), scores)
    return pd.DataFrame({"attack": attack, "fpr": fpr, "tpr": tpr})


def bounds(config: TargetConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """Metrics (numbers only), the ROC table and the summary row of the audited model."""
    with np.load(audit.attack_dir / SCORES_FILE, allow_pickle=False) as f:
        scores = {name: f[name] for name in ATTACKS}
        is_member = f["is_member"]
        yeom = {k: float(f[f"yeom_{k}"]) for k in ("threshold", "tpr", "fpr")}
    with np.load(audit.losses_path, allow_pickle=False) as f:
        logit_loss, accuracy = f["logit_loss"], float(f["accuracy"])
    confidence = config.attack.confidence
    audits = {
        name: audit_scores(s[is_member], s[~is_member], delta=manifest.delta, confidence=confidence,
                           fpr_levels=config.attack.fpr_levels, seed=manifest.seeds["seed"])
        for name, s in scores.items()
    }
    star = epsilon_star_with_interval(logit_loss[is_member], logit_loss[~is_member], delta=manifest.delta,
                                      confidence=confidence, n_bootstrap=config.bounds.bootstrap,
                                      seed=manifest.seeds["seed"])
    metrics: dict = {name: a.metrics() for name, a in audits.items()}
    metrics["loss_threshold"].update({f"yeom_{k}": finite_number(v) for k, v in yeom.items()})
    metrics["epsilon_star"] = {
        "value": finite_number(star.epsilon_star),
        "interval_low": finite_number(star.interval_low),
        "interval_high": finite_number(star.interval_high),
        "control": finite_number(star.control) if np.isfinite(star.control) else 0.0,
        "control_high": finite_number(star.control_high) if np.isfinite(star.control_high) else 0.0,
        "distinguishable": float(star.distinguishable),
        "delta": finite_number(star.delta),
    }
    metrics["utility"] = {"accuracy_nonmembers": accuracy}
    best_name = max(audits, key=lambda n: audits[n].best_valid().epsilon)
    best = audits[best_name].best_valid()
    rows = [
        SummaryRow(
            setting=f"{label}",
            epsilon_upper={},
            epsilon_lower=finite_number(audits[name].best_valid().epsilon),
            epsilon_lower_estimator=audits[name].best_valid().estimator,
            scores={"epsilon_star": finite_number(star.epsilon_star), "auroc": audits[name].auroc[0]},
            utility_name="accuracy on non-members",
            utility=accuracy,
        )
        for name, label in ATTACKS.items()
    ]
    headline = SummaryRow(
        setting="your model (best attack)",
        epsilon_upper={},
        epsilon_lower=finite_number(best.epsilon),
        epsilon_lower_estimator=f"{best_name}: {best.estimator}",
        scores={"epsilon_star": finite_number(star.epsilon_star), "auroc": audits[best_name].auroc[0]},
        utility_name="accuracy on non-members",
        utility=accuracy,
    )
    roc = pd.concat([_roc(s, is_member, name) for name, s in scores.items()], ignore_index=True)
    context = {
        "audits": {name: a.metrics() for name, a in audits.items()},
        "epsilon_star": metrics["epsilon_star"],
        "best_attack": best_name,
        "yeom": yeom,
        "headline": 0,
    }
    return BoundsResult(metrics=metrics, plots={"roc.csv": roc}, summary=[headline, *rows], context=context)
