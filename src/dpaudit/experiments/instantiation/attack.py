"""Attack stage of the instantiation audit: each threat model's distinguisher turns its view into score sets.

Nasr et al. 2021 (:data:`dpaudit.references.NASR_2021`): Distinguisher 1 (A, B) scores −ℓ(θ_T; x, y);
Distinguisher 2 (C, D) −max_i ℓ(θ_i; x, y), −mean_i ℓ(θ_i; x, y) and −ℓ(θ_T; x, y), one score set each;
Distinguisher 3 (E, F) the likelihood-ratio statistic of the Poisson-subsampled Gaussian on the canary
projections, one set per canary size 2n with the paper's literal test as array ``literal``. Higher
score = world D′ (``member``: the record or canary was inserted). Every cell's sets carry the group
``setting`` (ε) / ``threat_model`` / ``attack`` (and ``canary_type`` = 2n), the estimator
``threshold_family`` and the declared mechanism.

Distinguisher 3 also writes the per-step family bound's sets (estimator ``stepwise_family``): per trial
Σ_t d_t and Σ_t d_t² over the observed steps. A frozen model (F) pools every trial, its baseline known
to be 0 where the canary's coordinates carry no data mass; a training model (E) writes the set over
every trial with ``assumes = "none"`` (the data's gradients answer the canary in world D′ only, so the
family law is not guaranteed there) and, where some canaries sit on inert coordinates, the set of those
trials with baseline 0.

For every ε of a run with a ``simulated`` threat model, Distinguisher 3 is also simulated on the ideal
mechanism (10⁵–10⁶ trials per world, :func:`dpaudit.attacks.gradient_canary.simulate_subsampled_gaussian`),
its ROC compared with the exact trade-off from dp_accounting's PLD (params), and written as a set of
``attack = simulation`` that is evidence about the ideal mechanism, never counted in a headline.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.attacks.gradient_canary import compare_simulation_with_pld, simulate_subsampled_gaussian
from dpaudit.experiments.base import TrainManifest, event_to_json
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import SIMULATION, Cell, epsilon_key, manifest_cells
from dpaudit.experiments.instantiation.design.distinguishers import (
    distinguisher1_scores,
    distinguisher2_statistics,
    distinguisher3,
)
from dpaudit.experiments.instantiation.design.registry import REGISTRY
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.scores import ScoreSet, write_score_sets
from dpaudit.table import fpr_tag

FAMILY = "subsampled-gaussian"


def cell_sets(
    cell: Cell,
    view: dict[str, np.ndarray],
    loss: dict[str, np.ndarray],
    *,
    sampling_rate: float,
    steps: int,
    clip_norm: float,
    delta: float,
    seed: int,
    mechanism: dict[str, Any] | None = None,
) -> list[ScoreSet]:
    """The score sets of one cell (see the module docstring); ``mechanism``: its DpEvent as JSON."""
    q, clip = sampling_rate, clip_norm
    member = view["inserted"] == 1
    group = {"setting": cell.setting, "threat_model": cell.threat_model}
    params = {"delta": float(delta), "sampling_rate": q, "steps": steps, "seed": int(seed)}

    def one(
        attack: str,
        scores: np.ndarray,
        rows: np.ndarray,
        estimator: str = "threshold_family",
        assumes: str = FAMILY,
        extra_group: dict[str, str] | None = None,
        extra_params: dict[str, float] | None = None,
        arrays: dict[str, np.ndarray] | None = None,
    ) -> ScoreSet:
        return ScoreSet(
            {**group, **(extra_group or {}), "attack": attack},
            scores[rows],
            member[rows],
            (estimator,),
            assumes,
            mechanism,
            {**params, **(extra_params or {})},
            {k: v[rows] for k, v in (arrays or {}).items()},
        )

    every = np.ones(member.size, dtype=bool)
    distinguisher = REGISTRY[cell.threat_model].distinguisher
    if distinguisher == 1:
        return [one("final_loss", distinguisher1_scores(loss[f"{cell.file}__final_loss"]), every)]
    if distinguisher == 2:
        stats = distinguisher2_statistics(loss[f"{cell.file}__loss_path"])
        return [one(f"{name}_loss", scores, every) for name, scores in stats.items()]
    lr, literal = distinguisher3(
        view["dots"],
        view["canary_size"],
        sampling_rate=q,
        noise_std=cell.noise_multiplier * clip,
        clip_norm=clip,
    )
    observed = int(view["dots"].shape[1])  # E: the T − t_o canary steps after warm-up
    sizes = view["canary_size"]
    sets = [
        one("likelihood_ratio", lr, sizes == size, extra_group={"canary_type": f"2n{int(size)}"},
            extra_params={"steps": observed}, arrays={"literal": literal})
        for size in np.unique(sizes)
    ]  # fmt: skip
    # Σ_t d_t and Σ_t d_t² per trial: the per-step family bound's sufficient statistics. Every size's
    # projections follow the same family, so the bound pools them all, decided before the data.
    moments = {"step_sum": view["dots"].sum(axis=1), "step_sum_squares": np.square(view["dots"]).sum(axis=1)}

    def stepwise(attack: str, rows: np.ndarray, known_baseline: bool, assumes: str = FAMILY) -> ScoreSet:
        extra = {"steps": observed, "known_baseline": int(known_baseline)}
        return one(attack, lr, rows, "stepwise_family", assumes, extra_params=extra, arrays=moments)

    if REGISTRY[cell.threat_model].frozen_model:
        zero_mass = float(view.get("data_mass_at_canary", np.nan)) == 0.0
        return [*sets, stepwise("stepwise", every, zero_mass)]
    sets.append(stepwise("stepwise_all", every, False, assumes="none"))
    inert = view.get("canary_inert", np.zeros(member.size, dtype=bool)).astype(bool)
    if np.any(inert & member) and np.any(inert & ~member):
        sets.append(stepwise("stepwise_inert", inert, True))
    return sets


def simulation_set(config: InstantiationConfig, manifest: TrainManifest, i: int, eps: float) -> ScoreSet:
    """Distinguisher 3 on the ideal subsampled Gaussian of one ε, with its agreement with the PLD."""
    ap = config.attack
    q, steps = float(manifest.facts["sampling_rate"]), int(manifest.facts["steps"])
    key = epsilon_key(eps)
    z = float(manifest.mechanisms[key].noise_multiplier or 0.0)
    t0 = time.perf_counter()
    game = simulate_subsampled_gaussian(
        ap.simulation_trials_per_world, sampling_rate=q, steps=steps, noise_multiplier=z,
        seed=int(manifest.seeds["seed"]) * 100 + i,
    )  # fmt: skip
    s_d, s_dp = game.scores_d.astype(np.float32), game.scores_dprime.astype(np.float32)
    seconds = time.perf_counter() - t0
    rows = compare_simulation_with_pld(
        s_d, s_dp, list(ap.simulation_fprs), sampling_rate=q, steps=steps, noise_multiplier=z
    )
    params: dict[str, float | str] = {
        "delta": float(manifest.delta), "sampling_rate": q, "steps": steps,
        "seed": int(manifest.seeds["seed"]) + i, "known_baseline": 1, "seconds": seconds,
        "pld_max_abs_z": float(max(abs(r.z_score) for r in rows)),
    }  # fmt: skip
    for r in rows:
        params[f"tpr_mc_at_fpr_{fpr_tag(r.fpr)}"] = float(r.tpr_mc)
        params[f"tpr_pld_at_fpr_{fpr_tag(r.fpr)}"] = float(r.tpr_pld)
    for world, m in (("in", game.steps_dprime), ("out", game.steps_d)):
        params.update(
            {f"{world}_count": m.count, f"{world}_total": m.total, f"{world}_total_squares": m.total_squares}
        )
    simulated = next(k for k in manifest.facts["threat_models"] if REGISTRY[k].simulated)
    return ScoreSet(
        {"setting": key, "threat_model": simulated, "attack": SIMULATION},
        np.concatenate([s_dp, s_d]).astype(np.float64),
        np.arange(s_dp.size + s_d.size) < s_dp.size,
        ("threshold_family", "stepwise_family"),
        FAMILY,
        event_to_json(manifest.mechanisms[key].dp_event()),
        params,
        registered=(),  # evidence that the family is what the audit assumes, not a claim
    )


def attack(config: InstantiationConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Every cell's score sets and, with a ``simulated`` threat model, the simulation's per ε, in
    ``out_dir`` (the stage moves it to ``audit.attack_dir``) as ``audit.scores_path``."""
    with open_npz(audit.losses_path) as lf:
        loss = {k: lf[k] for k in lf.files}
    sets: list[ScoreSet] = []
    for cell in manifest_cells(manifest):
        with open_npz(audit.train_dir / f"{cell.file}.npz") as f:
            view = {k: f[k] for k in f.files}
        sets.extend(
            cell_sets(
                cell, view, loss, sampling_rate=float(manifest.facts["sampling_rate"]),
                steps=int(manifest.facts["steps"]), clip_norm=float(manifest.facts["clip_norm"]),
                delta=manifest.delta, seed=int(manifest.seeds["seed"]),
                mechanism=event_to_json(manifest.mechanisms[cell.setting].dp_event()),
            )
        )  # fmt: skip
    if any(REGISTRY[name].simulated for name in manifest.facts["threat_models"]):
        for i, eps in enumerate(manifest.facts["target_epsilons"]):
            sets.append(simulation_set(config, manifest, i, float(eps)))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_score_sets(out_dir / audit.scores_path.name, sets)
