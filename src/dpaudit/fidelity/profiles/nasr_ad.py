"""Profile ``nasr-ad-paper-trials``: threat models A–D at the paper's 1000 trials per world, judged by Eq. 5.

Nasr et al. 2021 (:data:`dpaudit.references.NASR_2021`) run A–D 1000 times each (§IV-A: "we are
limited to performing the attack 1,000 times") and bound ε with their Eq. 5: Clopper–Pearson upper
limits on FPR and FNR at one threshold. A (§IV-A) reaches 0.31 at ε = 4 on CIFAR-10; C 0.25 and D 0.37
at ε = 2 on Purchase (both stated in §IV-D). The default audit runs 100 trials per world, where every
A–D bound is 0. This profile runs the instantiation audit's own stages (train → losses → attack →
bounds, :mod:`dpaudit.pipeline`) on adult with A, B, C and D at ε = 2 and ε = 4, 1000 trials per
world, Crafter 3 as the paper lists it (``adaptive_start: zero``, ``adaptive_virtual_clip: false``),
and reads the attack's score sets back to compute, per cell:

- ``eq5_bonferroni``: Eq. 5 swept over thresholds with the level split over thresholds and over the
  cell's statistics (Distinguisher 2's max, mean and final loss), a valid joint 95 % bound;
- ``eq5_paper_practice``: Eq. 5 at the threshold chosen on the same trials (each limit 97.5 %), the
  best statistic: what a paper that does not say how it chose its threshold may have computed (it
  overclaims; shown, never counted);
- ``eq4_point``: the plug-in Eq. 4 value on held-out trials at a threshold chosen on the other half
  (what the attack would certify with unlimited trials at the rates it showed);
- ``trials_needed``: the count per world at which Eq. 5 (threshold fixed in advance) would certify the
  paper's ε_LB / ε at the held-out rates this run showed (:func:`dpaudit.fidelity.power.trials_needed`),
  or none when the plug-in value is below it.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpaudit.fidelity.profile import Measured, Profile, ProfileResult

DATASET = "adult"
AUDIT = f"{DATASET}-instantiation"
EPSILONS = (2.0, 4.0)
THREAT_MODELS = ("A", "B", "C", "D")
TRIALS_PER_WORLD = 1000
CONFIDENCE = 0.95
#: ``trials_needed`` when no count would do (JSON has no infinity); readers map it to ``math.inf``.
NO_COUNT = -1.0
#: Crafter 3 as the paper's listing writes it (start x at 0, virtual step not clipped).
PAPER_CRAFTER = {"adaptive_start": "zero", "adaptive_virtual_clip": False}
#: The paper's ε_LB / ε per threat model and ε (§IV-A: A 0.31 at ε = 4; §IV-D: C 0.25, D 0.37 at ε = 2).
PAPER_RATIOS: dict[tuple[str, float], float] = {
    ("A", 4.0): 0.31 / 4.0,
    ("C", 2.0): 0.25 / 2.0,
    ("D", 2.0): 0.37 / 2.0,
}


def run_params(base: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """params.yaml with the profile's overrides: A–D only, both ε, 1000 trials per world, the paper's
    Crafter 3."""
    params = json.loads(json.dumps(base))
    train = params["instantiation"]["train"]
    train.update(PAPER_CRAFTER)
    train.update(
        seed=seed,
        trials_per_world=TRIALS_PER_WORLD,
        target_epsilons=list(EPSILONS),
        threat_models=list(THREAT_MODELS),
    )
    return params


def _cell_numbers(sets: Sequence[Any], target_ratio: float | None, epsilon: float) -> dict[str, Any]:
    """Eq. 5 (Bonferroni, and the same-trials practice), Eq. 4 and the trials needed for one cell."""
    from dpaudit.bounds.empirical import (
        clopper_pearson_upper,
        epsilon_from_rates,
        epsilon_lower_from_scores,
        select_threshold,
    )
    from dpaudit.fidelity.power import trials_needed

    delta = float(sets[0].param("delta"))
    joint = 1.0 - (1.0 - CONFIDENCE) / len(sets)  # the cell's statistics share the 95 % level
    bonferroni = max(
        (epsilon_lower_from_scores(s.in_scores, s.out_scores, delta, joint, "bonferroni") for s in sets),
        key=lambda b: b.epsilon_lower,
    )
    practice = max(
        (epsilon_lower_from_scores(s.in_scores, s.out_scores, delta, CONFIDENCE, "naive") for s in sets),
        key=lambda b: b.epsilon_lower,
    )
    best_point, best_rates, needed = 0.0, (math.nan, math.nan), None
    target = None if target_ratio is None else target_ratio * epsilon

    def objective(fp: Any, fn: Any, n_neg: int, n_pos: int, level: float) -> Any:
        return epsilon_from_rates(
            clopper_pearson_upper(fp, n_neg, level), clopper_pearson_upper(fn, n_pos, level), delta
        )

    for s in sets:
        # The threshold is chosen on one half (largest Eq. 5 bound there, ties → largest advantage)
        # and the rates are read on the other: the best threshold's rates on the same trials are
        # biased upward (a tail threshold with one error in a hundred), held-out rates are not.
        _, fp_e, fn_e, n_neg, n_pos, _, _ = select_threshold(
            s.in_scores, s.out_scores, objective, "split", CONFIDENCE, seed=0
        )
        fpr, fnr = fp_e / n_neg, fn_e / n_pos
        point = float(epsilon_from_rates(fpr, fnr, delta))
        point = point if math.isfinite(point) else 0.0
        if point >= best_point:
            best_point, best_rates = point, (fpr, fnr)
        if target is not None:
            n = trials_needed(fpr, fnr, target, delta)
            if n is not None and (needed is None or n < needed):
                needed = n
    return {
        "bonferroni": bonferroni,
        "practice": practice,
        "point": best_point,
        "rates": best_rates,
        "needed": needed,
        "target": target,
        "statistics": len(sets),
    }


def summarise(
    cells: Mapping[tuple[str, float], Mapping[str, Any]],
    pld: Mapping[float, float],
    accuracy: Mapping[tuple[str, float], float],
) -> dict[str, Measured]:
    """The profile's numbers, keyed ``<tm>.eps<ε>.<what>`` (ratios to the target ε)."""
    numbers: dict[str, Measured] = {}
    for (tm, eps), c in cells.items():
        key = f"{tm}.eps{eps:g}"
        b, p = c["bonferroni"], c["practice"]
        numbers[f"{key}.eq5_bonferroni_ratio"] = Measured(
            b.epsilon_lower / eps,
            f"Eq. 5 sweep (Clopper–Pearson), Bonferroni over thresholds and the cell's statistics "
            f"({c['statistics']}), joint 95 %, / target ε",
            "bound",
            level=CONFIDENCE,
            n=TRIALS_PER_WORLD,
            note=f"ε_LB {b.epsilon_lower:.4g} at threshold {b.threshold:.4g}: FP {b.fp}/{b.negatives}, "
            f"FN {b.fn}/{b.positives}; ε_PLD {pld[eps]:.4g}",
        )
        numbers[f"{key}.eq5_paper_practice_ratio"] = Measured(
            p.epsilon_lower / eps,
            "Eq. 5 at the threshold chosen on the same trials (each limit 97.5 %), best statistic, "
            "/ target ε "
            "(overclaims: the choice is not paid for)",
            "estimate",
            n=TRIALS_PER_WORLD,
            note=f"ε {p.epsilon_lower:.4g}: FP {p.fp}/{p.negatives}, FN {p.fn}/{p.positives}",
        )
        numbers[f"{key}.eq4_point_ratio"] = Measured(
            c["point"] / eps,
            "Eq. 4 plug-in on held-out trials (threshold chosen on the other half), best statistic "
            "/ target ε",
            "estimate",
            n=TRIALS_PER_WORLD,
            note=f"FPR {c['rates'][0]:.4g}, FNR {c['rates'][1]:.4g}",
        )
        if c["target"] is not None:
            needed = c["needed"]
            numbers[f"{key}.trials_needed"] = Measured(
                float(needed) if needed is not None else NO_COUNT,
                "trials per world at which Eq. 5 (threshold fixed in advance, limits at 97.5 %) "
                "certifies the paper's ε_LB / ε at the held-out rates this run showed (plug-in)",
                "count",
                n=TRIALS_PER_WORLD,
                note=f"target ε_LB {c['target']:.4g}; {NO_COUNT:g}: the held-out plug-in Eq. 4 value is "
                "below it, so no trial count would",
            )
        if (tm, eps) in accuracy:
            numbers[f"{key}.test_accuracy"] = Measured(
                accuracy[(tm, eps)], "test accuracy (mean over trials)", "rate", n=TRIALS_PER_WORLD
            )
    for eps, value in pld.items():
        numbers[f"eps{eps:g}.epsilon_pld"] = Measured(
            value, "ε_PLD of the trained mechanism (δ = 1e-5)", "estimate"
        )
    return numbers


def run(seed: int) -> ProfileResult:
    """A–D at ε = 2 and 4, 1000 trials per world, training seed ``seed``."""
    import pandas as pd

    from dpaudit import pipeline
    from dpaudit.config import load_params
    from dpaudit.fidelity.profiles.nasr_d import prepared_data
    from dpaudit.pipeline.audits import load_audit
    from dpaudit.scores import read_score_sets

    repo = Path.cwd()
    base = load_params(repo / "params.yaml")
    params = run_params(base, seed)
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="nasr-ad-") as scratch:
        root = Path(scratch)
        prepared_data(base, repo, root)
        for stage in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
            t0 = time.perf_counter()
            stage(params, AUDIT, root=root)
            seconds[stage.__name__] = time.perf_counter() - t0
            print(f"{stage.__name__}: {seconds[stage.__name__] / 60:.1f} min", file=sys.stderr)
        audit, _, _ = load_audit(params, AUDIT, root)
        sets = read_score_sets(audit.scores_path)
        frame = pd.read_csv(audit.plots_dir / "cells.csv")
    cells: dict[tuple[str, float], dict[str, Any]] = {}
    for eps in EPSILONS:
        setting = f"eps{eps:g}"
        for tm in THREAT_MODELS:
            cell_sets = [
                s for s in sets if s.group.get("setting") == setting and s.group.get("threat_model") == tm
            ]
            cells[(tm, eps)] = _cell_numbers(cell_sets, PAPER_RATIOS.get((tm, eps)), eps)
    pld = {float(r["epsilon_target"]): float(r["epsilon_pld"]) for r in frame.to_dict("records")}
    accuracy = {
        (str(r["tm"]), float(r["epsilon_target"])): float(r["test_accuracy"])
        for r in frame.to_dict("records")
    }
    family = {
        (str(r["tm"]), float(r["epsilon_target"])): float(r["epsilon_lower_family"])
        for r in frame.to_dict("records")
    }
    numbers = summarise(cells, pld, accuracy)
    for (tm, eps), value in family.items():
        numbers[f"{tm}.eps{eps:g}.family_ratio"] = Measured(
            value / eps,
            "largest counted mechanism-family ε lower bound of the cell (subsampled Gaussian) / target ε "
            "(assumes the trainer's noise mechanism: beyond the paper)",
            "bound",
            level=CONFIDENCE,
            n=TRIALS_PER_WORLD,
        )
    train_minutes = seconds.get("run_train", 0.0) / 60
    total = sum(seconds.values()) / 60
    trials = TRIALS_PER_WORLD * 2 * len(EPSILONS) * 3  # A, B+C (one set of trials), D
    findings = [
        f"Wall time {total:.1f} min (train {train_minutes:.1f} min) for {trials} trained models: "
        f"{60 * total / trials:.3g} s per trial on this machine.",
    ]
    for eps in EPSILONS:
        parts = ", ".join(
            f"{tm} {numbers[f'{tm}.eps{eps:g}.eq5_bonferroni_ratio'].value:.3g}" for tm in THREAT_MODELS
        )
        points = ", ".join(
            f"{tm} {numbers[f'{tm}.eps{eps:g}.eq4_point_ratio'].value:.3g}" for tm in THREAT_MODELS
        )
        findings.append(f"ε = {eps:g}: Eq. 5 (Bonferroni) ε_LB / ε: {parts}; Eq. 4 plug-in: {points}.")
    for (tm, eps), ratio in PAPER_RATIOS.items():
        if f"{tm}.eps{eps:g}.trials_needed" not in numbers:
            continue
        needed = numbers[f"{tm}.eps{eps:g}.trials_needed"].value
        findings.append(
            f"{tm} at ε = {eps:g}: the paper's {ratio:.3g} of ε "
            + (
                "is out of reach of this attack at any trial count (plug-in below it)."
                if needed == NO_COUNT
                else f"would need about {needed:.0f} trials per world at this run's rates."
            )
        )
    train = base["instantiation"]["train"]
    return ProfileResult(
        profile=PROFILE.name,
        paper="NASR_2021",
        setting=(
            f"adult, threat models A–D, target ε ∈ {{2, 4}} at δ = {train['delta']:g} (RDP-calibrated; ε_PLD "
            f"{', '.join(f'{v:.3g}' for v in pld.values())}), q = {train['sampling_rate']:g}, "
            f"T = {train['steps']}, "
            f"{TRIALS_PER_WORLD} trials per world per cell, training seed {seed}, Crafter 3 as listed "
            "(x from 0, virtual step unclipped)"
        ),
        differs=(
            "the paper audits CIFAR-10 (A) and Purchase (C, D) with its own models; here adult's MLP. "
            "The trial count (1000 per world) and the estimator (Eq. 5) are the paper's; dpaudit holds the "
            "level jointly over thresholds and statistics (Bonferroni), and shows the same-trials choice "
            "beside it"
        ),
        numbers=numbers,
        seed=seed,
        findings=tuple(findings),
    )


PROFILE = Profile(
    name="nasr-ad-paper-trials",
    paper="NASR_2021",
    description="A–D on adult at ε = 2 and 4 with the paper's 1000 trials per world and Eq. 5",
    minutes=12.0,
    run=run,
)
