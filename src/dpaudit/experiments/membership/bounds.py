"""Bounds stage of the membership audit: metrics, plot tables and summary rows.

- ε upper bounds under every accountant for the mechanism each DP strategy's training recorded
  (:func:`dpaudit.bounds.accountants.epsilons_for_event`).
- ``region.csv``: lower and upper bounds against the noise multiplier (Erlingsson Fig. 2, log–log).
- ``rotated_table.csv``: noise multiplier, accuracy, attack TPR at the fixed FPR and ε under each
  accountant, one row per noise level (Erlingsson Table 1, with Table 2's lower bound).
- ``privacy_utility.csv``: Epsilon* against utility per strategy, Pareto frontier marked
  (Negoescu Figs. 1–2).

References: :data:`dpaudit.references.ERLINGSSON`, :data:`dpaudit.references.NEGOESCU`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import ATTACK_FILE, Strategy, manifest_strategies
from dpaudit.layout import Audit
from dpaudit.report.spec import SummaryRow

ACCOUNTANT_ORDER = ("naive", "advanced", "rdp", "pld")
PER_MODEL_FIELDS = (
    "yeom_tpr",
    "yeom_fpr",
    "yeom_advantage",
    "yeom_epsilon",
    "tpr_at_fpr",
    "valid_advantage",
    "epsilon_lower_valid",
    "epsilon_heldout_prop3",
    "naive_advantage",
    "epsilon_lower_naive",
    "epsilon_star_parametric",
    "epsilon_star_empirical",
    "ks_pvalue",
    "epsilon_star_control",
)


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
    if strategy.kind != "dp":
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


def summarise(values: Iterable[float]) -> dict[str, float]:
    """Mean, min and max of the finite values (an empty dict when there are none)."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if arr.size == 0:
        return {}
    return {"mean": float(arr.mean()), "min": float(arr.min()), "max": float(arr.max())}


def finite_items(mapping: Mapping[str, float]) -> dict[str, float]:
    """Drop non-finite values (metrics leaves must be numbers; ∞ is said in the report instead)."""
    return {k: float(v) for k, v in mapping.items() if v is not None and math.isfinite(float(v))}


def bounds(config: MembershipConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """Accountants' ε for every DP strategy, the metrics (numbers only), plot tables and summary rows."""
    with np.load(audit.losses_path, allow_pickle=False) as f:
        losses = {k: f[k] for k in f.files if not k.endswith(("_ce", "_logit"))}
    with np.load(audit.attack_dir / ATTACK_FILE, allow_pickle=False) as f:
        attack = {k: f[k] for k in f.files}
    strategies = manifest_strategies(manifest)
    delta = manifest.delta
    binary = int(manifest.facts["num_classes"]) == 2
    utility_name = "AUROC" if binary else "accuracy"
    model_strategy = np.asarray(attack["model_strategy"])
    utility_all = np.asarray(losses["auroc"] if binary else losses["accuracy"], dtype=float)

    metrics_strategies: dict[str, Any] = {}
    table: list[dict[str, Any]] = []
    checks = {
        "dp_models": 0,
        "valid_lower_above_rdp": 0,
        "epsilon_star_above_rdp": 0,
        "epsilon_star_above_rdp_and_control": 0,
        "rdp_or_pld_above_naive_or_advanced": 0,
        "epsilon_star_zero_despite_leak": 0,
    }
    # Epsilon* of 0 on a model whose losses separate members well (best advantage > 0.5) means no
    # threshold had both rates inside the estimator's band: flagged, it is not evidence of privacy.
    checks["epsilon_star_zero_despite_leak"] = int(
        np.sum((attack["epsilon_star_parametric"] == 0.0) & (attack["naive_advantage"] > 0.5))
    )
    for si, s in enumerate(strategies):
        sel = model_strategy == si
        eps_upper = strategy_epsilons(s, manifest)
        entry: dict[str, Any] = {}
        for key in ("noise_multiplier", "target_epsilon", "sampling_rate", "steps", "epochs"):
            value = getattr(s, key)
            if value is not None:
                entry[key] = float(value)
        if eps_upper:
            entry["epsilon_upper"] = finite_items(eps_upper)
            checks["dp_models"] += int(sel.sum())
            checks["valid_lower_above_rdp"] += int(
                np.sum(attack["epsilon_lower_valid"][sel] > eps_upper["rdp"])
            )
            star = attack["epsilon_star_parametric"][sel]
            checks["epsilon_star_above_rdp"] += int(np.sum(star > eps_upper["rdp"]))
            checks["epsilon_star_above_rdp_and_control"] += int(
                np.sum((star > eps_upper["rdp"]) & (star > attack["epsilon_star_control"][sel]))
            )
            tight = min(eps_upper["rdp"], eps_upper["pld"])
            loose = min(eps_upper["naive"], eps_upper["advanced"])
            checks["rdp_or_pld_above_naive_or_advanced"] += int(tight > loose * (1 + 1e-9))
        entry["utility"] = summarise(utility_all[sel])
        entry["accuracy"] = summarise(losses["accuracy"][sel])
        entry["train_accuracy"] = summarise(losses["train_accuracy"][sel])
        if binary:
            entry["auroc"] = summarise(losses["auroc"][sel])
        for name in PER_MODEL_FIELDS:
            stats = summarise(attack[name][sel])
            if stats:
                entry[name] = stats
        metrics_strategies[s.name] = entry
        row = {
            "strategy": s.name,
            "label": s.label,
            "kind": s.kind,
            "noise_multiplier": s.noise_multiplier if s.noise_multiplier is not None else float("nan"),
            "target_epsilon": s.target_epsilon if s.target_epsilon is not None else float("nan"),
            "epochs": s.epochs if s.epochs is not None else float("nan"),
            "utility": _mean(utility_all[sel]),
            "utility_min": float(np.nanmin(utility_all[sel]))
            if np.any(np.isfinite(utility_all[sel]))
            else np.nan,
            "utility_max": float(np.nanmax(utility_all[sel]))
            if np.any(np.isfinite(utility_all[sel]))
            else np.nan,
            "accuracy": _mean(losses["accuracy"][sel]),
        }
        for name in PER_MODEL_FIELDS:
            row[name] = _mean(attack[name][sel])
        row["epsilon_star_min"] = float(np.min(attack["epsilon_star_parametric"][sel]))
        row["epsilon_star_max"] = float(np.max(attack["epsilon_star_parametric"][sel]))
        for acc in ACCOUNTANT_ORDER:
            row[f"epsilon_{acc}"] = eps_upper.get(acc, float("nan"))
        table.append(row)
    frame = pd.DataFrame(table)
    frame["pareto"] = pareto_frontier(
        frame["epsilon_star_parametric"].to_numpy(), frame["utility"].to_numpy()
    )

    metrics = {
        "delta": delta,
        "members": float(manifest.sizes["members"]),
        "nonmembers": float(manifest.sizes["nonmembers"]),
        "repeats": float(manifest.sizes["repeats"]),
        "attack_fpr": float(attack["fpr"]),
        "checks": checks,
        "strategies": metrics_strategies,
    }

    dp = frame[frame["kind"] == "dp"].sort_values("noise_multiplier")
    region_cols = [
        "strategy",
        "noise_multiplier",
        "epsilon_lower_valid",
        "epsilon_lower_naive",
        "epsilon_star_parametric",
        *(f"epsilon_{a}" for a in ACCOUNTANT_ORDER),
    ]
    plots = {"region.csv": dp[region_cols]}
    rotated_cols = [
        "noise_multiplier",
        "strategy",
        "accuracy",
        "utility",
        "tpr_at_fpr",
        "epsilon_lower_valid",
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
        "epsilon_star_control",
        "utility",
        "utility_min",
        "utility_max",
        "pareto",
    ]
    plots["privacy_utility.csv"] = frame[pu_cols]

    estimator = (
        f"loss threshold, {attack['selection']} selection, Clopper–Pearson {float(attack['confidence']):g}"
    )
    summary: list[SummaryRow] = []
    for s, rec in zip(strategies, frame.to_dict("records"), strict=True):
        summary.append(
            SummaryRow(
                setting=s.label,
                epsilon_upper={
                    a: float(rec[f"epsilon_{a}"])
                    for a in ACCOUNTANT_ORDER
                    if math.isfinite(rec[f"epsilon_{a}"])
                },
                epsilon_lower=_optional(rec["epsilon_lower_valid"]),
                epsilon_lower_estimator=estimator,
                scores={"epsilon_star": _optional(rec["epsilon_star_parametric"])},
                utility_name=utility_name,
                utility=_optional(rec["utility"]),
            )
        )
    return BoundsResult(
        metrics=metrics,
        plots=plots,
        summary=summary,
        context={
            "frame": frame.to_dict("list"),
            "rotated": rotated.to_dict("records"),
            "checks": checks,
            "utility_name": utility_name,
            "fpr": float(attack["fpr"]),
            "headline_target_epsilon": config.bounds.headline_target_epsilon,
        },
        csv_float_format="%.6g",
    )
