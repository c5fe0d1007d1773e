"""Bounds stage of the membership audit: metrics, plot tables and summary rows.

- ε upper bounds under every accountant for the mechanism each DP strategy's training recorded
  (:func:`dpaudit.bounds.accountants.epsilons_for_event`).
- The valid ε lower bound on the MECHANISM: every model's loss scores go to the scores auditor
  (:func:`dpaudit.bounds.auditor.audit_scores` with ``one_run=True``), whose one-run bound
  (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run", Thm. 5.2;
  :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`) holds because every candidate record was
  included independently with probability 1/2 before training
  (:func:`dpaudit.experiments.membership.design.draw_splits`). Per strategy the reported bound is
  the smallest over its repeats: each repeat's bound holds at the joint confidence, so their
  minimum does too. The auditor also gives TPR at the fixed FPR, AUROC and the advantage, each with
  its interval.
- Per-model numbers that are NOT bounds on the mechanism, kept under names that say so:
  ``epsilon_per_model_test`` (Clopper–Pearson on one model's member / non-member split),
  ``epsilon_naive_estimate`` and Epsilon* (Negoescu et al.) with its null level at the same n
  (``epsilon_star_null_mean`` / ``_null_high``: label permutations of the pooled losses), whose
  ``above_null`` flag says whether it exceeds what identical distributions give, and its bootstrap
  spread (not a confidence interval).
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
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import epsilons_for_event
from dpaudit.bounds.auditor import audit_scores
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import ATTACK_FILE, STRATEGY_KINDS, Strategy, manifest_strategies
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow

ACCOUNTANT_ORDER = ("naive", "advanced", "rdp", "pld")
PER_MODEL_FIELDS = (
    "yeom_tpr",
    "yeom_fpr",
    "yeom_advantage",
    "yeom_epsilon",
    "tpr_at_fpr",
    "valid_advantage",
    "epsilon_per_model_test",
    "epsilon_heldout_prop3",
    "naive_advantage",
    "epsilon_naive_estimate",
    "epsilon_star_parametric",
    "epsilon_star_spread_low",
    "epsilon_star_spread_high",
    "epsilon_star_empirical",
    "ks_pvalue",
    "epsilon_star_null_mean",
    "epsilon_star_null_high",
    "epsilon_star_above_null",
)
#: What the scores auditor adds per model (computed here, in the bounds stage).
AUDIT_FIELDS = (
    "epsilon_one_run",
    "one_run_guesses",
    "one_run_correct",
    "tpr_at_fpr_low",
    "tpr_at_fpr_high",
    "auroc_attack",
    "auroc_attack_low",
    "auroc_attack_high",
    "advantage_low",
    "advantage_high",
    "members_count",
    "nonmembers_count",
)
#: The estimator label of the valid lower bound on the mechanism.
ONE_RUN = "one-run (Steinke et al. 2023), loss scores"
ONE_RUN_ASSUMES = "each candidate included independently with probability 1/2 (drawn so)"


def audit_models(
    ce: np.ndarray,
    member_mask: np.ndarray,
    delta: float,
    fpr: float,
    confidence: float,
    one_run: bool,
    seed: int,
) -> dict[str, np.ndarray]:
    """The scores auditor on every model's loss scores (higher = member: the negated CE).

    ``ce`` [M, P] and ``member_mask`` [M, P]: each model's losses on the candidate population and
    which candidates it trained on. ``one_run`` adds Steinke et al.'s one-run bound, valid only
    when every candidate's inclusion was an independent fair coin. Returns one array per
    :data:`AUDIT_FIELDS` entry.
    """
    out: dict[str, list[float]] = {name: [] for name in AUDIT_FIELDS}
    for m in range(len(ce)):
        mask = np.asarray(member_mask[m], dtype=bool)
        scores = -np.asarray(ce[m], dtype=np.float64)
        result = audit_scores(
            scores[mask],
            scores[~mask],
            delta=delta,
            confidence=confidence,
            fpr_levels=(fpr,),
            seed=seed * 100_003 + m,
            one_run=one_run,
            headline=("one_run",) if one_run else None,
        )
        bound = result.lower_bounds.get("one_run")
        out["epsilon_one_run"].append(bound.epsilon if bound is not None else float("nan"))
        out["one_run_guesses"].append(bound.details["guesses"] if bound is not None else float("nan"))
        out["one_run_correct"].append(bound.details["correct"] if bound is not None else float("nan"))
        _, low, high, _ = result.tpr_at_fpr[float(fpr)]
        out["tpr_at_fpr_low"].append(low)
        out["tpr_at_fpr_high"].append(high)
        out["auroc_attack"].append(result.auroc[0])
        out["auroc_attack_low"].append(result.auroc[1])
        out["auroc_attack_high"].append(result.auroc[2])
        out["advantage_low"].append(result.advantage[1])
        out["advantage_high"].append(result.advantage[2])
        out["members_count"].append(float(mask.sum()))
        out["nonmembers_count"].append(float((~mask).sum()))
    return {name: np.asarray(values, dtype=np.float64) for name, values in out.items()}


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


def _min_finite(values: np.ndarray) -> float | None:
    finite = np.asarray(values, dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite.min()) if finite.size else None


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
        losses = {k: f[k] for k in f.files if k != "logit"}
    with np.load(audit.attack_dir / ATTACK_FILE, allow_pickle=False) as f:
        attack = {k: f[k] for k in f.files}
    confidence = float(attack["confidence"])
    one_run = math.isclose(float(manifest.facts.get("inclusion_probability", 0.0)), 0.5)
    if "ce" in losses:
        attack.update(
            audit_models(
                losses["ce"],
                losses["member_mask"],
                manifest.delta,
                float(attack["fpr"]),
                confidence,
                one_run,
                int(manifest.seeds["seed"]),
            )
        )
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
        "one_run_above_rdp": 0,
        "epsilon_star_not_above_null": int(np.sum(attack["epsilon_star_above_null"] == 0)),
        "epsilon_star_above_rdp": 0,
        "epsilon_star_above_rdp_and_null": 0,
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
            checks["one_run_above_rdp"] += int(np.sum(attack["epsilon_one_run"][sel] > eps_upper["rdp"]))
            star = attack["epsilon_star_parametric"][sel]
            checks["epsilon_star_above_rdp"] += int(np.sum(star > eps_upper["rdp"]))
            checks["epsilon_star_above_rdp_and_null"] += int(
                np.sum((star > eps_upper["rdp"]) & (attack["epsilon_star_above_null"][sel] == 1.0))
            )
            tight = min(eps_upper["rdp"], eps_upper["pld"])
            loose = min(eps_upper["naive"], eps_upper["advanced"])
            checks["rdp_or_pld_above_naive_or_advanced"] += int(tight > loose * (1 + 1e-9))
        entry["utility"] = summarise(utility_all[sel])
        entry["accuracy"] = summarise(losses["accuracy"][sel])
        entry["train_accuracy"] = summarise(losses["train_accuracy"][sel])
        if binary:
            entry["auroc"] = summarise(losses["auroc"][sel])
        for name in (*PER_MODEL_FIELDS, *AUDIT_FIELDS):
            stats = summarise(attack[name][sel]) if name in attack else {}
            if stats:
                entry[name] = stats
        one_run_bound = _min_finite(attack["epsilon_one_run"][sel]) if "epsilon_one_run" in attack else None
        if one_run_bound is not None:
            # Each repeat's one-run bound holds at the joint level, so their minimum does too.
            entry["epsilon_lower_one_run"] = one_run_bound
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
        for name in (*PER_MODEL_FIELDS, *AUDIT_FIELDS):
            row[name] = _mean(attack[name][sel]) if name in attack else float("nan")
        row["epsilon_lower_one_run"] = one_run_bound if one_run_bound is not None else float("nan")
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
        "confidence": confidence,
        "inclusion_probability": float(manifest.facts.get("inclusion_probability", 0.0)),
        "checks": checks,
        "strategies": metrics_strategies,
    }

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
        "tpr_at_fpr",
        "tpr_at_fpr_low",
        "tpr_at_fpr_high",
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

    repeats = int(manifest.sizes["repeats"])
    estimator = f"{ONE_RUN}, min over {repeats} model(s); joint {confidence:.0%}"
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
                epsilon_lower=_optional(rec["epsilon_lower_one_run"]),
                epsilon_lower_estimator=estimator if one_run else None,
                epsilon_lower_assumes=ONE_RUN_ASSUMES if one_run else None,
                scores={
                    "epsilon_star": _optional(rec["epsilon_star_parametric"]),
                    "epsilon_star_null_high": _optional(rec["epsilon_star_null_high"]),
                },
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
            "confidence": confidence,
            "one_run": one_run,
        },
        csv_float_format="%.6g",
    )
