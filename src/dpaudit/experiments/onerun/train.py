"""Train stage of the one-run audit: ONE DP-SGD run of dpaudit's trainer with m canaries
(Steinke, Nasr & Jagielski 2023, :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`).

The declared configuration (z, or the claimed ε that z is calibrated for; q, T, C, δ) is what the
manifest records as the mechanism. ``break`` changes what is trained, never the claim: ``noise_div10``
trains with z/10; ``unclipped_layer`` leaves the first dense layer (where the gradient canaries live)
out of the canaries' clip step, so a canary of raw norm ``canary_norm``·C enters unclipped.

- **Gradient canaries** (white box): canary k is the gradient ``canary_norm``·C·e_{c_k} on its own
  inert coordinate c_k (:mod:`.design`), clipped per example like a record. With full batch (q = 1)
  the clipped sum of the included canaries is the trainer's injected gradient, added before the noise
  at every step (:class:`dpaudit.training.dpsgd.InjectedGradient`). With Poisson sampling each canary
  must join each step's batch by its own Bernoulli(q) draw, while the trainer's injection hook draws
  one Bernoulli(q) per step for its whole injected gradient. On inert coordinates the trainer's update
  is its noise alone (no record's gradient is non-zero there and the coordinate never reaches the
  forward pass), so the canaries' part of θ_T, −(η/B)·Σ_t b_{k,t}·clip(g_k), is added after training
  by linearity, from Binomial(T, q) step counts: the parameters the trainer would compute with
  per-canary draws (at q = 1 the two paths agree, tests/experiments/test_onerun.py).
- **Input canaries** (black box): m pool records with a wrong label, each added to D with probability ½.

Every draw (inclusion, placement, step counts, the trainer's noise and initialisation) comes from
:func:`.design.setting_seed` of the setting's values other than ``break``, so a broken run and the
correct run of the same setting share canaries and noise: the difference is the break alone.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.onerun.config import BREAK_KEY, OneRunConfig, TrainParams
from dpaudit.experiments.onerun.design import (
    RUN_FILE,
    canary_coordinates,
    clip_canaries,
    padding_for,
    setting_seed,
)
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.training.accounting import calibrate_noise_multiplier, compute_epsilon

log = logging.getLogger(__name__)

#: Index of the parameter tensor that holds the gradient canaries: the first dense kernel.
CANARY_LAYER = 0


def seed_values(tp: TrainParams, dataset: str) -> dict[str, Any]:
    """The values the setting's seed hashes: the whole ``train`` section except ``break`` (so the
    broken and the correct run are paired), and the dataset."""
    values = {k: v for k, v in asdict(tp).items() if k != "break_"}
    values["dataset"] = dataset
    return values


def declared_noise(tp: TrainParams) -> tuple[float, float]:
    """(z, claimed ε): z as declared or calibrated for ``epsilon`` under ``calibration_accountant``,
    and that accountant's ε of (z, q, T) at δ — the claim the audit tests."""
    z = tp.noise_multiplier
    if z is None:
        assert tp.epsilon is not None
        z = calibrate_noise_multiplier(
            tp.epsilon, tp.delta, tp.sampling_rate, tp.steps, tp.calibration_accountant
        )
    claimed = compute_epsilon(z, tp.sampling_rate, tp.steps, tp.delta, tp.calibration_accountant)
    return float(z), float(claimed)


def run_gradient_canaries(
    model: Any,
    X: np.ndarray,
    y: np.ndarray,
    cfg: Any,
    coordinates: np.ndarray,
    entered: np.ndarray,
    included: np.ndarray,
    seed: int,
    *,
    linear: bool | None = None,
    desc: str = "train onerun",
) -> tuple[np.ndarray, np.ndarray]:
    """ONE trainer run on all of (X, y) with Dirac gradient canaries; returns θ_T flat (float64) and
    the number of steps each canary entered.

    Canary k adds ``entered[k]`` (its clipped size) at the first dense kernel's flat coordinate
    ``coordinates[k]`` to the clipped sum, before the noise, where ``included[k]``. ``linear`` False
    (full batch only): through the trainer's injected gradient at every step. ``linear`` True: trained
    without canaries, then −(η/B)·Σ_t b_{k,t}·entered[k] added at each coordinate, b_{k,t} ~
    Bernoulli(q) per canary and step (Binomial(T, q) counts from ``seed``); exact on inert coordinates
    (the module docstring). Default: the trainer at q = 1, linearity below.
    """
    from dpaudit.training import dpsgd

    q, steps = cfg.sampling_rate, cfg.steps
    linear = q < 1.0 if linear is None else linear
    if not linear and q < 1.0:
        raise ValueError("the trainer injects all canaries with one draw per step: use linear=True for q < 1")
    mask = np.ones((1, len(X)), bool)
    if linear:
        result = dpsgd.train_trials(model, X, y, mask, cfg, seed=seed, desc=desc)
        counts = np.random.default_rng([seed, 3]).binomial(steps, q, len(coordinates)) if q < 1 else steps
        steps_in = np.where(included, counts, 0)
        flat = np.concatenate([p[0].ravel() for p in result.params]).astype(np.float64)
        normalizer = cfg.normalizer if cfg.normalizer is not None else max(q * len(X), 1.0)
        flat[coordinates] -= cfg.learning_rate / normalizer * steps_in * entered
        return flat, steps_in
    kernel = np.zeros(int(np.prod(model.param_shapes[CANARY_LAYER])), np.float32)
    kernel[coordinates[included]] = entered[included]
    grads = [np.zeros(s, np.float32) for s in model.param_shapes]
    grads[CANARY_LAYER] = kernel.reshape(model.param_shapes[CANARY_LAYER])
    injected = dpsgd.InjectedGradient(grads=grads, weights=np.ones(1, np.float32))
    result = dpsgd.train_trials(model, X, y, mask, cfg, seed=seed, injected=injected, desc=desc)
    flat = np.concatenate([p[0].ravel() for p in result.params]).astype(np.float64)
    return flat, np.where(included, steps, 0)


def train(config: OneRunConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """One training run with m canaries; writes :data:`.design.RUN_FILE` and returns the manifest."""
    from dpaudit.training import dpsgd, models

    started = time.perf_counter()
    tp = config.train
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = PreparedData.load(audit.prepared_path)
    settings = config.dataset(prepared.name)
    X = prepared.X.reshape(len(prepared.X), -1).astype(np.float32)  # the audit's MLP sees flat features
    X_d, y_d = X[prepared.train_idx], prepared.y[prepared.train_idx].astype(np.int64)
    n, m = len(X_d), tp.canaries
    seed = setting_seed(seed_values(tp, prepared.name))
    z, claimed = declared_noise(tp)
    z_used = z / 10.0 if tp.break_ == "noise_div10" else z
    included = np.random.default_rng([seed, 1]).random(m) < 0.5
    cfg = dpsgd.DPSGDConfig(
        clip_norm=tp.clip_norm,
        noise_multiplier=z_used,
        learning_rate=settings.learning_rate,
        steps=tp.steps,
        sampling_rate=tp.sampling_rate,
    )
    arrays: dict[str, Any] = {"included": included}
    padding = 0
    if tp.canary_kind == "gradient":
        zero = np.all(X_d == 0, axis=0)
        padding = padding_for(zero, settings.hidden[0], m)
        X_train = np.hstack([X_d, np.zeros((n, padding), np.float32)])
        model = models.mlp(prepared.name, X_train.shape[1], prepared.num_classes, settings.hidden)
        coords = canary_coordinates(
            np.concatenate([zero, np.ones(padding, bool)]), settings.hidden[0], m, [seed, 2]
        )
        unclipped = (CANARY_LAYER,) if tp.break_ == "unclipped_layer" else ()
        entered = clip_canaries(
            np.full(m, tp.canary_norm * tp.clip_norm), np.full(m, CANARY_LAYER), tp.clip_norm, unclipped
        )
        flat, steps_in = run_gradient_canaries(
            model, X_train, y_d, cfg, coords, entered, included, seed, desc=f"train {audit.name}"
        )
        flat_init = np.concatenate([p[0].ravel() for p in model.init(1, seed)])
        normalizer = max(tp.sampling_rate * n, 1.0)  # the trainer's default B = q·|D|
        arrays.update(
            {
                "coordinates": coords,
                "theta0": flat_init[coords].astype(np.float64),
                "theta_final": flat[coords],
                "canary_entered": entered,
                "canary_steps": steps_in.astype(np.int64),
                "update_scale": settings.learning_rate / normalizer,
            }
        )
        offsets = np.cumsum([0, *(int(np.prod(s)) for s in model.param_shapes)])
        final = [flat[offsets[i] : offsets[i + 1]].reshape(s) for i, s in enumerate(model.param_shapes)]
    else:
        pool_X, pool_y = X[prepared.pool_idx], prepared.y[prepared.pool_idx].astype(np.int64)
        if m > len(pool_X):
            raise ValueError(
                f"onerun.train.canaries = {m}: input canaries are pool records and {prepared.name} has "
                f"{len(pool_X)} pool rows"
            )
        rng = np.random.default_rng([seed, 2])
        rows = np.sort(rng.choice(len(pool_X), m, replace=False))
        shift = 1 + rng.integers(0, max(prepared.num_classes - 1, 1), size=m)
        canary_y = (pool_y[rows] + shift) % prepared.num_classes  # always a wrong label
        X_train = np.vstack([X_d, pool_X[rows]])
        y_train = np.concatenate([y_d, canary_y])
        mask = np.concatenate([np.ones(n, bool), included])[None, :]
        model = models.mlp(prepared.name, X_train.shape[1], prepared.num_classes, settings.hidden)
        result = dpsgd.train_trials(model, X_train, y_train, mask, cfg, seed=seed, desc=f"train {audit.name}")
        final = [p[0] for p in result.params]
        arrays.update(
            {"canary_rows": prepared.pool_idx[rows], "canary_X": pool_X[rows], "canary_y": canary_y}
        )
    arrays.update({f"param_{i}": p for i, p in enumerate(final)})
    write_npz(out_dir / RUN_FILE, arrays)
    log.info("%s: %d %s canaries (%d included), z = %.4g (trained with %.4g), claimed ε = %.4g",
             audit.name, m, tp.canary_kind, int(included.sum()), z, z_used, claimed)  # fmt: skip
    return TrainManifest(
        experiment="onerun",
        dataset=audit.dataset,
        delta=tp.delta,
        sizes={"D": n, "canaries": m, "included": int(included.sum()), "padding": padding},
        seeds={"seed": tp.seed, "setting_seed": seed},
        mechanisms={"declared": Mechanism.dpsgd(z, tp.sampling_rate, tp.steps, tp.clip_norm)},
        facts={
            "canary_kind": tp.canary_kind,
            BREAK_KEY: tp.break_,
            "epsilon_claimed": claimed,
            "calibration_accountant": tp.calibration_accountant,
            "noise_multiplier_used": z_used,
            "canary_norm": tp.canary_norm,
            "sampling_rate": tp.sampling_rate,
            "steps": tp.steps,
            "clip_norm": tp.clip_norm,
            "learning_rate": settings.learning_rate,
            "hidden": list(settings.hidden),
            "input_dim": int(X_train.shape[1]),
        },
        seconds=round(time.perf_counter() - started, 3),
    )
