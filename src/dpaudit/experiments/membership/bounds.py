"""Bounds stage of the membership audit: metrics, plot tables and summary rows.

- ε upper bounds under every accountant for the mechanism each DP strategy's training recorded
  (:func:`dpaudit.bounds.accountants.epsilons_for_event`).
- The attack stage's score sets (two per model) go through
  :func:`dpaudit.bounds.audit.audit_score_sets` once. The valid ε lower bound on the MECHANISM is
  the ``loss_threshold`` estimator's one-run bound (Steinke, Nasr & Jagielski 2023, "Privacy
  Auditing with One (1) Training Run", Thm. 5.2; :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`),
  which holds because every candidate record was included independently with probability 1/2
  before training (:func:`dpaudit.experiments.membership.design.draw_splits`). One headline scope
  per strategy; the attack stage pre-registers the first repeat's bound as its only counted bound
  (the one-run p-value has a floor from δ, so splitting the level over the repeats can take every
  bound to 0), which therefore holds at the full confidence; the other repeats' bounds are reported
  beside it, uncounted. The estimator also gives TPR at 0.1/1/5 % FPR, AUROC and the
  advantage, each with its interval.
- Per-model numbers that are NOT bounds on the mechanism, estimates in the table:
  ``per_model_test`` (Clopper–Pearson on one model's member / non-member split), Prop. 3 at the
  naive advantage and Epsilon* (``epsilon_star`` estimator, Negoescu et al.) with its null level
  at the same n (label permutations of the pooled losses) and its bootstrap spread (not a
  confidence interval). The strategy frame averages them over repeats.
- ``region.csv``: only valid lower bounds and the accountants' upper bounds against the noise
  multiplier (Erlingsson Fig. 2, log–log); ``estimates.csv``: the per-model statistics and
  estimates, drawn in their own figure.
- ``rotated_table.csv``: noise multiplier, accuracy, attack TPR at the fixed FPR and ε under each
  accountant, one row per noise level (Erlingsson Table 1, with the valid lower bound).
- ``privacy_utility.csv``: Epsilon* against utility per strategy, Pareto frontier marked
  (Negoescu Figs. 1–2).

References: :data:`dpaudit.references.ERLINGSSON`, :data:`dpaudit.references.NEGOESCU`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import STRATEGY_KINDS, Strategy, manifest_strategies
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow
from dpaudit.scores import group_key, read_score_sets
from dpaudit.table import ResultRow, ResultsTable, fpr_tag

ACCOUNTANT_ORDER = ("naive", "advanced", "rdp", "pld")
#: Per-model columns of the strategy frame → (score set kind, quantity, estimator) in the results
#: table; ``<fpr>`` is the configured FPR's tag. Each column is averaged over a strategy's repeats.
MODEL_FIELDS: dict[str, tuple[str, str, str]] = {
    "yeom_advantage": ("loss", "advantage", "yeom"),
    "yeom_epsilon": ("loss", "epsilon_estimate", "yeom_prop3"),
    "tpr": ("loss", "tpr_at_fpr_<fpr>", "threshold"),
    "epsilon_per_model_test": ("loss", "epsilon_estimate", "per_model_test"),
    "epsilon_heldout_prop3": ("loss", "epsilon_estimate", "heldout_prop3"),
    "naive_advantage": ("loss", "advantage", "scores"),
    "epsilon_naive_estimate": ("loss", "epsilon_estimate", "naive_prop3"),
    "auroc_attack": ("loss", "auroc", "scores"),
    "epsilon_one_run": ("loss", "epsilon_lower", "one_run"),
    "epsilon_star_parametric": ("logit", "epsilon_star", "parametric"),
    "epsilon_star_empirical": ("logit", "epsilon_star", "empirical"),
    "epsilon_star_null_mean": ("logit", "epsilon_star", "null_mean"),
    "epsilon_star_null_high": ("logit", "epsilon_star", "null_high"),
}
#: Columns taken from a row's interval (``low``/``high``) rather than its value.
INTERVAL_FIELDS = {
    "tpr": ("tpr_low", "tpr_high"),
    "naive_advantage": ("advantage_low", "advantage_high"),
    "auroc_attack": ("auroc_attack_low", "auroc_attack_high"),
    "epsilon_star_parametric": ("epsilon_star_spread_low", "epsilon_star_spread_high"),
}


def model_key(strategy: str, kind: str, repeat: int) -> str:
    """The results-table group of one model's score set (``kind``: loss, logit)."""
    return group_key(setting=strategy, attack=f"{kind}-{repeat}")


def strategy_key(strategy: str) -> str:
    """The results-table group of a strategy's own rows (accountants, utility)."""
    return group_key(setting=strategy)


def model_columns(
    table: ResultsTable, strategy: str, repeats: Iterable[int], fpr: float
) -> dict[str, np.ndarray]:
    """Every :data:`MODEL_FIELDS` column (and interval column) for a strategy's models, from the table."""
    out: dict[str, list[float]] = {}
    for r in repeats:
        for name, (kind, quantity, estimator) in MODEL_FIELDS.items():
            found = table.select(quantity.replace("<fpr>", fpr_tag(fpr)), model_key(strategy, kind, r),
                                 estimator=estimator)  # fmt: skip
            row = found[0] if found else None
            out.setdefault(name, []).append(row.value if row else math.nan)
            for column, attr in zip(INTERVAL_FIELDS.get(name, ()), ("low", "high"), strict=False):
                out.setdefault(column, []).append(getattr(row, attr) if row else math.nan)
    arrays = {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}
    arrays["epsilon_star_above_null"] = (
        arrays["epsilon_star_parametric"] > arrays["epsilon_star_null_high"]
    ).astype(np.float64)
    return arrays


def _mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return float("inf") if np.any(np.isposinf(values)) else float("nan")
    if np.any(np.isposinf(values)):
        return float("inf")
    return float(finite.mean())


def strategy_epsilons(strategy: Strategy, manifest: TrainManifest) -> dict[str, float]:
    """ε under every accountant for a DP strategy's recorded mechanism at the manifest's δ.

    Empty for non-DP strategies (their ε is ∞; the report says so rather than a metric).
    """
    if not strategy.spec.private:
        return {}
    return epsilons_for_event(manifest.mechanisms[strategy.name].dp_event(), manifest.delta)


def _optional(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def pareto_frontier(privacy_loss: np.ndarray, utility: np.ndarray) -> np.ndarray:
    """Boolean mask of the convex privacy–utility Pareto frontier (Negoescu §4.2).

    A strategy is on the frontier when no other strategy, nor any convex combination of two
    others, has at most its privacy loss and at least its utility with one strictly better: the
    upper-left convex hull of the non-dominated points. Hand-written (a monotone-chain hull over
    a handful of points); NaN points are never on the frontier.
    """
    loss = np.asarray(privacy_loss, dtype=float)
    util = np.asarray(utility, dtype=float)
    if loss.shape != util.shape or loss.ndim != 1:
        raise ValueError(
            f"privacy_loss and utility must be 1-d of equal length, got {loss.shape}, {util.shape}"
        )
    mask = np.zeros(loss.shape, dtype=bool)
    finite = np.flatnonzero(np.isfinite(loss) & np.isfinite(util))
    if finite.size == 0:
        return mask
    order = finite[np.lexsort((-util[finite], loss[finite]))]  # by loss ascending, utility descending
    staircase: list[int] = []  # non-dominated: more utility than every point with less privacy loss
    for i in order:
        if not staircase or util[i] > util[staircase[-1]]:
            staircase.append(int(i))
    hull: list[int] = []
    for i in staircase:
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (loss[b] - loss[a]) * (util[i] - util[a]) - (util[b] - util[a]) * (loss[i] - loss[a])
            if cross >= 0:  # b lies on or below the segment a→i: dominated by a convex combination
                hull.pop()
            else:
                break
        hull.append(i)
    mask[hull] = True
    return mask


def bounds(config: MembershipConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The results table (score sets, accountants, utility), plot tables and summary rows."""
    with open_npz(audit.losses_path) as f:
        losses = {k: f[k] for k in f.files if k not in ("logit", "ce")}
    confidence = float(config.attack.confidence)
    fpr = float(config.attack.fpr)
    tpr_name = f"tpr_at_fpr_{fpr_tag(fpr)}"
    one_run = math.isclose(float(manifest.facts.get("inclusion_probability", 0.0)), 0.5)
    # One headline scope per strategy (its counted bounds share 1 − confidence; one is pre-registered).
    table = audit_score_sets(
        read_score_sets(audit.scores_path), confidence, scope=lambda s: s.group["setting"]
    )
    strategies = manifest_strategies(manifest)
    binary = int(manifest.facts["num_classes"]) == 2
    measure = "auroc" if binary else "accuracy"  # the estimator name of the table's utility rows
    utility_name = f"test {'AUROC' if binary else 'accuracy'}"  # the audited model's, on held-out data
    model_strategy = np.asarray(losses["model_strategy"])
    model_repeat = np.asarray(losses["model_repeat"])
    utility_all = np.asarray(losses["auroc"] if binary else losses["accuracy"], dtype=float)

    rows: list[dict[str, Any]] = []
    columns: list[dict[str, np.ndarray]] = []
    headlines = []
    checks = dict.fromkeys(
        (
            "dp_models",
            "one_run_above_rdp",
            "epsilon_star_not_above_null",
            "epsilon_star_above_rdp",
            "epsilon_star_above_rdp_and_null",
            "rdp_or_pld_above_naive_or_advanced",
            "epsilon_star_zero_despite_leak",
        ),
        0,
    )
    for si, s in enumerate(strategies):
        sel = model_strategy == si
        attack = model_columns(table, s.name, model_repeat[sel], fpr)
        columns.append(attack)
        eps_upper = strategy_epsilons(s, manifest)
        key = strategy_key(s.name)
        table.extend(ResultRow(key, "epsilon_upper", v, name, "accountant") for name, v in eps_upper.items())
        table.add(ResultRow(key, "utility", _mean(utility_all[sel]), measure, "utility"))
        checks["epsilon_star_not_above_null"] += int(np.sum(attack["epsilon_star_above_null"] == 0))
        # Epsilon* of 0 on a model whose losses separate members well (best advantage > 0.5): no
        # threshold had both rates inside the estimator's band. Flagged: it is no evidence of privacy.
        checks["epsilon_star_zero_despite_leak"] += int(
            np.sum((attack["epsilon_star_parametric"] == 0.0) & (attack["naive_advantage"] > 0.5))
        )
        if eps_upper:
            checks["dp_models"] += int(sel.sum())
            checks["one_run_above_rdp"] += int(np.sum(attack["epsilon_one_run"] > eps_upper["rdp"]))
            star = attack["epsilon_star_parametric"]
            checks["epsilon_star_above_rdp"] += int(np.sum(star > eps_upper["rdp"]))
            checks["epsilon_star_above_rdp_and_null"] += int(
                np.sum((star > eps_upper["rdp"]) & (attack["epsilon_star_above_null"] == 1.0))
            )
            tight = min(eps_upper["rdp"], eps_upper["pld"])
            loose = min(eps_upper["naive"], eps_upper["advanced"])
            checks["rdp_or_pld_above_naive_or_advanced"] += int(tight > loose * (1 + 1e-9))
        best = table.headline([model_key(s.name, "loss", int(r)) for r in model_repeat[sel]])
        headlines.append(best)
        finite = utility_all[sel][np.isfinite(utility_all[sel])]
        row: dict[str, Any] = {
            "strategy": s.name,
            "label": s.label,
            "kind": s.kind,
            "noise_multiplier": s.noise_multiplier if s.noise_multiplier is not None else float("nan"),
            "target_epsilon": s.target_epsilon if s.target_epsilon is not None else float("nan"),
            "epochs": s.epochs if s.epochs is not None else float("nan"),
            "utility": _mean(utility_all[sel]),
            "utility_min": float(finite.min()) if finite.size else np.nan,
            "utility_max": float(finite.max()) if finite.size else np.nan,
            "accuracy": _mean(losses["accuracy"][sel]),
        }
        for name, values in attack.items():
            row[name] = _mean(values)
        row[tpr_name], row[f"{tpr_name}_low"], row[f"{tpr_name}_high"] = (
            row.pop("tpr"),
            row.pop("tpr_low"),
            row.pop("tpr_high"),
        )
        row["epsilon_lower_one_run"] = best.value if one_run else float("nan")
        row["epsilon_star_min"] = float(np.min(attack["epsilon_star_parametric"]))
        row["epsilon_star_max"] = float(np.max(attack["epsilon_star_parametric"]))
        for acc in ACCOUNTANT_ORDER:
            row[f"epsilon_{acc}"] = eps_upper.get(acc, float("nan"))
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame["pareto"] = pareto_frontier(
        frame["epsilon_star_parametric"].to_numpy(), frame["utility"].to_numpy()
    )

    private = frame["kind"].map(lambda kind: STRATEGY_KINDS[kind].private).astype(bool)
    dp = frame[private].sort_values("noise_multiplier")
    # The region of privacy: valid lower bounds on the mechanism and the accountants, nothing else.
    region_cols = [
        "strategy",
        "noise_multiplier",
        "epsilon_lower_one_run",
        *(f"epsilon_{a}" for a in ACCOUNTANT_ORDER),
    ]
    plots = {"region.csv": dp[region_cols]}
    estimate_cols = [
        "strategy",
        "noise_multiplier",
        "epsilon_per_model_test",
        "epsilon_naive_estimate",
        "epsilon_star_parametric",
        "epsilon_star_null_mean",
        "epsilon_rdp",
    ]
    plots["estimates.csv"] = dp[estimate_cols]
    rotated_cols = [
        "noise_multiplier",
        "strategy",
        "accuracy",
        "utility",
        tpr_name,
        f"{tpr_name}_low",
        f"{tpr_name}_high",
        "epsilon_lower_one_run",
        *(f"epsilon_{a}" for a in ACCOUNTANT_ORDER),
    ]
    rotated = dp.sort_values("noise_multiplier", ascending=False)[rotated_cols]
    plots["rotated_table.csv"] = rotated
    pu_cols = [
        "strategy",
        "label",
        "kind",
        "epsilon_star_parametric",
        "epsilon_star_min",
        "epsilon_star_max",
        "epsilon_star_spread_low",
        "epsilon_star_spread_high",
        "epsilon_star_null_mean",
        "epsilon_star_null_high",
        "epsilon_star_above_null",
        "utility",
        "utility_min",
        "utility_max",
        "pareto",
    ]
    plots["privacy_utility.csv"] = frame[pu_cols]

    summary: list[SummaryRow] = []
    for s, rec, best in zip(strategies, frame.to_dict("records"), headlines, strict=True):
        summary.append(
            SummaryRow(
                setting=s.label,
                epsilon_upper={
                    a: float(rec[f"epsilon_{a}"])
                    for a in ACCOUNTANT_ORDER
                    if math.isfinite(rec[f"epsilon_{a}"])
                },
                epsilon_lower=best.value if one_run else None,
                epsilon_lower_estimator=best.estimator if one_run else None,
                epsilon_lower_assumes=best.assumes if one_run else None,
                scores={
                    "epsilon_star": _optional(rec["epsilon_star_parametric"]),
                    "epsilon_star_null_high": _optional(rec["epsilon_star_null_high"]),
                },
                utility_name=utility_name,
                utility=_optional(rec["utility"]),
                confidence=best.level if one_run else None,
            )
        )
    return BoundsResult(
        metrics=table.metrics(),
        plots=plots,
        summary=summary,
        context={
            "frame": frame.to_dict("list"),
            "rotated": rotated.to_dict("records"),
            "checks": checks,
            "utility_name": utility_name,
            "fpr": fpr,
            "tpr_column": tpr_name,
            "headline_target_epsilon": config.bounds.headline_target_epsilon,
            "confidence": confidence,
            "one_run": one_run,
        },
        table=table,
    )
