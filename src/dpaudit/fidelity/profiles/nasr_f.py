"""Profile ``nasr-f-paper-regime``: threat model F of Nasr et al. 2021 at the paper's q, T and ε = 4.

Separates the regime from the estimator. In the paper's MNIST regime (q = 256/60000, T = 14062, z by
RDP; :data:`dpaudit.references.NASR_2021` §IV-F and Appendix A) it simulates Distinguisher 3 on the
ideal mechanism (:func:`dpaudit.fidelity.nasr_f_regime.simulate_distinguisher3`), checks the
simulation against the PLD oracle, and puts side by side: the Eq. 5 sweep on the simulated scores,
that sweep's plug-in ceiling on the exact law, Eq. 5 audits drawn from the exact law, and dpaudit's
family bounds on the same scores. The same Eq. 5 sweep and ceiling at q = 0.1, T = 100 (the
instantiation audit's regime) give the regime effect. Attainability: the ceiling at 10³–10⁶ trials.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from dpaudit.attacks.gradient_canary import compare_simulation_with_pld
from dpaudit.bounds.auditor import audit_scores
from dpaudit.bounds.empirical import clopper_pearson_upper, epsilon_lower_from_scores
from dpaudit.bounds.estimators.threshold_family import family
from dpaudit.bounds.stepwise import stepwise_family_bound
from dpaudit.fidelity.nasr_f_regime import (
    ExactLaw,
    Regime,
    bonferroni_level,
    eq5_ceiling,
    eq5_simulated_audits,
    exact_law,
    paper_regime,
    simulate_distinguisher3,
)
from dpaudit.fidelity.profile import Measured, Profile, ProfileResult
from dpaudit.references import PAPER_RESULTS

NAME = "nasr-f-paper-regime"
EPSILON, DELTA, CONFIDENCE = 4.0, 1e-5, 0.95
TRIALS_PER_WORLD = 100_000
#: Nasr et al. Appendix A: "the malicious dataset 1,000,000 times" — read as 10⁶ trials in all.
PAPER_TRIALS_PER_WORLD = 500_000
MAX_THRESHOLDS = 200  # the sweep's candidate thresholds (dpaudit's default)
FPRS = {"tail": 1e-4, "low": 1e-3, "mid": 1e-2, "high": 1e-1}
GRID = {"thousand_trials": 1_000, "ten_thousand_trials": 10_000, "hundred_thousand_trials": 100_000,
        "paper_trials": PAPER_TRIALS_PER_WORLD, "million_trials": 1_000_000}  # fmt: skip
AUDITS = 200
ORACLE = "Eq. 5 plug-in ceiling on the exact law (PLD), oracle threshold, CP limits at 97.5 % each"
SWEEP = "Eq. 5 sweep (Clopper–Pearson), Bonferroni over 200 thresholds, joint 95 %"


def _paper_value() -> float:
    return float(next(r.value for r in PAPER_RESULTS if r.key == "nasr-f"))  # type: ignore[arg-type]


def _regime_numbers(tag: str, regime: Regime, seed: int) -> tuple[dict[str, Measured], dict]:
    """Simulation, Eq. 5 sweep, ceiling and family bounds of one regime (``tag``); facts for findings."""
    q, steps, z = regime.sampling_rate, regime.steps, regime.noise_multiplier
    out: dict[str, Measured] = {}
    eps_pld = regime.epsilon_pld()
    out[f"noise_multiplier.{tag}"] = Measured(
        z, "RDP calibration (dp_accounting) to ε = 4, δ = 1e-5", "estimate"
    )
    out[f"epsilon_pld.{tag}"] = Measured(
        eps_pld, "PLD accountant (dp_accounting, pessimistic)", "estimate",
        note="upper bound on ε of the calibrated mechanism: the tight ε the audit aims at",
    )  # fmt: skip
    t0 = time.perf_counter()
    game = simulate_distinguisher3(
        TRIALS_PER_WORLD, sampling_rate=q, steps=steps, noise_multiplier=z, seed=seed, progress=True
    )
    sim_s = time.perf_counter() - t0
    n = TRIALS_PER_WORLD
    sweep = epsilon_lower_from_scores(
        game.scores_dprime, game.scores_d, DELTA, CONFIDENCE, "bonferroni", seed, MAX_THRESHOLDS
    )
    out[f"eq5_sweep.{tag}"] = Measured(
        sweep.epsilon_lower, SWEEP + ", simulated Distinguisher 3", "bound", level=CONFIDENCE, n=n,
        note=f"assumes nothing; FPR_U {sweep.fpr_upper:.3g}, FNR_U {sweep.fnr_upper:.3g}",
    )  # fmt: skip
    split = epsilon_lower_from_scores(game.scores_dprime, game.scores_d, DELTA, CONFIDENCE, "split", seed)
    out[f"eq5_sweep_split.{tag}"] = Measured(
        split.epsilon_lower, "Eq. 5 sweep (Clopper–Pearson), threshold chosen on half, counted on half",
        "bound", level=CONFIDENCE, n=n, note="assumes nothing",
    )  # fmt: skip
    law = exact_law(q, steps, z)
    bonf = eq5_ceiling(law, n, DELTA, bonferroni_level(MAX_THRESHOLDS, CONFIDENCE))
    oracle = eq5_ceiling(law, n, DELTA)
    out[f"eq5_ceiling.{tag}"] = Measured(
        bonf.epsilon, "Eq. 5 plug-in ceiling on the exact law (PLD), CP limits at the Bonferroni level",
        "estimate", n=n, note=f"counts = N × true rates; true FPR {bonf.fpr:.3g} at the best threshold",
    )  # fmt: skip
    out[f"eq5_ceiling_oracle_threshold.{tag}"] = Measured(
        oracle.epsilon, ORACLE, "estimate", n=n, note=f"true FPR {oracle.fpr:.3g}, FNR {oracle.fnr:.4g}"
    )
    rows = compare_simulation_with_pld(
        game.scores_d, game.scores_dprime, list(FPRS.values()), sampling_rate=q, steps=steps,
        noise_multiplier=z,
    )  # fmt: skip
    for (name, fpr), r in zip(FPRS.items(), rows, strict=True):
        out[f"sim_tpr_{name}_fpr.{tag}"] = Measured(
            r.tpr_mc, "Monte Carlo TPR of Distinguisher 3 at an empirical threshold", "rate",
            low=r.tpr_mc - 3 * r.std_error, high=r.tpr_mc + 3 * r.std_error, n=n,
            note=f"FPR {fpr:g}; PLD oracle TPR {r.tpr_pld:.4g}; z-score {r.z_score:.2f}; low/high ± 3 s.e.",
        )  # fmt: skip
    out[f"sim_pld_max_abs_z.{tag}"] = Measured(
        max(abs(r.z_score) for r in rows), "largest |MC − PLD| / s.e. over the FPRs", "estimate", n=n
    )
    fam = family(q, steps)
    t0 = time.perf_counter()
    audit = audit_scores(
        game.scores_dprime, game.scores_d, delta=DELTA, confidence=CONFIDENCE, mechanism=fam,
        headline=("sweep_bonferroni",), seed=seed, fpr_levels=(0.01,),
    )  # fmt: skip
    sg = audit.lower_bounds["subsampled_gaussian"]
    out[f"subsampled_gaussian_family.{tag}"] = Measured(
        sg.epsilon, "one-threshold subsampled-Gaussian family bound (CP limits through the family's "
        "trade-off curve)", "bound", level=sg.confidence, n=n,
        note="assumes the Poisson-subsampled Gaussian family at q, T",
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    print(f"{tag}: simulation {sim_s:.0f} s, scores auditor {seconds:.0f} s", file=sys.stderr)
    gdp = audit.lower_bounds["gdp"]
    out[f"gdp_family.{tag}"] = Measured(
        gdp.epsilon, "μ-GDP family bound (CP limits through G_μ)", "bound", level=gdp.confidence, n=n,
        note="assumes μ-GDP, which the subsampled Gaussian only approximates (central limit)",
    )  # fmt: skip
    step = stepwise_family_bound(
        game.steps_dprime, game.steps_d, fam, delta=DELTA, confidence=CONFIDENCE, known_baseline=0.0
    )
    out[f"stepwise_family.{tag}"] = Measured(
        step.epsilon, "per-step subsampled-Gaussian family bound (σ_UB, Δ_LB from every step)",
        "bound", level=CONFIDENCE, n=n,
        note="assumes the family per step and a baseline of exactly 0 (true of the simulation)",
    )  # fmt: skip
    facts = {"eps_pld": eps_pld, "sweep": sweep.epsilon_lower, "ceiling": bonf.epsilon,
             "oracle": oracle.epsilon, "law": law, "sim_s": sim_s, "stepwise": step.epsilon,
             "family": sg.epsilon}  # fmt: skip
    return out, facts


def _attainability(law: ExactLaw, paper: float, seed: int) -> tuple[dict[str, Measured], dict]:
    """The oracle ceiling over the trial grid, and Eq. 5 audits drawn from the exact law."""
    out: dict[str, Measured] = {}
    values = {}
    for name, n in GRID.items():
        c = eq5_ceiling(law, n, DELTA)
        values[name] = c.epsilon
        out[f"eq5_ceiling_oracle_threshold.{name}"] = Measured(
            c.epsilon, ORACLE, "estimate", n=n, note=f"paper regime; true FPR {c.fpr:.3g} at the best one"
        )
    levels = {"naive": 0.975, "bonferroni": bonferroni_level(MAX_THRESHOLDS, CONFIDENCE)}
    for name in ("hundred_thousand_trials", "paper_trials", "million_trials"):
        n = GRID[name]
        runs = eq5_simulated_audits(law, n, DELTA, levels, audits=AUDITS, seed=seed)
        for level_name, v in runs.items():
            label = (
                "Eq. 5 sweep over every support point, threshold chosen on the counted trials (overclaims)"
                if level_name == "naive" else SWEEP.replace("200 thresholds", "200 thresholds' level")
            )  # fmt: skip
            out[f"eq5_audits_median_{level_name}.{name}"] = Measured(
                float(np.median(v)), label + f"; median of {AUDITS} audits drawn from the exact law",
                "estimate", n=n, note=f"largest of {AUDITS}: {np.max(v):.3f}",
            )  # fmt: skip
            hits = int(np.sum(v >= paper))
            high = float(clopper_pearson_upper(hits, AUDITS, CONFIDENCE))
            out[f"eq5_audits_reaching_paper_{level_name}.{name}"] = Measured(
                hits / AUDITS, f"share of {AUDITS} exact-law audits whose Eq. 5 value reaches the paper's",
                "rate", low=0.0, high=high, level=CONFIDENCE, n=AUDITS,
                note="high: one-sided Clopper–Pearson upper limit",
            )  # fmt: skip
            values[f"{level_name}_{name}"] = (float(np.median(v)), float(np.max(v)), hits)
    return out, values


def run(seed: int) -> ProfileResult:
    """Both regimes, the attainability grid and the findings."""
    paper = _paper_value()
    big = paper_regime(EPSILON, DELTA)
    small = Regime.calibrated(0.1, 100, EPSILON, DELTA)
    numbers, f_big = _regime_numbers("paper_regime", big, seed)
    small_numbers, f_small = _regime_numbers("small_regime", small, seed + 1)
    numbers.update(small_numbers)
    grid, g = _attainability(f_big["law"], paper, seed)
    numbers.update(grid)
    for name in ("thousand_trials", "hundred_thousand_trials", "million_trials"):
        c = eq5_ceiling(f_small["law"], GRID[name], DELTA)
        numbers[f"eq5_ceiling_oracle_threshold_small_regime.{name}"] = Measured(
            c.epsilon, ORACLE, "estimate", n=GRID[name], note="q = 0.1, T = 100"
        )
    nf, bh = g["naive_paper_trials"], g["bonferroni_hundred_thousand_trials"]
    findings = (
        f"The paper's ε_LB = {paper:g} at ε = 4 is not attainable by its stated method on the ideal "
        f"mechanism: even with the exact law of Distinguisher 3 and an oracle threshold, the Eq. 5 "
        f"Clopper–Pearson sweep's plug-in ceiling (counts = N × true rates) is {g['paper_trials']:.2f} "
        f"with 5×10⁵ trials per world "
        f"(the paper's 10⁶ trials of F, Appendix A), {g['million_trials']:.2f} with 10⁶ per world and "
        f"{g['thousand_trials']:.2f} with 10³ (the paper's usual count). Distinguisher 3 is the "
        f"Neyman–Pearson test of this mechanism, so no distinguisher of the ideal F has a higher ceiling.",
        f"Of {AUDITS} Eq. 5 audits drawn from the exact law at 5×10⁵ trials per world, {nf[2]} reach "
        f"{paper:g} even with the threshold chosen on the counted trials among every support point "
        f"(median {nf[0]:.2f}, largest {nf[1]:.2f}); the Bonferroni-valid sweep's median is "
        f"{g['bonferroni_paper_trials'][0]:.2f}.",
        f"The regime is not what limits Eq. 5: with 10⁵ trials per world the simulated sweep certifies "
        f"{f_big['sweep']:.2f} (plug-in ceiling {f_big['ceiling']:.2f}) of ε_PLD {f_big['eps_pld']:.2f} "
        f"in the paper's regime (q = 256/60000, T = {big.steps}) and {f_small['sweep']:.2f} (ceiling "
        f"{f_small['ceiling']:.2f}) of {f_small['eps_pld']:.2f} at q = 0.1, T = 100, ratios "
        f"{f_big['sweep'] / f_big['eps_pld']:.2f} and {f_small['sweep'] / f_small['eps_pld']:.2f}; the "
        f"oracle-threshold ceilings differ by {f_big['oracle'] - f_small['oracle']:.2f}. Exact-law audits "
        f"at the same N put the Bonferroni sweep's median at {bh[0]:.2f} (largest of {AUDITS}: {bh[1]:.2f}) "
        f"in the paper's regime.",
        f"The gap is the estimator's: on the same paper-regime scores the per-step family bound certifies "
        f"{f_big['stepwise']:.2f} and the one-threshold subsampled-Gaussian family bound "
        f"{f_big['family']:.2f} (each at 95 %, assuming the family).",
    )
    setting = (
        f"Ideal F (Crafter 5 at learning rate 0): Distinguisher 3 simulated, {TRIALS_PER_WORLD} trials "
        f"per world, ε = 4, δ = 1e-5, q = 256/60000, T = {big.steps} (60 epochs), "
        f"z = {big.noise_multiplier:.4f} (RDP), and q = 0.1, T = 100, z = {small.noise_multiplier:.4f}; "
        f"exact law from dp_accounting's PLD (grid 1e-3, pessimistic); the paper reports {paper:g}"
    )
    differs = (
        "No MNIST training: the mechanism is simulated as Crafter 5 makes it (no other gradient on the "
        "canary), so the numbers bound what any F audit can reach; 10⁵ trials per world simulated "
        "(10⁶ would not fit 30 minutes on 2 shared cores), the paper's 10⁶ trials covered by the exact law"
    )
    return ProfileResult(NAME, "NASR_2021", setting, differs, numbers, seed=seed, findings=findings)


PROFILE = Profile(
    NAME,
    "NASR_2021",
    "F's Distinguisher 3 at the paper's q, T: Eq. 5 sweep, its ceiling on the exact law, family bounds",
    12.0,
    run,
)
