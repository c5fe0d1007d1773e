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
    delta_for,
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
    T = 2 * per_world  # trials per setting: exactly ``per_world`` in each world
    mechanisms: dict[str, Mechanism] = {}
    # One training call per setting, seeded by the setting's own values (setting_seed): its numbers do
    # not depend on which other settings the grid holds.
    for st in grid:
        rows, weights, d_mask, d_prime = neighbour_design(pop, sens, st.neighbours)
        eps, z = noise_multiplier_for(st.rho_beta, delta, k)
        log.info("%s: rho_beta %g, %s, %d trials per world", audit.name, st.rho_beta, st.key, per_world)
        values = (audit.dataset, st.rho_beta, st.sensitivity, st.neighbours)
        seed = setting_seed(tp.seed, "identifiability", *values)
        world = draw_worlds([seed, 17], T, balanced=True)
        mask = world_masks(world, d_mask, d_prime)
        cfg = dpsgd.DPSGDConfig(
            clip_norm=tp.clip_norm,
            noise_multiplier=np.full(T, z),
            learning_rate=learning_rate,
            steps=k,
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


def _train_candidates(
    config: IdentifiabilityConfig,
    audit: Audit,
    model: models.Model,
    pop: Population,
    sens: SensitivityResult,
    delta: float,
    out_dir: Path,
) -> Mechanism | None:
    """Bernau Fig. 4: LS_i over training on D for the top/bottom dataset-sensitivity candidates.

    All candidates run in one call: trial t tracks its own candidate through per-trial difference
    weights, with local-sensitivity noise at ``reference_rho_beta``.
    """
    tp = config.train
    if tp.candidate_trials == 0:
        return None
    cands: list[tuple[str, str, int, tuple[int, ...]]] = []
    for end in ("top", "bottom"):
        for rank, c in enumerate(getattr(sens.unbounded, end), start=1):
            cands.append(("unbounded", end, rank, (c.index,)))
        for rank, p in enumerate(getattr(sens.bounded, end), start=1):
            cands.append(("bounded", end, rank, (p.index, p.replacement_index)))
    cands = [c for c in cands if all(g in pop.rows for g in c[3])]
    if not cands:
        return None
    tracked_globals = sorted({g for c in cands for g in c[3]})
    col = {g: i for i, g in enumerate(tracked_globals)}
    per = tp.candidate_trials
    weights = np.zeros((len(cands) * per, len(tracked_globals)), np.float32)
    for ci, (_, _, _, idx) in enumerate(cands):
        weights[ci * per : (ci + 1) * per, col[idx[0]]] = 1.0
        if len(idx) == 2:
            weights[ci * per : (ci + 1) * per, col[idx[1]]] = -1.0
    mask = np.zeros((len(weights), len(pop.X)), bool)
    mask[:, : pop.n] = True
    _, z = noise_multiplier_for(tp.reference_rho_beta, delta, tp.epochs)
    cfg = dpsgd.DPSGDConfig(
        clip_norm=tp.clip_norm,
        noise_multiplier=z,
        learning_rate=config.learning_rate_for(audit.dataset),
        steps=tp.epochs,
        noise_scale="local",
        normalizer=float(pop.n),
    )
    res = run_trials(
        model,
        pop.X,
        pop.y,
        mask,
        cfg,
        seed=setting_seed(tp.seed, "identifiability", audit.dataset, "candidates"),
        tracked=dpsgd.TrackedRecords(tuple(pop.rows[g] for g in tracked_globals), weights),
        observers={"di": di_observer()},
        chunk_size=tp.chunk_size,
        desc=f"train {audit.name} candidates",
    )
    write_npz(
        out_dir / CANDIDATES_FILE,
        {
            "ls": np.sqrt(res.records["di.dd"]),
            "neighbours": np.repeat([c[0] for c in cands], per),
            "end": np.repeat([c[1] for c in cands], per),
            "rank": np.repeat([c[2] for c in cands], per),
            "index": np.repeat([c[3][0] for c in cands], per),
        },
    )
    return Mechanism.dpsgd(z, 1.0, tp.epochs, tp.clip_norm)
