"""Bounds stage of the canaries experiment: sample-level vs population-style numbers per defence.

Aerni et al. (:data:`dpaudit.references.AERNI`) evaluate a defence by the TPR of a strong attack at
a low FPR on its *most vulnerable* records (canaries), next to the population-style number that
averages over typical records (here: clean canaries under the defence's own attack). For every
defence × canary type × attack this stage reports the TPR at each FPR level with a two-sided
Clopper–Pearson interval and the AUROC (the scores auditor's estimators,
:mod:`dpaudit.bounds.auditor`); per defence the most vulnerable type, the population-style TPR and
their ratio; test accuracy; and ε lower bounds from the canary scores through
:func:`dpaudit.bounds.auditor.audit_scores`:

- ``per_model``: one decision per target model (canary ``m mod K_t`` of each single-record
  type), so that no canary–model pair is counted twice and each model contributes one trial; the
  headline is the best type, with the level Bonferroni-split over the types and estimators it
  maximises (:func:`per_model_bounds`). The threshold sweeps assume nothing about the mechanism;
  for DP-SGD defences the
  subsampled-Gaussian family bound (``SubsampledGaussian(q, T)``) also applies: one canary's
  inclusion vs exclusion in a DP-SGD run with Poisson sampling is exactly the pair that family
  bounds (computed where the accountant's ε ≤ :data:`FAMILY_MAX_EPSILON`), and the attack
  (including the shadows' fits, which use other, independently trained models) is
  post-processing. Like every LiRA evaluation it treats the M decisions as independent trials,
  although the shadows of one target are the targets of other decisions.
- ``pooled_estimate``: all K_t·M decisions of the most vulnerable single-record type with the
  assumption-free sweeps. Decisions on one model share its training run, so the count of
  independent trials is overstated: an estimate, never counted as a bound.

Duplicates are excluded from ε bounds: r copies of a record differ by r records, for which the
accountant's ε is a group-privacy ε, not the one reported. LiRA: Carlini et al. 2022, arXiv
2112.03570.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import compute_epsilon, epsilons_for_event
from dpaudit.bounds.auditor import SubsampledGaussian, _auroc, _level_tag, _tpr_at_fpr, audit_scores
from dpaudit.experiments.base import FAMILY_ASSUMES, BoundsResult, Mechanism, TrainManifest, finite_number
from dpaudit.experiments.canaries.attack import LABEL_ONLY, LIRA_ATTACKS
from dpaudit.experiments.canaries.config import CANARY_TYPES, CanariesConfig
from dpaudit.experiments.canaries.design import ATTACK_FILE, DEFENCE_KINDS
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow

ACCOUNTANT_ORDER = ("naive", "advanced", "rdp", "pld")
#: Grid of FPRs at which the ROC table is sampled (log-spaced, for the log-log figure).
ROC_GRID = np.unique(np.concatenate([np.logspace(-4, 0, 41), [0.001, 0.01, 0.05]]))
#: The subsampled-Gaussian family bound is computed for DP-SGD settings whose tightest accountant ε is at
#: most this: converting its noise bound to ε needs an optimistic PLD that takes minutes on 2 cores
#: for the utility-first setting, where 64 decisions cannot certify anything near ε ≈ 10³ anyway.
FAMILY_MAX_EPSILON = 100.0
#: RDP ε above which the PLD accountant is skipped (see :func:`accountant_epsilons`).
PLD_SKIP_ABOVE = 1000.0
#: Fewest in- and out-decisions an ε lower bound is computed from (else it is reported as 0).
MIN_DECISIONS = 10
#: The acceptance ratio of issue 14 (canary-level vs population-level TPR).
RATIO_TARGET = 5.0
#: Accuracy window of issue 14's comparison of DP-SGD with the heuristic (5 points).
ACCURACY_WINDOW = 0.05


def level_tag(level: float) -> str:
    """``0.001`` → ``"0p001"``: the FPR level in metric keys, spelled as the scores auditor does
    (``tpr_at_fpr_0p01``, :meth:`dpaudit.bounds.auditor.ScoresAudit.metrics`)."""
    return _level_tag(level)


def check_level(levels: Sequence[float]) -> float:
    """The FPR level of the acceptance checks (and of the report's findings): 1% where the table has
    it, else its highest level."""
    return 0.01 if 0.01 in levels else levels[-1]


def main_attack(kind: str, confidence: str) -> str:
    """The defence's own attack: label-only where the defence releases only labels (the heuristic),
    online LiRA on ``confidence`` otherwise."""
    return LABEL_ONLY if DEFENCE_KINDS[kind].label_only else f"lira_online_{confidence}"


def roc_points(
    pos: np.ndarray, neg: np.ndarray, grid: np.ndarray = ROC_GRID
) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) at the thresholds whose empirical FPR is the largest ≤ each grid value."""
    neg_sorted = np.sort(neg)
    pos_sorted = np.sort(pos)
    fprs, tprs = [], []
    for g in grid:
        allowed = int(math.floor(g * neg.size + 1e-9))
        if allowed >= neg.size:
            threshold = -math.inf
        else:
            threshold = float(np.nextafter(neg_sorted[neg.size - allowed - 1], math.inf))
        fprs.append((neg.size - np.searchsorted(neg_sorted, threshold, side="left")) / neg.size)
        tprs.append((pos.size - np.searchsorted(pos_sorted, threshold, side="left")) / pos.size)
    return np.asarray(fprs), np.asarray(tprs)


def accountant_epsilons(mechanism: Mechanism, delta: float) -> dict[str, float]:
    """Every accountant's ε for a defence's mechanism; PLD is left out where RDP's ε > :data:`PLD_SKIP_ABOVE`.

    The PLD of the utility-first setting (z = 0.1) takes minutes on 2 cores; at ε in the thousands
    it changes no conclusion, and RDP, naive and advanced composition are still reported.
    """
    z = mechanism.noise_multiplier
    if z is not None and mechanism.sampling_rate < 1.0:
        q, steps = mechanism.sampling_rate, mechanism.steps
        rdp = compute_epsilon(z, q, steps, delta, "rdp")
        if rdp > PLD_SKIP_ABOVE:
            return {"rdp": rdp, **{a: compute_epsilon(z, q, steps, delta, a) for a in ("naive", "advanced")}}
    return epsilons_for_event(mechanism.dp_event(), delta)


def summary_scores(canary_tpr: float, population_tpr: float, population_high: float) -> dict[str, float]:
    """The summary's attack figures: a ratio only where the population-style rate is not 0; a rate of
    0 is shown with its Clopper–Pearson upper limit instead (a ratio to a floor would be arbitrary)."""
    scores = {"canary_tpr": canary_tpr, "population_tpr": population_tpr}
    if population_tpr > 0:
        scores["ratio"] = canary_tpr / population_tpr
    else:
        scores["population_tpr_upper"] = population_high
    return scores


def per_model_bounds(
    scores: np.ndarray,
    membership: np.ndarray,
    ctype: np.ndarray,
    types: list[int],
    delta: float,
    confidence: float,
    family: SubsampledGaussian | None,
    levels: tuple[float, ...],
) -> dict[int, float]:
    """Per canary type, the headline ε lower bound from one decision per target model.

    Model m decides on canary ``m mod K_t`` of type t, so no canary–model pair counts twice. The
    types are fixed by the design, not chosen from the scores; each type's audit gets the share
    1 − (1 − c)/len(types) of the level and is itself joint over its counted estimators (the
    assumption-free sweeps, plus the subsampled-Gaussian family where ``family`` is given: DP-SGD
    guarantees it), so the maximum over types holds at ``confidence``. GDP is never counted: it
    assumes a full-batch Gaussian mechanism, which no defence here is. Types with fewer than
    :data:`MIN_DECISIONS` in- or out-decisions are left out of the result (but still share the level).
    """
    share = 1.0 - (1.0 - confidence) / max(len(types), 1)
    m_idx = np.arange(membership.shape[1])
    out: dict[int, float] = {}
    for t in types:
        rows_t = np.flatnonzero(ctype == t)
        k_idx = rows_t[m_idx % rows_t.size]
        one, one_in = scores[k_idx, m_idx], membership[k_idx, m_idx]
        if min(one_in.sum(), (~one_in).sum()) < MIN_DECISIONS:
            continue
        audit = audit_scores(
            one[one_in], one[~one_in], delta=delta, confidence=share, mechanism=family, fpr_levels=levels
        )
        out[t] = finite_number(audit.headline.epsilon)
    return out


def bounds(config: CanariesConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """TPR tables, headline ratios, accuracy, ε lower and upper bounds, plot tables, summary rows."""
    bp = config.bounds
    levels = tuple(sorted(bp.fpr_levels))
    with np.load(audit.attack_dir / ATTACK_FILE, allow_pickle=False) as f:
        attack = {k: f[k] for k in f.files}
    with np.load(audit.losses_path, allow_pickle=False) as f:
        accuracy_of = {str(g): f[f"{g}__accuracy"] for g in f["groups"]}
    membership = attack["membership"].astype(bool)
    ctype = attack["canary_type"]
    confidence_kind = str(attack["main_confidence"])
    delta = manifest.delta
    facts = manifest.facts
    present = [t for t in range(len(CANARY_TYPES)) if np.any(ctype == t)]
    clean = CANARY_TYPES.index("clean")

    def split(scores: np.ndarray, t: int) -> tuple[np.ndarray, np.ndarray]:
        rows = ctype == t
        return scores[rows][membership[rows]], scores[rows][~membership[rows]]

    level1 = check_level(levels)
    tag1 = level_tag(level1)
    tag_pu = tag1
    metrics_defences: dict[str, Any] = {}
    tpr_rows: list[dict[str, Any]] = []
    roc_rows: list[dict[str, Any]] = []
    bar_rows: list[dict[str, Any]] = []
    pu_rows: list[dict[str, Any]] = []
    summary: list[SummaryRow] = []
    checks: dict[str, float] = {"dp_bounds": 0, "dp_bounds_above_accountant": 0}
    headline_info: dict[str, Any] = {}
    for defence in facts["defences"]:
        name, kind = str(defence["name"]), str(defence["kind"])
        spec = DEFENCE_KINDS[kind]
        attacks = [LABEL_ONLY] if spec.label_only else [*LIRA_ATTACKS, LABEL_ONLY]
        own = main_attack(kind, confidence_kind)
        acc = np.asarray(accuracy_of[str(defence["weights"])], dtype=float)
        entry: dict[str, Any] = {
            "test_accuracy": {"mean": float(acc.mean()), "min": float(acc.min()), "max": float(acc.max())}
        }
        table: dict[str, dict[str, dict[str, Any]]] = {}
        for attack_name in attacks:
            scores = attack[f"{name}__{attack_name}"]
            per_type: dict[str, Any] = {}
            for t in present:
                pos, neg = split(scores, t)
                stats: dict[str, Any] = {}
                for level in levels:
                    tpr, low, high, fpr = _tpr_at_fpr(pos, neg, level, bp.confidence)
                    stats[level_tag(level)] = {"tpr": tpr, "low": low, "high": high, "fpr": fpr}
                    tpr_rows.append(
                        {
                            "defence": name,
                            "attack": attack_name,
                            "canary_type": CANARY_TYPES[t],
                            "fpr_level": level,
                            "tpr": tpr,
                            "tpr_low": low,
                            "tpr_high": high,
                            "fpr": fpr,
                        }
                    )
                stats["auroc"] = _auroc(pos, neg, bp.confidence)[0]
                per_type[CANARY_TYPES[t]] = stats
            table[attack_name] = per_type
        entry["tpr"] = table

        def key_of(t: int, table: dict = table, own: str = own) -> tuple[float, float]:
            # Most vulnerable: the largest mean TPR over the FPR levels (then AUROC).
            stats = table[own][CANARY_TYPES[t]]
            return (float(np.mean([stats[level_tag(lv)]["tpr"] for lv in levels])), stats["auroc"])

        vulnerable = [t for t in present if t != clean]
        worst = max(vulnerable, key=key_of) if vulnerable else clean
        worst_name = CANARY_TYPES[worst]
        single = [t for t in vulnerable if CANARY_TYPES[t] != "duplicates"]
        worst_single = max(single, key=key_of) if single else clean
        head: dict[str, Any] = {"most_vulnerable_type": float(worst)}
        n_clean_in = int(np.sum(membership[ctype == clean]))
        for level in levels:
            tag = level_tag(level)
            canary = table[own][worst_name][tag]["tpr"]
            population = table[own]["clean"][tag]["tpr"]
            head[f"canary_tpr_at_fpr_{tag}"] = canary
            head[f"population_tpr_at_fpr_{tag}"] = population
            head[f"ratio_{tag}"] = canary / max(population, 1.0 / max(n_clean_in, 1))
        # Best canary-level TPR over every attack and every non-clean type (for the DP comparison).
        for level in levels:
            tag = level_tag(level)
            head[f"best_canary_tpr_at_fpr_{tag}"] = max(
                (table[a][CANARY_TYPES[t]][tag]["tpr"] for a in attacks for t in vulnerable), default=0.0
            )
        entry["headline"] = head

        # ε upper bounds from the accountants, lower bounds from the canary scores.
        mechanism = manifest.mechanisms[name]
        upper = accountant_epsilons(mechanism, delta)
        if spec.private:
            entry["epsilon_upper"] = {k: finite_number(v) for k, v in upper.items()}
        scores = attack[f"{name}__{own}"]
        family = None
        if spec.private and min(upper.values()) <= FAMILY_MAX_EPSILON:
            family = SubsampledGaussian(float(facts["sampling_rate"]), int(facts["steps"]))
        types = single or [clean]
        per_type = per_model_bounds(scores, membership, ctype, types, delta, bp.confidence, family, levels)
        best_type = max(per_type, key=lambda t: per_type[t], default=worst_single)
        best_model = per_type.get(best_type, 0.0)
        lowers: dict[str, Any] = {
            "type": float(best_type),
            "per_model": {CANARY_TYPES[t]: value for t, value in per_type.items()},
            "best_per_model": best_model,
        }
        pos, neg = split(scores, worst_single)
        best_pooled = 0.0
        if min(pos.size, neg.size) >= MIN_DECISIONS:
            pooled = audit_scores(pos, neg, delta=delta, confidence=bp.confidence, fpr_levels=levels)
            best_pooled = finite_number(pooled.headline.epsilon)
        lowers["pooled_estimate"] = best_pooled
        entry["epsilon_lower"] = lowers
        if spec.private:
            tight = min(upper.values())
            checks["dp_bounds"] += 1
            checks["dp_bounds_above_accountant"] += int(best_model > tight)
        metrics_defences[name] = entry

        label = str(defence["label"])
        fpr_main = levels[0]
        for t in (worst, clean):
            pos, neg = split(scores, t)
            fprs, tprs = roc_points(pos, neg)
            series = f"{CANARY_TYPES[t]} ({own})"
            for fx, ty in zip(fprs, tprs, strict=True):
                if fx > 0 and ty > 0:
                    roc_rows.append({"defence": label, "series": series, "fpr": fx, "tpr": ty})
        bar = {"defence": label}
        for level in levels:
            tag = level_tag(level)
            bar[f"population_tpr_at_fpr_{tag}"] = head[f"population_tpr_at_fpr_{tag}"]
            bar[f"canary_tpr_at_fpr_{tag}"] = head[f"canary_tpr_at_fpr_{tag}"]
        bar_rows.append(bar)
        z = defence["noise_multiplier"]
        pu_rows.append(
            {
                "defence": label,
                "kind": kind,
                "test_accuracy": float(acc.mean()),
                "canary_tpr": head[f"best_canary_tpr_at_fpr_{tag_pu}"],
                "noise_multiplier": float(z) if z is not None else np.nan,
                "dpsgd": spec.private,
            }
        )
        tag0 = level_tag(fpr_main)
        clean0 = table[own]["clean"][tag0]
        summary.append(
            SummaryRow(
                setting=label,
                epsilon_upper={
                    a: float(upper[a]) for a in ACCOUNTANT_ORDER if a in upper and math.isfinite(upper[a])
                },
                epsilon_lower=best_model,
                epsilon_lower_estimator=(
                    f"{own}, one decision per model, best of {len(types)} canary type(s) × "
                    f"({'sweeps + subsampled-Gaussian family' if family else 'threshold sweeps'}), "
                    f"joint confidence {bp.confidence:g}"
                ),
                scores=summary_scores(head[f"canary_tpr_at_fpr_{tag0}"], clean0["tpr"], clean0["high"]),
                utility_name="test accuracy",
                utility=float(acc.mean()),
                epsilon_lower_assumes=FAMILY_ASSUMES if family else "none",
            )
        )
        headline_info[name] = {"worst": worst_name, "label": label, "kind": kind}

    # Acceptance checks of issue 14 (each a number: 1 = holds, 0 = does not), on the non-private
    # baseline (undefended), the label-only heuristic and the DP-SGD defences, found by their kind.
    kind_of = {str(d["name"]): str(d["kind"]) for d in facts["defences"]}
    baseline_name = next((n for n, k in kind_of.items() if DEFENCE_KINDS[k].undefended), None)
    heuristic_name = next((n for n, k in kind_of.items() if DEFENCE_KINDS[k].label_only), None)
    undefended = metrics_defences.get(baseline_name) if baseline_name is not None else None
    if undefended and "mislabeled" in undefended["tpr"][main_attack(kind_of[baseline_name], confidence_kind)]:
        t = undefended["tpr"][main_attack(kind_of[baseline_name], confidence_kind)]
        mis, cln = t["mislabeled"][tag1]["tpr"], t["clean"][tag1]["tpr"]
        floor = 1.0 / max(1, int(np.sum(membership[ctype == clean])))
        checks["undefended_mislabeled_over_clean"] = mis / max(cln, floor)
        checks["undefended_mislabeled_ratio_ok"] = float(mis >= RATIO_TARGET * cln and mis > 0)
    heuristic = metrics_defences.get(heuristic_name) if heuristic_name is not None else None
    if heuristic is not None:
        h = heuristic["tpr"][LABEL_ONLY]
        pop = h["clean"][tag1]
        floor = 1.0 / max(1, int(np.sum(membership[ctype == clean])))
        # Population-style "looks private": the clean records' TPR is not significantly above the FPR.
        checks["heuristic_population_near_chance"] = float(pop["low"] <= level1)
        # Adaptive: the label-only attack on the most vulnerable canary type (wrong or random labels).
        adaptive = heuristic["headline"][f"canary_tpr_at_fpr_{tag1}"]
        checks["heuristic_adaptive_ratio"] = adaptive / max(pop["tpr"], floor)
        checks["heuristic_adaptive_ratio_ok"] = float(checks["heuristic_adaptive_ratio"] >= RATIO_TARGET)
        if "mislabeled" in h:
            checks["heuristic_mislabeled_ratio"] = h["mislabeled"][tag1]["tpr"] / max(pop["tpr"], floor)
        h_acc = heuristic["test_accuracy"]["mean"]
        close = [
            n
            for n, e in metrics_defences.items()
            if DEFENCE_KINDS[kind_of[n]].private and e["test_accuracy"]["mean"] >= h_acc - ACCURACY_WINDOW
        ]
        checks["dp_within_accuracy_window"] = float(len(close))
        checks["dp_close_below_heuristic"] = float(
            bool(close)
            and all(
                metrics_defences[n]["headline"][f"best_canary_tpr_at_fpr_{tag1}"] < adaptive for n in close
            )
        )
    metrics = {
        "delta": delta,
        "models": float(manifest.sizes["models"]),
        "canaries": float(manifest.sizes["canaries"]),
        "checks": checks,
        "defences": metrics_defences,
    }

    def _numbers(tree: Any) -> Any:
        if isinstance(tree, dict):
            return {k: _numbers(v) for k, v in tree.items()}
        return finite_number(tree)

    metrics = _numbers(metrics)
    plots = {
        "roc.csv": pd.DataFrame(roc_rows, columns=["defence", "series", "fpr", "tpr"]),
        "population_vs_canary.csv": pd.DataFrame(bar_rows),
        "privacy_utility.csv": pd.DataFrame(pu_rows),
        "tpr.csv": pd.DataFrame(tpr_rows),
    }
    heuristic_index = next(
        (i for i, d in enumerate(facts["defences"]) if DEFENCE_KINDS[str(d["kind"])].label_only), 0
    )
    return BoundsResult(
        metrics=metrics,
        plots=plots,
        summary=summary,
        context={
            "levels": list(levels),
            "defences": headline_info,
            "headline_index": heuristic_index,
            "checks": dict(metrics["checks"]),
            "confidence_kind": confidence_kind,
            "variance": str(attack["variance"]),
            "augment": bool(attack["augment"]),
            "bar_columns": [c for c in pd.DataFrame(bar_rows).columns if c != "defence"],
        },
        csv_float_format="%.6g",
    )
