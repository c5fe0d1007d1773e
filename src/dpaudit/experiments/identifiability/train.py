"""Train stage of the identifiability audit: full-batch DP-SGD on D or D′ (Bernau et al. §5–6).

Each setting trains exactly ``trials`` models on D and ``trials`` on D′ (balanced worlds in a seeded
random order, :func:`dpaudit.data.worlds.draw_worlds`), so that the scores auditor counts each
world's error rate over a fixed number of trials. Each trial trains full-batch DP-SGD for k epochs with
σ_i = z·Δf_i, where Δf_i is C (unbounded) or 2C (bounded) for global sensitivity, or the local
sensitivity LS_i of the step (Eqs. 19, 21). The adversary's per-step quantities are recorded by
:func:`dpaudit.training.dpsgd.difference.di_observer` during training. The update divides the noisy
sum by |D| in both worlds, so the scale of an update does not itself reveal whether D or D′ was used.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.data.worlds import Population, draw_worlds, setting_seed, world_masks
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import (
    CANDIDATES_FILE,
    POPULATION_FILE,
    FigCandidate,
    Setting,
    delta_for,
    fig4_candidates,
    neighbour_design,
    noise_multiplier_for,
    sensitivity_population,
    settings,
)
from dpaudit.io import write_json, write_npz
from dpaudit.layout import Audit
from dpaudit.sensitivity.search import SensitivityResult
from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd.difference import di_observer
from dpaudit.training.modelling import build_model
from dpaudit.training.shards import run_trials

log = logging.getLogger(__name__)


def train(config: IdentifiabilityConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """Train ``trials`` models per world (2·trials) per grid setting and the Fig. 4 candidate runs."""
    started = time.perf_counter()
    tp = config.train
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = PreparedData.load(audit.prepared_path)
    sens = SensitivityResult.load(audit.sensitivity_path)
    pop = sensitivity_population(prepared, sens)
    hidden = list(config.dataset(prepared.name).hidden)
    choice = config.dataset(prepared.name).model
    model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, hidden, choice,
                        where=f"identifiability.datasets.{prepared.name}.model")
    learning_rate = config.learning_rate_for(prepared.name)
    delta = delta_for(tp, pop.n)
    k = tp.epochs
    grid = settings(tp)
    per_world = config.trials_for(prepared.name)
    T = 2 * per_world  # trials per setting: exactly ``per_world`` in each world (setting_runs)
    mechanisms: dict[str, Mechanism] = {}
    # One training call per setting, seeded by the setting's own values (setting_seed): its numbers do
    # not depend on which other settings the grid holds.
    for st in grid:
        eps, z = noise_multiplier_for(st.rho_beta, delta, k)
        log.info("%s: rho_beta %g, %s, %d trials per world", audit.name, st.rho_beta, st.key, per_world)
        values = (audit.dataset, st.rho_beta, st.sensitivity, st.neighbours)
        seed = setting_seed(tp.seed, "identifiability", *values)
        world, mask, rows, res = setting_runs(
            model,
            pop,
            sens,
            st,
            z,
            per_world,
            clip_norm=tp.clip_norm,
            learning_rate=learning_rate,
            epochs=k,
            seed=seed,
            chunk_size=tp.chunk_size,
            desc=f"train {audit.name} rho_beta {st.rho_beta:g} {st.key}",
        )
        arrays: dict[str, Any] = {
            "world": world.astype(np.int8),
            "dot": res.records["di.dot"],
            "dd": res.records["di.dd"],
            "sigma": res.records["di.sigma"],
            "epsilon": eps,
            "noise_multiplier": z,
            "delta": delta,
            "tracked_rows": np.asarray(rows),
            "member_mask": mask,
        }
        arrays.update({f"param_{i}": p for i, p in enumerate(res.params)})
        write_npz(out_dir / f"{st.file}.npz", arrays)
        mechanisms[st.file] = Mechanism.dpsgd(z, 1.0, k, tp.clip_norm)
    candidates = _train_candidates(config, audit, model, pop, sens, delta, out_dir)
    if candidates is not None:
        mechanisms["candidates"] = candidates
    write_json(
        out_dir / POPULATION_FILE,
        {
            "n": pop.n,
            "rows": {str(g): r for g, r in pop.rows.items()},
            "dataset": prepared.name,
            "measure": sens.measure,
        },
    )
    return TrainManifest(
        experiment="identifiability",
        dataset=audit.dataset,
        delta=delta,
        sizes={
            "D": pop.n,
            "population": len(pop.X),
            "trials": T,
            "trials_per_world": per_world,
            "candidate_trials": tp.candidate_trials,
        },
        seeds={"seed": tp.seed},
        mechanisms=mechanisms,
        facts={
            "settings": [st.to_json() for st in grid],
            "epochs": k,
            "clip_norm": tp.clip_norm,
            "learning_rate": learning_rate,
            "reference_rho_beta": tp.reference_rho_beta,
            "hidden": hidden,
            "model": None if choice is None else asdict(choice),
            "measure": sens.measure,
        },
        seconds=round(time.perf_counter() - started, 3),
    )


def setting_runs(
    model: models.Model,
    pop: Population,
    sens: SensitivityResult,
    st: Setting,
    noise_multiplier: float,
    per_world: int,
    *,
    clip_norm: float,
    learning_rate: float,
    epochs: int,
    seed: int,
    chunk_size: int | None = None,
    desc: str = "train",
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...], dpsgd.TrainResult]:
    """One grid setting's 2·``per_world`` trials, balanced over D and D′ (worlds drawn from ``seed``).

    Returns the worlds (1 = D), the member masks, the tracked rows (x̂[, x̂′]) and the training result,
    whose records ``di.dot``, ``di.dd`` and ``di.sigma`` are A_DI,Gau's per-step observations.
    """
    T = 2 * per_world
    rows, weights, d_mask, d_prime = neighbour_design(pop, sens, st.neighbours)
    world = draw_worlds([seed, 17], T, balanced=True)
    mask = world_masks(world, d_mask, d_prime)
    cfg = dpsgd.DPSGDConfig(
        clip_norm=clip_norm,
        noise_multiplier=np.full(T, noise_multiplier),
        learning_rate=learning_rate,
        steps=epochs,
        noise_scale="local" if st.sensitivity == "local" else "global",
        sensitivity_factor=2.0 if st.neighbours == "bounded" else 1.0,
        normalizer=float(pop.n),
    )
    res = run_trials(
        model,
        pop.X,
        pop.y,
        mask,
        cfg,
        seed=seed,
        tracked=dpsgd.TrackedRecords(rows, weights),
        observers={"di": di_observer()},
        chunk_size=chunk_size,
        desc=desc,
    )
    return world, mask, rows, res


def _train_candidates(
    config: IdentifiabilityConfig,
    audit: Audit,
    model: models.Model,
    pop: Population,
    sens: SensitivityResult,
    delta: float,
    out_dir: Path,
) -> Mechanism | None:
    """Bernau Fig. 4: LS_i over training on D for the top/bottom dataset-sensitivity candidates."""
    tp = config.train
    if tp.candidate_trials == 0:
        return None
    _, z = noise_multiplier_for(tp.reference_rho_beta, delta, tp.epochs)
    arrays = candidate_runs(
        model,
        pop,
        fig4_candidates(sens),
        tp.candidate_trials,
        z,
        clip_norm=tp.clip_norm,
        learning_rate=config.learning_rate_for(audit.dataset),
        epochs=tp.epochs,
        seed=setting_seed(tp.seed, "identifiability", audit.dataset, "candidates"),
        chunk_size=tp.chunk_size,
        desc=f"train {audit.name} candidates",
    )
    if arrays is None:
        return None
    write_npz(out_dir / CANDIDATES_FILE, arrays)
    return Mechanism.dpsgd(z, 1.0, tp.epochs, tp.clip_norm)


def candidate_runs(
    model: models.Model,
    pop: Population,
    candidates: list[FigCandidate],
    trials: int,
    noise_multiplier: float,
    *,
    clip_norm: float,
    learning_rate: float,
    epochs: int,
    seed: int,
    chunk_size: int | None = None,
    desc: str = "candidates",
) -> dict[str, np.ndarray] | None:
    """``trials`` full-batch DP-SGD runs on D per candidate, recording LS_i per step (Bernau Fig. 4).

    All candidates run in one call: trial t tracks its own candidate through per-trial difference
    weights (μ_D − μ_D′), with local-sensitivity noise of multiplier ``noise_multiplier``. Returns the
    arrays of the candidates file (``ls`` [trials·candidates, epochs] and per-trial labels), or None
    when no candidate's records are in the population.
    """
    cands = [c for c in candidates if all(g in pop.rows for g in c.records)]
    if not cands or trials < 1:
        return None
    tracked_globals = sorted({g for c in cands for g in c.records})
    col = {g: i for i, g in enumerate(tracked_globals)}
    per = trials
    weights = np.zeros((len(cands) * per, len(tracked_globals)), np.float32)
    for ci, c in enumerate(cands):
        weights[ci * per : (ci + 1) * per, col[c.records[0]]] = 1.0
        if len(c.records) == 2:
            weights[ci * per : (ci + 1) * per, col[c.records[1]]] = -1.0
    mask = np.zeros((len(weights), len(pop.X)), bool)
    mask[:, : pop.n] = True
    cfg = dpsgd.DPSGDConfig(
        clip_norm=clip_norm,
        noise_multiplier=noise_multiplier,
        learning_rate=learning_rate,
        steps=epochs,
        noise_scale="local",
        normalizer=float(pop.n),
    )
    res = run_trials(
        model,
        pop.X,
        pop.y,
        mask,
        cfg,
        seed=seed,
        tracked=dpsgd.TrackedRecords(tuple(pop.rows[g] for g in tracked_globals), weights),
        observers={"di": di_observer()},
        chunk_size=chunk_size,
        desc=desc,
    )
    return {
        "ls": np.sqrt(res.records["di.dd"]),
        "neighbours": np.repeat([c.neighbours for c in cands], per),
        "end": np.repeat([c.end for c in cands], per),
        "rank": np.repeat([c.rank for c in cands], per),
        "index": np.repeat([c.records[0] for c in cands], per),
    }
