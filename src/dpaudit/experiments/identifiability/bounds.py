"""Bounds stage of the identifiability audit: the numbers of Bernau et al. §5.3 and §6.

Per setting: Adv_DI with its Clopper–Pearson interval, δ′, the three empirical ε′ of §5.3 (from
local sensitivities, and the *estimates* from the largest belief and from Adv by inverting Thm. 2 —
neither is a bound: at ρβ = 0.9 the belief estimate can exceed the exact ε), ρα (Thm. 2) and its
RDP form (§4.4), and every accountant's ε for the mechanism the train manifest recorded.

Both adversaries end in the scores auditor (:func:`dpaudit.bounds.auditor.audit_scores`): the DI
adversary's final log-odds of D (in = trials on D, the world that holds x̂), and Yeom et al.'s
negated loss of x̂. Per setting and adversary it reports the split and Bonferroni threshold sweeps
(Nasr et al. 2021 Eqs. 4–5, :data:`dpaudit.references.NASR_2021`; assume nothing), the GDP-based
bound (Nasr et al. 2023 §4, :data:`dpaudit.references.NASR_2023`: μ_LB from Clopper–Pearson limits
on (FPR, FNR), then ε(δ) of μ_LB-GDP), the naive sweep (an estimate, flagged), TPR at fixed FPR,
AUROC and advantage with intervals; every bound at the JOINT ``bounds.confidence``.

The GDP bound is valid here because the audited mechanism is full-batch DP-SGD with Gaussian noise
(q = 1): its trade-off curve is Gaussian with μ = √k/z (local sensitivity: exactly; global: at most).
It is the headline lower bound of each setting, with the split sweep (which assumes nothing) beside
it. All training facts (k, C, δ, z, the seed) come from the train manifest.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from dpaudit.attacks import di
from dpaudit.bounds.accountants import epsilons_for_event, rdp_epsilon_and_order
from dpaudit.bounds.auditor import ScoresAudit, audit_scores
from dpaudit.bounds.identifiability import rho_alpha_from_epsilon, rho_alpha_from_rdp
from dpaudit.experiments.base import BoundsResult, TrainManifest, finite_number
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import CANDIDATES_FILE, manifest_settings
from dpaudit.layout import Audit
from dpaudit.results import SummaryRow

#: The headline lower bound of every setting: the auditor's GDP-based estimator (Nasr et al. 2023).
HEADLINE_ESTIMATOR = "gdp"
#: Valid bounds shown beside it; the naive sweep is listed as an estimate.
SWEEPS = ("sweep_split", "sweep_bonferroni")


def headline_label(confidence: float) -> tuple[str, str]:
    """(estimator, assumption) labels of the headline bound, for the summary row and the report."""
    return (
        f"DI log-odds → GDP (Nasr et al. 2023); joint {confidence:.0%}",
        "Gaussian trade-off (full-batch Gaussian noise, q = 1)",
    )


def di_scores(world: np.ndarray, final_true_log_odds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(in, out) scores of A_DI,Gau for the auditor: the final log-odds of D, higher = "in".

    "In" is world D (world bit 1): D holds x̂, D′ lacks it (unbounded) or holds x̂′ instead
    (bounded). The trial's log-odds of its true world is turned into the log-odds of D; ±∞ (a
    belief of exactly 0 or 1) is clipped to ±1e300 so that every score is finite.
    """
    world = np.asarray(world)
    log_odds_d = np.where(world == 1, final_true_log_odds, -np.asarray(final_true_log_odds, dtype=np.float64))
    log_odds_d = np.clip(log_odds_d, -1e300, 1e300)
    return log_odds_d[world == 1], log_odds_d[world == 0]


def audit_adversary(
    in_scores: np.ndarray, out_scores: np.ndarray, delta: float, confidence: float, seed: int
) -> ScoresAudit:
    """The scores auditor on one adversary's per-trial scores.

    The audit trains full-batch DP-SGD itself, so the Gaussian trade-off that GDP assumes is
    guaranteed; GDP is the one pre-registered headline estimator (the sweeps are reported beside it).
    """
    return audit_scores(
        in_scores,
        out_scores,
        delta=delta,
        confidence=confidence,
        seed=seed,
        assume_gaussian=True,
        headline=(HEADLINE_ESTIMATOR,),
    )


def rho_alpha_rdp_for(noise_multiplier: float, steps: int, delta: float) -> float:
    """ρα under RDP composition (Bernau §4.4): 2Φ(√(ε_RDP/(2α))) − 1 at the accountant's optimal order α.

    For k full-batch Gaussian steps ε_RDP(α) = α·k/(2z²), so this equals 2Φ(√k/(2z)) − 1, the
    advantage A_DI,Gau attains with local sensitivity. Thm. 2's ρα (classic calibration) can be
    smaller than this for RDP-calibrated noise, so the audit reports both.
    """
    _, order = rdp_epsilon_and_order(noise_multiplier, 1.0, steps, delta)
    return rho_alpha_from_rdp(order * steps / (2.0 * noise_multiplier**2), order)


def bounds(config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
    """Metrics per setting, plot tables (beliefs, ε′ vs ε, LS/GS over epochs, candidates), summary rows."""
    confidence = config.bounds.confidence
    with np.load(audit.losses_path) as lf:
        losses = {k: lf[k] for k in lf.files}
    metrics: dict[str, dict[str, dict[str, float]]] = {}
    belief_rows: list[pd.DataFrame] = []
    eps_rows: list[dict[str, Any]] = []
    step_rows: list[pd.DataFrame] = []
    lower_rows: list[dict[str, Any]] = []
    estimator, assumes = headline_label(confidence)
    summary: list[SummaryRow] = []
    k = int(manifest.facts["epochs"])
    clip_norm = float(manifest.facts["clip_norm"])
    reference = float(manifest.facts["reference_rho_beta"])
    seed = int(manifest.seeds["seed"])
    for st in manifest_settings(manifest):
        mechanism = manifest.mechanisms[st.file]
        with np.load(audit.train_dir / f"{st.file}.npz") as f:
            dd, sigma = f["dd"], f["sigma"]
            eps = float(f["epsilon"])
        z, delta = float(mechanism.noise_multiplier or 0.0), manifest.delta
        with np.load(audit.attack_dir / f"{st.file}.npz") as a:
            world, truth = a["world"], a["final_log_odds_true"]
            mi_in, mi_out = a["mi_score"][world == 1], a["mi_score"][world == 0]
            adv = di.advantage_of_guesses(a["di_guess"], world, confidence)
            mi = di.advantage_of_guesses(a["mi_guess"], world, confidence)
        upper = {
            name: finite_number(v) for name, v in epsilons_for_event(mechanism.dp_event(), delta).items()
        }
        eps_ls, _ = di.epsilon_from_sensitivities(sigma, dd, delta)
        eps_belief = di.epsilon_from_beliefs(truth)
        eps_adv = di.epsilon_prime_from_advantage(adv.advantage, delta)
        rho_alpha = rho_alpha_from_epsilon(eps, delta)
        rho_alpha_rdp = rho_alpha_rdp_for(z, k, delta)
        accuracy = float(np.mean(losses[f"{st.file}__test_accuracy"]))
        ls = np.sqrt(dd)
        di_audit = audit_adversary(*di_scores(world, truth), delta, confidence, seed)
        mi_audit = audit_adversary(mi_in, mi_out, delta, confidence, seed)
        gdp = di_audit.lower_bounds[HEADLINE_ESTIMATOR]
        split = di_audit.lower_bounds["sweep_split"]
        pld = upper["pld"]
        metrics.setdefault(st.rho_key, {})[st.key] = {
            "epsilon": finite_number(eps),
            "delta": finite_number(delta),
            "noise_multiplier": finite_number(z),
            "rho_beta": st.rho_beta,
            "rho_alpha": finite_number(rho_alpha),
            "rho_alpha_rdp": finite_number(rho_alpha_rdp),
            "adv_di": adv.advantage,
            "adv_di_low": adv.low,
            "adv_di_high": adv.high,
            "adv_expected_local": di.expected_advantage_local(z, k),
            "adv_mi": mi.advantage,
            "delta_prime": di.delta_prime(truth, st.rho_beta),
            "epsilon_pld": pld,
            "gdp_over_pld": finite_number(gdp.epsilon / pld) if pld > 0 else 0.0,
            "sweep_split_over_pld": finite_number(split.epsilon / pld) if pld > 0 else 0.0,
            "delta_prime_expected_local": di.expected_delta_prime_local(z, k, eps),
            "epsilon_prime_ls": finite_number(eps_ls),
            "epsilon_prime_belief_estimate": finite_number(eps_belief),
            "epsilon_prime_adv_estimate": finite_number(eps_adv),
            "epsilon_rdp": upper["rdp"],
            "mean_local_sensitivity": float(ls.mean()),
            "test_accuracy": accuracy,
            "trials": len(world),
            "trials_per_world": int(np.sum(world == 1)),
            "di": di_audit.metrics(),
            "mi": mi_audit.metrics(),
        }
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
                "epsilon_prime_ls": eps_ls,
                "epsilon_prime_belief_estimate": eps_belief,
                "epsilon_prime_adv_estimate": eps_adv,
                "adv_di": adv.advantage,
                "adv_mi": mi.advantage,
                "rho_alpha": rho_alpha,
                "rho_alpha_rdp": rho_alpha_rdp,
            }
        )
        lower_rows.append(
            {
                "rho_beta": st.rho_beta,
                "setting": setting,
                "epsilon_pld": pld,
                **{
                    f"epsilon_lower_{name}": finite_number(di_audit.lower_bounds[name].epsilon)
                    for name in (HEADLINE_ESTIMATOR, *SWEEPS)
                },
                "mu_lower": finite_number(gdp.details["mu_lower"]),
                "mu_pld": finite_number(math.sqrt(k) / z) if z > 0 else 1e308,
                "epsilon_estimate_sweep_naive": finite_number(di_audit.lower_bounds["sweep_naive"].epsilon),
                "epsilon_lower_mi_gdp": finite_number(mi_audit.lower_bounds[HEADLINE_ESTIMATOR].epsilon),
                "auroc": di_audit.auroc[0],
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
        summary.append(
            SummaryRow(
                setting=f"ρβ={st.rho_beta:g} {setting}",
                epsilon_upper=upper,
                epsilon_lower=finite_number(gdp.epsilon),
                epsilon_lower_estimator=estimator,
                epsilon_lower_assumes=assumes,
                scores={"rho_beta": st.rho_beta, "rho_alpha": finite_number(rho_alpha)},
                utility_name="test accuracy",
                utility=accuracy,
            )
        )
    plots: dict[str, pd.DataFrame] = {
        "beliefs.csv": pd.concat(belief_rows),
        "epsilon.csv": pd.DataFrame(eps_rows).replace([np.inf], 1e308),
        "lower_bounds.csv": pd.DataFrame(lower_rows),
    }
    if step_rows:
        plots["sensitivity_steps.csv"] = pd.concat(step_rows)
    cand_path = audit.train_dir / CANDIDATES_FILE
    if cand_path.exists():
        with np.load(cand_path) as c:
            labels = [
                f"{nb} {end} {r} (#{i})"
                for nb, end, r, i in zip(c["neighbours"], c["end"], c["rank"], c["index"], strict=True)
            ]
            ls = c["ls"]
            plots["candidates.csv"] = pd.DataFrame(
                {
                    "candidate": np.repeat(labels, ls.shape[1]),
                    "neighbours": np.repeat(c["neighbours"], ls.shape[1]),
                    "ls": ls.ravel(),
                }
            )
    return BoundsResult(
        metrics=metrics,
        plots=plots,
        summary=summary,
        context={"candidates": cand_path.exists(), "steps": bool(step_rows), "confidence": confidence},
    )
