"""Bounds stage of the identifiability audit: the numbers of Bernau et al. §5.3 and §6.

The attack stage's score sets (two per setting: A_DI,Gau's final log-odds of D and Yeom et al.'s
negated loss of x̂) go through :func:`dpaudit.bounds.audit.audit_score_sets` once: per adversary
the ``scores`` estimator (split and Bonferroni threshold sweeps, Nasr et al. 2021, which assume
nothing; the GDP-based bound of Nasr et al. 2023, whose Gaussian trade-off the full-batch Gaussian
mechanism guarantees; the naive sweep as an estimate; TPR at fixed FPR, AUROC, advantage), the
``decision`` estimator (Adv of the adversary's own decisions with its Clopper–Pearson interval) and,
for A_DI,Gau, ``di_beliefs`` (δ′ and the three ε′ of §5.3, all estimates). Each adversary's
counted bounds are one headline scope, so the summary row's headline — the largest of A_DI,Gau's
counted bounds — holds at ``bounds.confidence`` jointly over everything it maximises over.

Beside them, per setting: every accountant's ε for the mechanism the train manifest recorded, the
target ρβ, ρα of Thm. 2 and its RDP form (§4.4), and the audited model's test accuracy. All
training facts (k, C, δ, z, the seed) come from the train manifest. The Fig. 4 candidate runs give
each candidate's mean LS_i with its interval and, per neighbourhood, whether the top candidates lie
above the bottom ones (``candidate_summary.csv``; the section warns when they do not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from dpaudit.attacks import di
from dpaudit.bounds.accountants import epsilons_for_event, rdp_epsilon_and_order
from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.identifiability import rho_alpha_from_epsilon, rho_alpha_from_rdp
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import CANDIDATES_FILE, Setting, manifest_settings
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow
from dpaudit.scores import ScoreSet, group_key, read_score_sets
from dpaudit.table import ResultRow

#: The threshold sweeps reported beside the GDP bound (both assume nothing).
SWEEPS = ("sweep_split", "sweep_bonferroni")

#: Plot table of the Fig. 4 candidates: per candidate its mean LS_i with interval, and ``separated``
#: (1/0) of its neighbourhood (:func:`candidate_separation`). The metrics stay the results table's.
CANDIDATE_SUMMARY_FILE = "candidate_summary.csv"


def setting_key(st: Setting) -> str:
    """The results-table group of a setting's own rows (accountants, ρβ, ρα, utility)."""
    return group_key(setting=st.file)


def adversary_key(st: Setting, attack: str) -> str:
    """The results-table group of one adversary's score set in a setting (``attack``: di, mi)."""
    return group_key(setting=st.file, attack=attack)


def rho_alpha_rdp_for(noise_multiplier: float, steps: int, delta: float) -> float:
    """ρα under RDP composition (Bernau §4.4): 2Φ(√(ε_RDP/(2α))) − 1 at the accountant's optimal order α.

    For k full-batch Gaussian steps ε_RDP(α) = α·k/(2z²), so this equals 2Φ(√k/(2z)) − 1, the
    advantage A_DI,Gau attains with local sensitivity. Thm. 2's ρα (classic calibration) can be
    smaller than this for RDP-calibrated noise, so the audit reports both.
    """
    _, order = rdp_epsilon_and_order(noise_multiplier, 1.0, steps, delta)
    return rho_alpha_from_rdp(order * steps / (2.0 * noise_multiplier**2), order)


def setting_rows(key: str, upper: dict[str, float], st: Setting, eps: float, delta: float,
                 rho_alpha_rdp: float, accuracy: float) -> list[ResultRow]:  # fmt: skip
    """A setting's accountant rows (ε per accountant, ρβ, ρα of Thm. 2 and RDP) and its utility."""
    rows = [ResultRow(key, "epsilon_upper", v, name, "accountant") for name, v in upper.items()]
    rows += [
        ResultRow(key, "rho_beta", st.rho_beta, "target", "accountant"),
        ResultRow(key, "rho_alpha", rho_alpha_from_epsilon(eps, delta), "thm2", "accountant"),
        ResultRow(key, "rho_alpha", rho_alpha_rdp, "rdp", "accountant"),
        ResultRow(key, "utility", accuracy, "test_accuracy", "utility"),
    ]
    return rows


def bounds(config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """The results table, plot tables (beliefs, ε′ vs ε, LS/GS over epochs, candidates), summary rows."""
    confidence = config.bounds.confidence
    with open_npz(audit.losses_path) as lf:
        losses = {k: lf[k] for k in lf.files}
    sets: dict[str, ScoreSet] = {s.key: s for s in read_score_sets(audit.scores_path)}
    table = audit_score_sets(list(sets.values()), confidence, scope=lambda s: s.key)
    belief_rows: list[pd.DataFrame] = []
    eps_rows: list[dict[str, Any]] = []
    step_rows: list[pd.DataFrame] = []
    lower_rows: list[dict[str, Any]] = []
    facts: dict[str, dict[str, float]] = {}
    summary: list[SummaryRow] = []
    k = int(manifest.facts["epochs"])
    clip_norm = float(manifest.facts["clip_norm"])
    reference = float(manifest.facts["reference_rho_beta"])
    for st in manifest_settings(manifest):
        mechanism = manifest.mechanisms[st.file]
        with open_npz(audit.train_dir / f"{st.file}.npz") as f:
            dd = f["dd"]
            eps = float(f["epsilon"])
        z, delta = float(mechanism.noise_multiplier or 0.0), manifest.delta
        di_key, mi_key = adversary_key(st, "di"), adversary_key(st, "mi")
        di_set = sets[di_key]
        truth = di.true_log_odds(di_set.scores, di_set.member.astype(int))
        upper = epsilons_for_event(mechanism.dp_event(), delta)
        rho_alpha_rdp = rho_alpha_rdp_for(z, k, delta)
        accuracy = float(np.mean(losses[f"{st.file}__test_accuracy"]))
        table.extend(setting_rows(setting_key(st), upper, st, eps, delta, rho_alpha_rdp, accuracy))
        ls = np.sqrt(dd)
        facts[st.file] = {
            "epsilon": eps,
            "delta": delta,
            "noise_multiplier": z,
            "adv_expected_local": di.expected_advantage_local(z, k),
            "delta_prime_expected_local": di.expected_delta_prime_local(z, k, eps),
            "mean_local_sensitivity": float(ls.mean()),
            "trials": len(truth),
            "trials_per_world": int(di_set.member.sum()),
        }

        def value(quantity: str, group: str, estimator: str) -> float:
            return table.one(quantity, group, estimator=estimator).value

        setting = st.key
        belief_rows.append(
            pd.DataFrame(
                {"rho_beta": st.rho_beta, "setting": setting, "belief": di.beliefs_from_log_odds(truth)}
            )
        )
        eps_rows.append(
            {
                "epsilon": eps,
                "rho_beta": st.rho_beta,
                "setting": setting,
                "epsilon_prime_ls": value("epsilon_estimate", di_key, "local_sensitivity"),
                "epsilon_prime_belief_estimate": value("epsilon_estimate", di_key, "belief"),
                "epsilon_prime_adv_estimate": value("epsilon_estimate", di_key, "adv_inverse"),
                "adv_di": value("advantage", di_key, "decision"),
                "adv_mi": value("advantage", mi_key, "decision"),
                "rho_alpha": value("rho_alpha", setting_key(st), "thm2"),
                "rho_alpha_rdp": rho_alpha_rdp,
            }
        )
        lower_rows.append(
            {
                "rho_beta": st.rho_beta,
                "setting": setting,
                "epsilon_pld": upper["pld"],
                **{
                    f"epsilon_lower_{name}": value("epsilon_lower", di_key, name) for name in ("gdp", *SWEEPS)
                },
                "epsilon_estimate_sweep_naive": value("epsilon_estimate", di_key, "sweep_naive"),
                "epsilon_lower_mi_gdp": value("epsilon_lower", mi_key, "gdp"),
                "auroc": value("auroc", di_key, "scores"),
            }
        )
        if math.isclose(st.rho_beta, reference):
            gs = clip_norm * (2.0 if st.neighbours == "bounded" else 1.0)
            step_rows.append(
                pd.DataFrame(
                    {
                        "epoch": np.arange(1, k + 1),
                        "setting": setting,
                        "ls_mean": ls.mean(axis=0),
                        "ls_p05": np.quantile(ls, 0.05, axis=0),
                        "ls_p95": np.quantile(ls, 0.95, axis=0),
                        "gs": gs,
                    }
                )
            )
        best = table.headline([di_key])
        summary.append(
            SummaryRow(
                setting=f"ρβ={st.rho_beta:g} {setting}",
                epsilon_upper=upper,
                epsilon_lower=best.value,
                epsilon_lower_estimator=best.estimator,
                epsilon_lower_assumes=best.assumes,
                scores={"rho_beta": st.rho_beta, "rho_alpha": value("rho_alpha", setting_key(st), "thm2")},
                utility_name="test accuracy",
                utility=accuracy,
                confidence=best.level,
            )
        )
    plots: dict[str, pd.DataFrame] = {
        "beliefs.csv": pd.concat(belief_rows),
        "epsilon.csv": pd.DataFrame(eps_rows).replace([np.inf, -np.inf], [1e308, -1e308]),
        "lower_bounds.csv": pd.DataFrame(lower_rows).replace([np.inf, -np.inf], [1e308, -1e308]),
    }
    if step_rows:
        plots["sensitivity_steps.csv"] = pd.concat(step_rows)
    cand_path = audit.train_dir / CANDIDATES_FILE
    cand_rows: list[dict[str, Any]] = []
    separation: dict[str, dict[str, float]] = {}
    if cand_path.exists():
        plots["candidates.csv"] = candidate_frame(cand_path)
    if cand_path.exists() and int(manifest.sizes.get("candidate_trials", 0)) >= 2:
        with open_npz(cand_path) as c:
            summary_frame = candidate_summary({key: c[key] for key in c.files}, confidence)
        cand_rows = summary_frame.to_dict("records")
        separation = candidate_separation(summary_frame)
        plots[CANDIDATE_SUMMARY_FILE] = summary_frame.assign(
            separated=[separation.get(nb, {}).get("separated", np.nan) for nb in summary_frame["neighbours"]]
        )
    return BoundsResult(
        metrics=table.metrics(),
        plots=plots,
        summary=summary,
        context={
            "candidate_rows": cand_rows,
            "candidate_separation": separation,
            "candidates": cand_path.exists(),
            "steps": bool(step_rows),
            "confidence": confidence,
            "facts": facts,
        },
        table=table,
    )


def candidate_frame(path: Any) -> pd.DataFrame:
    """LS_i of the top/bottom dataset-sensitivity candidates, one row per candidate and step."""
    with open_npz(path) as c:
        labels = [
            f"{nb} {end} {r} (#{i})"
            for nb, end, r, i in zip(c["neighbours"], c["end"], c["rank"], c["index"], strict=True)
        ]
        ls = c["ls"]
        return pd.DataFrame(
            {
                "candidate": np.repeat(labels, ls.shape[1]),
                "neighbours": np.repeat(c["neighbours"], ls.shape[1]),
                "ls": ls.ravel(),
            }
        )


def candidate_summary(arrays: Mapping[str, np.ndarray], confidence: float) -> pd.DataFrame:
    """Per Fig. 4 candidate: its trials' mean LS_i (each trial averaged over its k steps) with a
    two-sided Student-t interval at ``confidence`` (per candidate, not joint); each candidate needs 2
    trials or more.

    ``arrays`` holds the candidates file's arrays (:func:`.train.candidate_runs`).
    """
    per_trial = np.asarray(arrays["ls"], dtype=np.float64).mean(axis=1)
    keys = list(zip(arrays["neighbours"], arrays["end"], arrays["rank"], arrays["index"], strict=True))
    rows: list[dict[str, Any]] = []
    for key in dict.fromkeys(keys):
        nb, end, rank, index = key
        x = per_trial[[k == key for k in keys]]
        mean = float(x.mean())
        if len(x) < 2:
            raise ValueError(f"candidate {nb} {end} {rank} (#{index}): needs 2 trials, has {len(x)}")
        half = float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1) * stats.sem(x))
        rows.append({"neighbours": str(nb), "end": str(end), "rank": int(rank), "index": int(index),
                     "trials": len(x), "mean_ls": mean, "low": mean - half, "high": mean + half})
    return pd.DataFrame(rows)


def candidate_separation(summary: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Whether the top candidates are more identifiable than the bottom ones (Bernau Fig. 4), per
    neighbourhood with both lists present.

    ``separated`` is 1.0 when every top candidate's mean LS_i exceeds every bottom candidate's and
    their intervals do not overlap (lowest top ``low`` > highest bottom ``high``), else 0.0; the
    extremes behind it come along (``top_min_mean``, ``bottom_max_mean``, ``top_min_low``,
    ``bottom_max_high``), as do the number of candidates per list.
    """
    out: dict[str, dict[str, float]] = {}
    for nb, group in summary.groupby("neighbours", sort=False):
        top, bottom = group[group["end"] == "top"], group[group["end"] == "bottom"]
        if top.empty or bottom.empty:
            continue
        entry = {
            "top_min_mean": float(top["mean_ls"].min()),
            "bottom_max_mean": float(bottom["mean_ls"].max()),
            "top_min_low": float(top["low"].min()),
            "bottom_max_high": float(bottom["high"].max()),
            "top_count": float(len(top)),
            "bottom_count": float(len(bottom)),
        }
        above = entry["top_min_mean"] > entry["bottom_max_mean"]
        apart = above and entry["top_min_low"] > entry["bottom_max_high"]
        out[str(nb)] = {"separated": 1.0 if apart else 0.0, **entry}
    return out


def separation_sentences(
    separation: Mapping[str, Mapping[str, float]], rows: list[dict[str, Any]]
) -> list[str]:
    """One warning sentence per neighbourhood whose Fig. 4 candidates do not separate."""
    out = []
    for nb, entry in separation.items():
        if entry["separated"]:
            continue
        bottom = [r for r in rows if r["neighbours"] == nb and r["end"] == "bottom"]
        worst = max(bottom, key=lambda r: r["mean_ls"])
        if worst["mean_ls"] >= entry["top_min_mean"]:
            verdict = (
                "a bottom candidate is at least as identifiable as a top one, so the heuristic of "
                "Bernau et al. (Def. 6) did not rank D′ by identifiability here"
            )
        else:
            verdict = (
                "the intervals overlap, so these trials do not establish that the top candidates "
                "are more identifiable"
            )
        out.append(
            f"Warning ({nb} neighbours): the dataset-sensitivity candidates do not separate — bottom "
            f"candidate #{worst['index']} has mean LS_i {worst['mean_ls']:.3g} [{worst['low']:.3g}, "
            f"{worst['high']:.3g}] against a lowest top candidate mean of {entry['top_min_mean']:.3g} "
            f"(lowest top interval end {entry['top_min_low']:.3g}): {verdict}."
        )
    return out
