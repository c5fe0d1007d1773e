"""Train stage of the instantiation audit: every threat model × target ε, all trials of a cell at once.

For each target ε the noise multiplier z is calibrated for the fixed q and T (RDP by default, as
Nasr et al. 2021 §V, :data:`dpaudit.references.NASR_2021`). Crafter 2's poison (shared by B, C and
D's query) is crafted once per ε from freshly trained shadow models. Each cell writes the view of its
threat model (``<tm>-eps<ε>.npz`` with ``inserted``, losses or projections, test accuracy) and its
wall-clock time; the manifest records one DP-SGD mechanism per ε.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.data.worlds import setting_seed
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.instantiation.config import MIN_POOL_ROWS, InstantiationConfig
from dpaudit.experiments.instantiation.design import cell_file, epsilon_key
from dpaudit.experiments.instantiation.design.registry import REGISTRY, THREAT_MODELS, Play
from dpaudit.io import write_json, write_npz
from dpaudit.layout import Audit
from dpaudit.training.accounting import calibrate_noise_multiplier
from dpaudit.training.modelling import build_model

if TYPE_CHECKING:
    from dpaudit.experiments.instantiation.design.game import Game

log = logging.getLogger(__name__)

#: Evaluation rows used for test accuracy (bounded so that 10⁴ trials stay cheap).
MAX_EVAL_ROWS = 1000
POISON_FILE = "poison-{key}.npz"


def resize_train_set(
    train_idx: np.ndarray, pool_idx: np.ndarray, size: int | None, seed: list[int], where: str
) -> tuple[np.ndarray, np.ndarray]:
    """D and the pool for an audit-specific |D| = ``size`` (None: as prepared).

    Shrinking keeps D's first rows (D is already a random draw) and returns the rest to the pool;
    growing adds pool rows drawn with ``seed``. D and the pool stay disjoint; ``where`` names the key.
    """
    if size is None or size == len(train_idx):
        return train_idx, pool_idx
    if size < len(train_idx):
        return train_idx[:size], np.concatenate([pool_idx, train_idx[size:]])
    most = len(train_idx) + len(pool_idx) - MIN_POOL_ROWS
    if size > most:
        raise ValueError(
            f"{where} = {size}: the prepared data has |D| = {len(train_idx)} and {len(pool_idx)} pool rows, "
            f"so at most {most} ({MIN_POOL_ROWS} pool rows must remain for fresh records and shadow models)"
        )
    order = np.random.default_rng(seed).permutation(len(pool_idx))
    extra = size - len(train_idx)
    return np.concatenate([train_idx, pool_idx[order[:extra]]]), pool_idx[np.sort(order[extra:])]


def build_game(config: InstantiationConfig, audit: Audit) -> Game:
    """The shared :class:`~.design.game.Game` of a dataset: model, D, pool, eval rows, range."""
    from dpaudit.experiments.instantiation.design.game import Game

    prepared = PreparedData.load(audit.prepared_path)
    settings = config.dataset(audit.dataset)
    model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, settings.hidden)
    X = prepared.X.astype(np.float32)
    lo, hi = X.min(axis=0), X.max(axis=0)
    ev = prepared.eval_idx[:MAX_EVAL_ROWS]
    tp = config.train
    train_idx, pool_idx = resize_train_set(
        prepared.train_idx, prepared.pool_idx, settings.train_size, [tp.seed, 4],
        where=f"instantiation.datasets.{audit.dataset}.train_size",
    )  # fmt: skip
    return Game(
        model=model,
        X_d=X[train_idx],
        y_d=prepared.y[train_idx],
        X_pool=X[pool_idx],
        y_pool=prepared.y[pool_idx],
        X_eval=X[ev],
        y_eval=prepared.y[ev],
        lo=lo,
        hi=hi,
        sampling_rate=tp.sampling_rate,
        steps=tp.steps,
        clip_norm=tp.clip_norm,
        learning_rate=settings.learning_rate,
        chunk_size=tp.chunk_size,
    )


def cell_seed(seed: int, dataset: str, cell: str, epsilon: float) -> int:
    """A cell's seed from its own values (dataset, threat model or step, target ε), not from grid
    positions: the same cell of two datasets draws independent noise."""
    return setting_seed(seed, "instantiation", dataset, cell, float(epsilon))


def train(config: InstantiationConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """Play every cell; write per-cell views, the poisons and the timings; return the manifest."""
    from dpaudit.experiments.instantiation.design.crafters.poison import (
        craft_static_poison,
        train_shadow_models,
    )

    started = time.perf_counter()
    tp = config.train
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    game = build_game(config, audit)
    mechanisms: dict[str, Mechanism] = {}
    timings: dict[str, float] = {}
    trials: dict[str, int] = {}
    for eps in tp.target_epsilons:
        z = calibrate_noise_multiplier(eps, tp.delta, tp.sampling_rate, tp.steps, tp.calibration_accountant)
        key = epsilon_key(eps)
        mechanisms[key] = Mechanism.dpsgd(z, tp.sampling_rate, tp.steps, tp.clip_norm)
        poison: tuple[np.ndarray, int] | None = None
        if any(REGISTRY[name].uses_poison for name in tp.threat_models):
            t0 = time.perf_counter()
            shadow_seed = cell_seed(tp.seed, audit.dataset, "shadows", eps)
            shadows, unused = train_shadow_models(game, z, tp.shadow_models, shadow_seed)
            start_seed = cell_seed(tp.seed, audit.dataset, "poison-start", eps)
            start = int(np.random.default_rng([start_seed]).choice(unused))
            x0, y0 = game.X_pool[start], int(game.y_pool[start])
            x, history = craft_static_poison(
                game.model, shadows, x0, y0, game.lo, game.hi, tp.craft_steps, tp.craft_step_size
            )
            poison = (x, y0)
            write_npz(out_dir / POISON_FILE.format(key=key), {"x0": x0, "x": x, "y": y0, "history": history})
            timings[f"crafter2-{key}"] = time.perf_counter() - t0
        played: set[str] = set()
        for name in tp.threat_models:
            tm = REGISTRY[name]
            # Threat models that share their trials (C sees every θ_i of B's trials, B only θ_T) play
            # them once, with one seed, and each writes that view.
            if tm.trials_key in played:
                continue
            played.add(tm.trials_key)
            seed = cell_seed(tp.seed, audit.dataset, tm.trials_key, eps)
            t0 = time.perf_counter()
            view = tm.play(Play(game, z, seed, tp, poison))
            seconds = time.perf_counter() - t0
            for f in (t.key for t in THREAT_MODELS if t.trials_key == tm.trials_key):
                if f in tp.threat_models:
                    write_npz(out_dir / f"{cell_file(f, eps)}.npz", view)
                    timings[cell_file(f, eps)] = seconds
                    trials[cell_file(f, eps)] = len(view["inserted"])
            log.info("%s %s ε=%g: %d trials in %.1fs", audit.name, name, eps, len(view["inserted"]), seconds)
    write_json(out_dir / "timings.json", {"seconds": timings, "trials": trials})
    return TrainManifest(
        experiment="instantiation",
        dataset=audit.dataset,
        delta=tp.delta,
        sizes={
            "trials_per_world": tp.trials_per_world,
            "malicious_trials_per_world": tp.malicious_trials_per_world,
            "dataset": len(game.X_d),
            "shadow_models": tp.shadow_models,
        },
        seeds={"seed": tp.seed},
        mechanisms=mechanisms,
        facts={
            "threat_models": list(tp.threat_models),
            "target_epsilons": list(tp.target_epsilons),
            "sampling_rate": tp.sampling_rate,
            "steps": tp.steps,
            "clip_norm": tp.clip_norm,
            "warmup_steps": tp.warmup_steps,
            "canary_sizes": list(tp.canary_sizes),
            "malicious_canary_size": tp.malicious_canary_size,
            "calibration_accountant": tp.calibration_accountant,
            "adaptive_start": tp.adaptive_start,  # D's Crafter 3: x's start, whether the virtual step clips
            "adaptive_virtual_clip": tp.adaptive_virtual_clip,
            "learning_rate": game.learning_rate,
            "hidden": None
            if config.dataset(audit.dataset).hidden is None
            else list(config.dataset(audit.dataset).hidden),  # fmt: skip
            "cell_seconds": timings,
            "cell_trials": trials,
        },
        seconds=round(time.perf_counter() - started, 3),
    )
