"""Bounds stage of the canaries experiment: sample-level vs population-style numbers per defence.

Aerni et al. (:data:`dpaudit.references.AERNI`) evaluate a defence by the TPR of a strong attack at
a low FPR on its *most vulnerable* records (canaries), next to the population-style number that
averages over typical records (here: clean canaries under the defence's own attack). The attack
stage's score sets (one per defence × attack × canary type) are audited into one table
(:func:`dpaudit.bounds.audit.audit_score_sets`, estimators :mod:`~dpaudit.bounds.estimators.rates`
and :mod:`~dpaudit.bounds.estimators.lira`): TPR at each FPR level with a two-sided interval that
accounts for the threshold's estimation (:func:`dpaudit.bounds.strength.tpr_interval`) and the AUROC
of every set; per defence the ε lower bounds from one decision per target
model on each single-record canary type (counted; the level is split once over every type and
estimator of the defence, so the defence's headline holds at the confidence jointly) and the pooled
estimate. Beside them: every accountant's ε and the test accuracy.

Selections of the table: the most vulnerable canary type (largest mean TPR of the defence's own
attack over the FPR levels, then AUROC), the population-style TPR (clean records), their ratio, and
the acceptance checks of the experiment; the ROC curves come from the score sets. LiRA: Carlini et
al. 2022, arXiv 2112.03570.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.bounds.accountants import compute_epsilon, epsilons_for_event
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.tradeoff import SubsampledGaussian
from dpaudit.experiments.base import BoundsResult, Mechanism, TrainManifest, finite_number
from dpaudit.experiments.canaries.attack import bound_types, main_attack
from dpaudit.experiments.canaries.config import CANARY_TYPES, CanariesConfig
from dpaudit.experiments.canaries.design import DEFENCE_KINDS, heuristics
from dpaudit.experiments.canaries.design.comparison import reference_comparison
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow
from dpaudit.scores import ScoreSet, group_key, read_score_sets
from dpaudit.table import NO_BOUND, ResultRow, ResultsTable, fpr_tag, headline_metrics

ACCOUNTANT_ORDER = ("naive", "advanced", "rdp", "pld")
#: Grid of FPRs at which the ROC table is sampled (log-spaced, for the log-log figure).
ROC_GRID = np.unique(np.concatenate([np.logspace(-4, 0, 41), [0.001, 0.01, 0.05]]))
#: The subsampled-Gaussian family bound is computed for DP-SGD settings whose tightest accountant ε is at
#: most this: converting its noise bound to ε needs an optimistic PLD that takes minutes on 2 cores
#: for the utility-first setting, where 64 decisions cannot certify anything near ε ≈ 10³ anyway.
FAMILY_MAX_EPSILON = 100.0
#: RDP ε above which the PLD accountant is skipped (see :func:`accountant_epsilons`).
PLD_SKIP_ABOVE = 1000.0
#: The acceptance ratio (canary-level vs population-level TPR).
RATIO_TARGET = 5.0
#: Accuracy window of the comparison of DP-SGD with the heuristic (5 points).
ACCURACY_WINDOW = 0.05


def level_tag(level: float) -> str:
    """``0.001`` → ``"0p001"``: the FPR part of ``tpr_at_fpr_*``."""
    return fpr_tag(level)


def check_level(levels: Sequence[float]) -> float:
    """The FPR level of the acceptance checks (and of the report's findings): 1% where the table has
    it, else its highest level."""
    return 0.01 if 0.01 in levels else levels[-1]


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


def summary_score_names(tag: str) -> tuple[str, str]:
    """The summary's two TPR names at the FPR ``tag`` (``0p001``): the most vulnerable canaries' TPR,
    spelled as every experiment spells a TPR at a fixed FPR, and the population-style (clean) one."""
    return f"tpr_at_fpr_{tag}", f"population_tpr_at_fpr_{tag}"


def summary_scores(
    tag: str, canary_tpr: float, population_tpr: float, population_high: float
) -> dict[str, float]:
    """The summary's attack figures at the FPR ``tag``: a ratio only where the population-style rate is
    not 0; a rate of 0 is shown with its upper limit instead (a ratio to a floor would
    be arbitrary)."""
    canary, population = summary_score_names(tag)
    scores = {canary: canary_tpr, population: population_tpr}
    if population_tpr > 0:
        scores["ratio"] = canary_tpr / population_tpr
    else:
        scores[f"{population}_upper"] = population_high
    return scores


def key(defence: str, attack: str | None = None, canary_type: str | None = None) -> str:
    """The table group of a defence (its accountants and utility) or of one of its score sets
    (:attr:`dpaudit.scores.ScoreSet.key`'s order)."""
    return group_key(canary_type=canary_type, defence=defence, attack=attack)


def audit_table(sets: list[ScoreSet], confidence: float) -> ResultsTable:
    """Every set's estimators; the counted bounds of one defence share 1 − ``confidence``."""
    return audit_score_sets(sets, confidence, scope=lambda s: s.group["defence"])


def with_bounds_params(
    sets: list[ScoreSet], levels: Sequence[float], family: dict[str, bool]
) -> list[ScoreSet]:
    """The sets with the bounds stage's choices: the FPR levels, and whether a defence's family bound
    is computed (its tightest accountant ε ≤ :data:`FAMILY_MAX_EPSILON`)."""
    extra = {"fpr_levels": ",".join(f"{v:g}" for v in levels)}
    return [
        dataclasses.replace(s, params={**s.params, **extra, "family_bound": int(family[s.group["defence"]])})
        for s in sets
    ]


def per_model_bounds(
    scores: np.ndarray,
    membership: np.ndarray,
    ctype: np.ndarray,
    types: list[int],
    delta: float,
    confidence: float,
    family: SubsampledGaussian | None,
    levels: tuple[float, ...] = (0.01,),
) -> dict[int, float]:
    """Per canary type, the largest counted ε lower bound from one decision per target model
    (estimator ``lira_per_model``), the level split once over every type and estimator, so the
    maximum over types holds at ``confidence``. ``scores``/``membership``: ``[K, M]``; ``family``:
    the DP-SGD run's family (its bound is then counted too). Types with too few decisions per world
    are left out of the result (but still share the level)."""
    params: dict[str, float | str] = {"delta": delta, "fpr_levels": ",".join(f"{v:g}" for v in levels)}
    if family is not None:
        params |= {"sampling_rate": family.sampling_rate, "steps": family.steps, "family_bound": 1}
    sets = []
    for t in types:
        rows = np.flatnonzero(ctype == t)
        k, m = np.meshgrid(np.arange(rows.size), np.arange(membership.shape[1]), indexing="ij")
        sets.append(ScoreSet(
            {"defence": "d", "canary_type": CANARY_TYPES[t]}, scores[rows].ravel(), membership[rows].ravel(),
            ("lira_per_model",), "subsampled-gaussian" if family else "none", None, params,
            {"canary": k.ravel(), "model": m.ravel()},
        ))  # fmt: skip
    table = audit_table(sets, confidence)
    out = {}
    for t, s in zip(types, sets, strict=True):
        counted = [r.value for r in table.select("epsilon_lower", s.key) if r.counted]
        if counted:
            out[t] = finite_number(max(counted))
    return out


def select_defence(
    table: ResultsTable, sets: list[ScoreSet], name: str, own: str, levels: Sequence[float]
) -> dict[str, Any]:
    """The table's selections for one defence: the most vulnerable canary type (largest mean TPR of
    its own attack ``own`` over the FPR levels, then AUROC), that type's TPR, the population-style
    TPR (clean), the best TPR of any attack on any non-clean type, the per-model headline (joint over
    the defence's counted bounds) and the pooled estimate on the most vulnerable bounded type."""
    present = [t for t in CANARY_TYPES if any(s.group["canary_type"] == t for s in sets)]

    def tpr(attack: str, ctype: str, level: float) -> ResultRow:
        return table.one(f"tpr_at_fpr_{level_tag(level)}", key(name, attack, ctype))

    def strength(ctype: str) -> tuple[float, float]:
        mean_tpr = float(np.mean([tpr(own, ctype, lv).value for lv in levels]))
        return mean_tpr, table.one("auroc", key(name, own, ctype)).value

    vulnerable = [t for t in present if t != "clean"]
    worst = max(vulnerable, key=strength) if vulnerable else "clean"
    bounded = [CANARY_TYPES[t] for t in bound_types(np.array([CANARY_TYPES.index(t) for t in present]))]
    best = table.headline(table.groups_where(defence=name))
    pooled = table.select("epsilon_estimate", key(name, own, max(bounded, key=strength)), estimator="pooled")
    attacks = sorted({s.group["attack"] for s in sets if s.group["defence"] == name})
    return {
        "worst": worst,
        "own": own,
        "best": best,
        "canary_tpr": {level_tag(lv): tpr(own, worst, lv).value for lv in levels},
        "population_tpr": {level_tag(lv): dataclasses.asdict(tpr(own, "clean", lv)) for lv in levels},
        "own_tpr": {t: {level_tag(lv): tpr(own, t, lv).value for lv in levels} for t in present},
        "best_canary_tpr": {
            level_tag(lv): max((tpr(a, t, lv).value for a in attacks for t in vulnerable), default=0.0)
            for lv in levels
        },
        "epsilon_lower": best.value,
        "pooled_estimate": pooled[0].value if pooled else 0.0,
    }


def bounds(config: CanariesConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The results table, its metrics, the plot tables and one summary row per defence."""
    bp = config.bounds
    levels = tuple(sorted(bp.fpr_levels))
    with open_npz(audit.losses_path) as f:
        accuracy_of = {str(g): float(np.mean(f[f"{g}__accuracy"])) for g in f["groups"]}
    defences = list(manifest.facts["defences"])
    private = {str(d["name"]): DEFENCE_KINDS[str(d["kind"])].private for d in defences}
    upper_of: dict[str, dict[str, float]] = {}
    for name in private:
        found = accountant_epsilons(manifest.mechanisms[name], manifest.delta) if private[name] else {}
        upper_of[name] = {a: v for a, v in found.items() if math.isfinite(v)}
    family = {n: bool(u) and min(u.values()) <= FAMILY_MAX_EPSILON for n, u in upper_of.items()}
    sets = with_bounds_params(read_score_sets(audit.scores_path), levels, family)
    table = audit_table(sets, bp.confidence)
    tag1 = level_tag(check_level(levels))
    clean = [s for s in sets if s.group["canary_type"] == "clean"]
    clean_in = int(sum(s.member.sum() for s in clean) / max(1, len(clean)))
    info: dict[str, Any] = {}
    roc_rows, bar_rows, pu_rows, summary = [], [], [], []
    for d in defences:
        name, kind, label = str(d["name"]), str(d["kind"]), str(d["label"])
        upper = {a: float(upper_of[name][a]) for a in ACCOUNTANT_ORDER if a in upper_of[name]}
        acc = accuracy_of[str(d["weights"])]
        table.extend(ResultRow(key(name), "epsilon_upper", v, a, "accountant") for a, v in upper.items())
        table.add(ResultRow(key(name), "utility", acc, "test_accuracy", "utility"))
        own = main_attack(kind, str(config.attack.confidence))
        picked = select_defence(table, sets, name, own, levels)
        best: ResultRow = picked.pop("best")
        info[name] = {"label": label, "kind": kind, "accuracy": acc, **picked,
                      "tightest_upper": min(upper.values()) if upper else None}  # fmt: skip
        for ctype in (picked["worst"], "clean"):
            (s,) = (s for s in sets if s.key == key(name, own, ctype))
            fprs, tprs = roc_points(s.in_scores, s.out_scores)
            roc_rows += [{"defence": label, "series": f"{ctype} ({own})", "fpr": fx, "tpr": ty}
                         for fx, ty in zip(fprs, tprs, strict=True) if fx > 0 and ty > 0]  # fmt: skip
        bar = {"defence": label}
        for tag in (level_tag(lv) for lv in levels):
            bar[f"population_tpr_at_fpr_{tag}"] = picked["population_tpr"][tag]["value"]
            bar[f"canary_tpr_at_fpr_{tag}"] = picked["canary_tpr"][tag]
        bar_rows.append(bar)
        z = d["noise_multiplier"]
        pu_rows.append({"defence": label, "kind": kind, "test_accuracy": acc,
                        "canary_tpr": picked["best_canary_tpr"][tag1],
                        "noise_multiplier": float(z) if z is not None else np.nan,
                        "dpsgd": private[name]})  # fmt: skip
        first, tag0 = picked["population_tpr"][level_tag(levels[0])], level_tag(levels[0])
        counted = best.estimator != NO_BOUND
        estimator = f"{own}, one decision per model: {best.estimator}" if counted else None
        summary.append(
            SummaryRow(
                setting=label,
                epsilon_upper=upper,
                epsilon_lower=best.value,
                epsilon_lower_estimator=estimator,
                scores=summary_scores(tag0, picked["canary_tpr"][tag0], first["value"], first["high"]),
                utility_name="test accuracy",
                utility=acc,
                epsilon_lower_assumes=best.assumes,
                confidence=best.level if counted else None,
            )
        )  # fmt: skip
    heuristic_rows = heuristics.evaluate(sets, info, list(levels), check_level(levels), bp.confidence)
    plots = {
        "heuristics.csv": pd.DataFrame(
            heuristics.plot_rows(heuristic_rows, list(levels)), columns=list(heuristics.PLOT_COLUMNS)
        ),
        "roc.csv": pd.DataFrame(roc_rows, columns=["defence", "series", "fpr", "tpr"]),
        "population_vs_canary.csv": pd.DataFrame(bar_rows),
        "privacy_utility.csv": pd.DataFrame(pu_rows),
        "tpr.csv": table.frame()[lambda f: f["quantity"].str.startswith("tpr_at_fpr_")],
    }
    context = {
        "levels": list(levels),
        "defences": info,
        "headline_index": next(
            (i for i, d in enumerate(defences) if DEFENCE_KINDS[str(d["kind"])].label_only), 0
        ),
        "checks": acceptance_checks(info, tag1, clean_in),
        "heuristics": heuristic_rows,
        "reference_comparison": reference_comparison(table, info, levels[0]),
        "confidence_kind": str(config.attack.confidence),
        "variance": str(config.attack.variance),
        "augment": bool(config.attack.augment),
        "bar_columns": [c for c in pd.DataFrame(bar_rows).columns if c != "defence"],
    }
    metrics = {**table.metrics(), "headline": {n: headline_metrics(r) for n, r in _headlines(table, info)}}
    if heuristic_rows:
        metrics["heuristics"] = {r["defence"]: heuristics.metrics(r, list(levels)) for r in heuristic_rows}
    return BoundsResult(metrics, plots, summary, context, table=table)


def _headlines(table: ResultsTable, info: dict[str, Any]) -> list[tuple[str, ResultRow]]:
    """Each defence's headline (joint over its counted per-model bounds)."""
    return [
        (n, table.headline(table.groups_where(defence=n)))
        for n in info
    ]


def acceptance_checks(info: dict[str, Any], tag1: str, clean_in: int) -> dict[str, float]:
    """The experiment's acceptance checks (1 = holds, 0 = does not) on the non-private baseline, the
    label-only heuristic and the DP-SGD defences, found by their kind."""
    floor = 1.0 / max(1, clean_in)
    checks: dict[str, float] = {"dp_bounds": 0.0, "dp_bounds_above_accountant": 0.0}
    for i in info.values():
        if i["tightest_upper"] is not None:
            checks["dp_bounds"] += 1
            checks["dp_bounds_above_accountant"] += float(i["epsilon_lower"] > i["tightest_upper"])
    level1 = float(tag1.replace("p", ".").replace("m", "-"))
    baseline = next((i for i in info.values() if DEFENCE_KINDS[i["kind"]].undefended), None)
    if baseline is not None and "mislabeled" in baseline["own_tpr"]:
        mis, cln = baseline["own_tpr"]["mislabeled"][tag1], baseline["population_tpr"][tag1]["value"]
        checks["undefended_mislabeled_over_clean"] = mis / max(cln, floor)
        checks["undefended_mislabeled_ratio_ok"] = float(mis >= RATIO_TARGET * cln and mis > 0)
    heuristic = next((i for i in info.values() if DEFENCE_KINDS[i["kind"]].label_only), None)
    if heuristic is not None:
        pop = heuristic["population_tpr"][tag1]
        # Population-style "looks private": the clean records' TPR is not significantly above the FPR.
        checks["heuristic_population_near_chance"] = float(pop["low"] <= level1)
        adaptive = heuristic["canary_tpr"][tag1]
        checks["heuristic_adaptive_ratio"] = adaptive / max(pop["value"], floor)
        checks["heuristic_adaptive_ratio_ok"] = float(checks["heuristic_adaptive_ratio"] >= RATIO_TARGET)
        if "mislabeled" in heuristic["own_tpr"]:
            checks["heuristic_mislabeled_ratio"] = heuristic["own_tpr"]["mislabeled"][tag1] / max(
                pop["value"], floor
            )
        close = [i for i in info.values() if DEFENCE_KINDS[i["kind"]].private
                 and i["accuracy"] >= heuristic["accuracy"] - ACCURACY_WINDOW]  # fmt: skip
        checks["dp_within_accuracy_window"] = float(len(close))
        checks["dp_close_below_heuristic"] = float(
            bool(close) and all(i["best_canary_tpr"][tag1] < adaptive for i in close)
        )
    return {k: finite_number(v) for k, v in checks.items()}
