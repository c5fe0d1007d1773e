"""Attack stage of the instantiation audit: each threat model's distinguisher turns its view into scores.

Nasr et al. 2021 (:data:`dpaudit.references.NASR_2021`): Distinguisher 1 (A, B) scores −ℓ(θ_T; x, y);
Distinguisher 2 (C, D) −max_i ℓ(θ_i; x, y), −mean_i ℓ(θ_i; x, y) and −ℓ(θ_T; x, y) (the bounds stage
takes the best under a weighted Bonferroni split of its confidence, led by the final loss);
Distinguisher 3 (E, F) the likelihood-ratio statistic of the Poisson-subsampled Gaussian on the canary
projections, and the paper's literal test. Higher score = world D′.

For every ε of a run with F, Distinguisher 3 is also simulated on the ideal mechanism (10⁵–10⁶
trials per world, :func:`dpaudit.attacks.gradient_canary.simulate_subsampled_gaussian`) and its
ROC compared with the exact trade-off from dp_accounting's PLD. E, F and the simulation also keep the
per-step moments (Σ d_t, Σ d_t² per trial or per world) of the per-step family bound.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from dpaudit.attacks.gradient_canary import compare_simulation_with_pld, simulate_subsampled_gaussian
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import SIMULATION, epsilon_key, manifest_cells
from dpaudit.experiments.instantiation.design.distinguishers import (
    distinguisher1_scores,
    distinguisher2_statistics,
    distinguisher3,
)
from dpaudit.experiments.instantiation.design.registry import REGISTRY
from dpaudit.io import write_npz
from dpaudit.layout import Audit


def attack(config: InstantiationConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Scores per cell (``<cell>.npz``) and, with a ``simulated`` threat model (F), the simulation per ε
    (``simulation-eps<ε>.npz``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    q, steps = float(manifest.facts["sampling_rate"]), int(manifest.facts["steps"])
    clip = float(manifest.facts["clip_norm"])
    with np.load(audit.losses_path) as lf:
        loss = {k: lf[k] for k in lf.files}
    for cell in manifest_cells(manifest):
        with np.load(audit.train_dir / f"{cell.file}.npz") as f:
            view = {k: f[k] for k in f.files}
        out: dict[str, np.ndarray] = {"inserted": view["inserted"]}
        distinguisher = REGISTRY[cell.threat_model].distinguisher
        if distinguisher == 1:
            out["scores"] = distinguisher1_scores(loss[f"{cell.file}__final_loss"])
        elif distinguisher == 2:
            for name, scores in distinguisher2_statistics(loss[f"{cell.file}__loss_path"]).items():
                out[f"scores_{name}"] = scores
        else:  # Distinguisher 3
            lr, literal = distinguisher3(
                view["dots"], view["canary_size"], sampling_rate=q, noise_std=cell.noise_multiplier * clip,
                clip_norm=clip,
            )  # fmt: skip
            out["scores"], out["scores_literal"], out["canary_size"] = lr, literal, view["canary_size"]
            for key in ("canary_inert", "data_mass_at_canary"):
                if key in view:
                    out[key] = view[key]
            # Per trial Σ_t d_t and Σ_t d_t²: the per-step family bound's sufficient statistics.
            out["step_sum"] = view["dots"].sum(axis=1)
            out["step_sum_squares"] = np.square(view["dots"]).sum(axis=1)
            out["steps_observed"] = np.asarray(view["dots"].shape[1])
        write_npz(out_dir / f"{cell.file}.npz", out)
    if any(REGISTRY[name].simulated for name in manifest.facts["threat_models"]):
        ap = config.attack
        for i, eps in enumerate(manifest.facts["target_epsilons"]):
            key = epsilon_key(eps)
            z = float(manifest.mechanisms[key].noise_multiplier or 0.0)
            t0 = time.perf_counter()
            game = simulate_subsampled_gaussian(
                ap.simulation_trials_per_world, sampling_rate=q, steps=steps, noise_multiplier=z,
                seed=int(manifest.seeds["seed"]) * 100 + i,
            )  # fmt: skip
            s_d, s_dp = game.scores_d, game.scores_dprime
            seconds = time.perf_counter() - t0
            rows = compare_simulation_with_pld(
                s_d, s_dp, list(ap.simulation_fprs), sampling_rate=q, steps=steps, noise_multiplier=z
            )
            write_npz(
                out_dir / f"{SIMULATION}-{key}.npz",
                {
                    "scores_d": s_d.astype(np.float32),
                    "scores_dprime": s_dp.astype(np.float32),
                    "fpr": np.array([r.fpr for r in rows]),
                    "tpr_mc": np.array([r.tpr_mc for r in rows]),
                    "tpr_pld": np.array([r.tpr_pld for r in rows]),
                    "std_error": np.array([r.std_error for r in rows]),
                    "z_score": np.array([r.z_score for r in rows]),
                    "seconds": np.asarray(seconds),
                    "steps_d": np.array([game.steps_d.count, game.steps_d.total, game.steps_d.total_squares]),
                    "steps_dprime": np.array(
                        [game.steps_dprime.count, game.steps_dprime.total, game.steps_dprime.total_squares]
                    ),
                },
            )
