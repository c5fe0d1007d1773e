"""The published heuristic defences, each evaluated its own way and sample-level (Aerni et al.).

Aerni et al. (:data:`dpaudit.references.AERNI`) re-evaluate published heuristic defences and find
that each leaks far more on its most vulnerable records, under attacks adapted to it, than the
population-level evaluation it was published with shows, and that none beats DP-SGD at equal
accuracy. Per defence (:data:`~dpaudit.experiments.canaries.design.HEURISTICS`) this module reports:

- **published evaluation**: the defence's own population-level attack (one global threshold on the
  released confidence) on clean records, TPR at each FPR level with its two-sided interval;
- **sample-level evaluation**: the best (attack, canary type) among the adaptive attacks
  (:data:`ADAPTIVE_ATTACKS`) and the canary types chosen for the defence. Picking among n
  candidates is paid for: the one-sided finding "canaries above the population" compares the
  largest of the n candidates' one-sided lower limits, each at miss (1 − c)/(2n) (Bonferroni over
  all n, so it holds whichever is picked), with the population's one-sided upper limit at miss
  (1 − c)/2 (:func:`joint_limits`): a claim made when no candidate's true TPR is above the
  population's is wrong with probability at most 1 − c, so the finding holds at level c. Both limits
  come from :func:`dpaudit.bounds.strength.tpr_interval`, which accounts for the threshold's
  estimation;
- **canary criterion** (Aerni et al.'s first: canaries at least as vulnerable as the most vulnerable
  natural records): the top-k clean records, chosen on the even-numbered target models and
  evaluated on the odd ones (no selection bias), beside the best canaries on the same odd targets;
- **matched DP-SGD**: the noisiest DP-SGD setting whose test accuracy reaches the defence's (the
  most accurate one where none does), with its best canary TPR under LiRA.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dpaudit.bounds.strength import tpr_at_fpr, tpr_interval
from dpaudit.experiments.canaries.design import DEFENCE_KINDS, HEURISTICS, LABEL_ONLY
from dpaudit.scores import ScoreSet
from dpaudit.table import fpr_tag

#: The attacks adapted to a defence that releases its outputs: LiRA and RMIA (online and offline),
#: and the label-only test, which survives any output perturbation that keeps the top-1 label.
ADAPTIVE_ATTACKS = ("lira_online_logit", "lira_online_hinge", "rmia_online_r4", "rmia_offline_r1", LABEL_ONLY)
#: Attacks whose best canary TPR stands for a DP-SGD baseline.
DPSGD_ATTACKS = ("lira_online_logit", "lira_online_hinge")
#: Share of the clean records counted as "the most vulnerable natural records".
TOP_NATURAL_SHARE = 0.125


def _set(sets: list[ScoreSet], defence: str, attack: str, ctype: str) -> ScoreSet | None:
    return next(
        (s for s in sets if s.group == {"defence": defence, "attack": attack, "canary_type": ctype}), None
    )


def rate(s: ScoreSet, level: float, confidence: float) -> dict[str, float]:
    """TPR at ``level`` FPR with a two-sided interval at ``confidence``."""
    pos, neg = s.scores[s.member], s.scores[~s.member]
    value, low, high, _ = tpr_at_fpr(pos, neg, level, confidence)
    return {"value": value, "low": low, "high": high}


def joint_limits(
    candidates: list[ScoreSet], clean: ScoreSet, level: float, confidence: float
) -> tuple[float, float, ScoreSet]:
    """The finding's two one-sided limits at FPR ``level``: the largest of the n ``candidates``' lower
    limits, each at miss (1 − c)/(2n), the population's (``clean``) upper limit at miss (1 − c)/2, and
    the candidate that gave the lower one.

    The claim "canaries above population" (lower > upper) is made wrongly only if some candidate's
    lower limit lies above its own true TPR (at most n · (1 − c)/(2n), union bound, whichever set is
    then picked) or the population's upper limit lies below its own (at most (1 − c)/2): together at
    most 1 − ``confidence``. Each limit is one-sided because the claim reads one tail of each; a
    two-sided interval would spend half of its share on a tail the claim never reads. Taking the
    largest lower limit rather than that of the set with the best point estimate costs nothing (the
    union bound covers any pick) and lets a large set prove what a small one cannot: with 640
    out-decisions no threshold keeps FPR ≤ 1 % with probability 1 − (1 − c)/(4n), so that set's lower
    limit is 0 (:func:`dpaudit.bounds.strength.tpr_interval`)."""
    alpha = 1.0 - confidence
    share = alpha / (2 * len(candidates))
    lows = [tpr_interval(s.scores[s.member], s.scores[~s.member], level, share, 0.0)[1] for s in candidates]
    pick = int(np.argmax(lows))
    high = tpr_interval(clean.scores[clean.member], clean.scores[~clean.member], level, 0.0, alpha / 2)[2]
    return lows[pick], high, candidates[pick]


def _value(s: ScoreSet, level: float) -> float:
    """The point estimate of :func:`rate` alone (no limits: misses of 0)."""
    return tpr_interval(s.scores[s.member], s.scores[~s.member], level, 0.0, 0.0)[0]


def best_candidate(
    sets: list[ScoreSet], defence: str, attacks: tuple[str, ...], types: tuple[str, ...], level: float
) -> tuple[list[ScoreSet], ScoreSet | None]:
    """The candidate sets and the one with the largest TPR at ``level`` (ties: the first)."""
    candidates = [s for a in attacks for t in types if (s := _set(sets, defence, a, t)) is not None]
    best = max(candidates, key=lambda s: _value(s, level), default=None)
    return candidates, best


def _half(s: ScoreSet, parity: int, rows: np.ndarray | None = None) -> ScoreSet:
    """The decisions of ``s`` whose target model has the given parity (and canary in ``rows``)."""
    keep = (s.arrays["model"] % 2) == parity
    if rows is not None:
        keep &= np.isin(s.arrays["canary"], rows)
    return dataclasses.replace(
        s, scores=s.scores[keep], member=s.member[keep], arrays={k: v[keep] for k, v in s.arrays.items()}
    )


def top_natural(clean: ScoreSet, share: float = TOP_NATURAL_SHARE) -> np.ndarray:
    """The clean records with the largest in-minus-out mean score on the even-numbered targets."""
    sel = _half(clean, 0)
    records = np.unique(sel.arrays["canary"])
    gap = []
    for r in records:
        mine = sel.arrays["canary"] == r
        ins, outs = sel.scores[mine & sel.member], sel.scores[mine & ~sel.member]
        gap.append(ins.mean() - outs.mean() if ins.size and outs.size else -math.inf)
    k = max(1, round(share * len(records)))
    return records[np.argsort(gap, kind="stable")[::-1][:k]]


def matched_dpsgd(info: dict[str, Any], accuracy: float) -> str | None:
    """The noisiest DP-SGD defence at least as accurate as ``accuracy`` (else the most accurate)."""
    private = [n for n, i in info.items() if DEFENCE_KINDS[i["kind"]].private]
    if not private:
        return None
    reaching = [n for n in private if info[n]["accuracy"] >= accuracy]
    if reaching:
        return min(reaching, key=lambda n: info[n]["accuracy"])
    return max(private, key=lambda n: info[n]["accuracy"])


def evaluate(
    sets: list[ScoreSet], info: dict[str, Any], levels: list[float], check: float, confidence: float
) -> list[dict[str, Any]]:
    """One row per published heuristic defence in ``info`` (see the module docstring)."""
    rows = []
    for name, d in info.items():
        if not DEFENCE_KINDS[d["kind"]].heuristic:
            continue
        spec = HEURISTICS[d["kind"]]
        present = tuple(t for t in spec.canary_types if _set(sets, name, ADAPTIVE_ATTACKS[0], t))
        candidates, best = best_candidate(sets, name, ADAPTIVE_ATTACKS, present, check)
        clean = _set(sets, name, spec.published_attack, "clean")
        if best is None or clean is None:
            continue
        row: dict[str, Any] = {
            "defence": name, "label": d["label"], "citation": spec.citation, "accuracy": d["accuracy"],
            "published_attack": spec.published_attack, "candidates": len(candidates),
            "best_attack": best.group["attack"], "best_type": best.group["canary_type"],
            "population": {f"{lv:g}": rate(clean, lv, confidence) for lv in levels},
            "canary": {f"{lv:g}": rate(best, lv, confidence) for lv in levels},
        }  # fmt: skip
        pop, can = row["population"][f"{check:g}"], row["canary"][f"{check:g}"]
        row["ratio"] = can["value"] / pop["value"] if pop["value"] > 0 else math.inf
        joint_low, joint_high, proof = joint_limits(candidates, clean, check, confidence)
        row["canary_above_population"] = bool(joint_low > joint_high)
        row["joint_canary_low"], row["joint_population_high"] = joint_low, joint_high
        row["joint_attack"], row["joint_type"] = proof.group["attack"], proof.group["canary_type"]
        natural_clean = _set(sets, name, best.group["attack"], "clean")
        if natural_clean is not None:
            top = top_natural(natural_clean)
            row["top_natural"] = rate(_half(natural_clean, 1, top), check, confidence)
            row["canary_odd_targets"] = rate(_half(best, 1), check, confidence)
            row["top_natural_records"] = int(top.size)
            row["criterion_holds"] = bool(row["canary_odd_targets"]["value"] >= row["top_natural"]["value"])
        dp = matched_dpsgd(info, d["accuracy"])
        if dp is not None:
            dp_types = tuple(t for t in spec.canary_types if _set(sets, dp, DPSGD_ATTACKS[0], t))
            _, dp_best = best_candidate(sets, dp, DPSGD_ATTACKS, dp_types, check)
            row["dpsgd"] = {
                "defence": dp, "label": info[dp]["label"], "accuracy": info[dp]["accuracy"],
                "reaches_accuracy": bool(info[dp]["accuracy"] >= d["accuracy"]),
                "canary": {f"{lv:g}": rate(dp_best, lv, confidence) for lv in levels} if dp_best else {},
            }  # fmt: skip
        rows.append(row)
    return rows


#: Columns of the privacy–utility figure's table.
PLOT_COLUMNS = ("defence", "kind", "test_accuracy", "canary_tpr", "canary_tpr_low", "canary_tpr_high")


def metrics(row: dict[str, Any], levels: list[float]) -> dict[str, float]:
    """The versioned numbers of one defence's row: rates at every FPR level (``…_tpr_at_fpr_0p001``
    with ``_low``/``_high``), the ratio, the finding, the criterion and the matched DP-SGD."""
    out = {"test_accuracy": row["accuracy"]}
    for level in levels:
        tag = fpr_tag(level)
        for part in ("population", "canary"):
            for end, value in row[part][f"{level:g}"].items():
                out[f"{part}_tpr_at_fpr_{tag}" + ("" if end == "value" else f"_{end}")] = value
        if "dpsgd" in row and row["dpsgd"]["canary"]:
            out[f"matched_dpsgd_canary_tpr_at_fpr_{tag}"] = row["dpsgd"]["canary"][f"{level:g}"]["value"]
    if math.isfinite(row["ratio"]):
        out["ratio"] = row["ratio"]
    out["canary_above_population"] = float(row["canary_above_population"])
    if "top_natural" in row:
        out["top_natural_tpr"] = row["top_natural"]["value"]
        out["canary_tpr_on_odd_targets"] = row["canary_odd_targets"]["value"]
        out["canary_criterion_holds"] = float(row["criterion_holds"])
    if "dpsgd" in row:
        out["matched_dpsgd_test_accuracy"] = row["dpsgd"]["accuracy"]
    return out


def plot_rows(rows: list[dict[str, Any]], levels: list[float]) -> list[dict[str, Any]]:
    """The privacy–utility table of the figure: each heuristic and its matched DP-SGD setting, with the
    best canary TPR at the lowest FPR level and its interval."""
    low_level = f"{min(levels):g}"
    out: list[dict[str, Any]] = []
    for r in rows:
        entries = [(r["label"], "heuristic", r["accuracy"], r["canary"][low_level])]
        if "dpsgd" in r and r["dpsgd"]["canary"]:
            dp = r["dpsgd"]
            entries.append((f"{dp['label']} (matched to {r['label']})", "DP-SGD", dp["accuracy"],
                            dp["canary"][low_level]))  # fmt: skip
        for label, kind, acc, tpr in entries:
            out.append({"defence": label, "kind": kind, "test_accuracy": acc, "canary_tpr": tpr["value"],
                        "canary_tpr_low": tpr["low"], "canary_tpr_high": tpr["high"]})  # fmt: skip
    return out
