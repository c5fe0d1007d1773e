"""Crafters 4 and 5 (Nasr et al. 2021 §IV-E/F, :data:`dpaudit.references.NASR_2021`): gradient canaries.

- Crafter 4 (E) after t_o warm-up steps (:func:`play_gradient_canary`): per trial, the 2n coordinates
  with the smallest summed |update| (:func:`place_canaries`; inert coordinates first by default),
  canary ±C/√(2n) (norm C), added in world D′ with probability q at every later step; the view is the
  privatized sum projected on the canary at every step.
- Crafter 5 (F, :func:`craft_malicious_dataset`): D is random inputs in the input range labelled by
  the initial model θ_0, learning rate 0; then Crafter 4 on every step (:func:`play_malicious_dataset`).
  With learning rate 0 every update is 0, so Crafter 4's "smallest summed |update|" is read as the
  smallest summed |clipped gradient| of D at θ_0, which the adversary can compute because it chose D
  and θ_0 does not move.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from dpaudit.experiments.instantiation.design.game import Game, _flat, _split_flat, test_accuracy
from dpaudit.training.dpsgd import InjectedGradient, StepState, privatized_sum_observer, train_trials
from dpaudit.training.gradient_canary import (
    canary_gradient,
    canary_projection,
    canary_signs,
    smallest_update_coordinates,
)
from dpaudit.training.models import Conv2D, Dense, Flatten, Model

__all__ = [
    "clipped_gradient_mass",
    "craft_malicious_dataset",
    "inert_coordinates",
    "place_canaries",
    "play_gradient_canary",
    "play_malicious_dataset",
    "silence_features",
]


def _projection_observer(state: StepState) -> dict[str, tf.Tensor]:
    """⟨g̃_t, u_t⟩ ``[T]``: the privatized sum projected on each trial's unit canary direction
    (``trial_data["unit"]``, flat ``[T, P]``), one scalar per trial and step."""
    T = tf.shape(state.sigma)[0]
    flat = tf.concat([tf.reshape(g, [T, -1]) for g in state.privatized_sum], axis=1)
    return {"": tf.reduce_sum(flat * state.trial_data["unit"], axis=1)}


def inert_coordinates(model: Model, X: np.ndarray) -> np.ndarray:
    """Flat parameter coordinates that no record of ``X`` can move or be moved by: the first dense
    layer's weights from input features that are 0 in every row (∂ℓ/∂W[i, j] = x_i·δ_j = 0, and W[i, :]
    never reaches the forward pass). ``[P]`` booleans; all False unless the first weighted layer is dense
    and sees the raw features (a convolution shares its kernel across positions; pooling mixes them)."""
    inert = np.zeros(model.num_params, dtype=bool)
    at = next(i for i, layer in enumerate(model.layers) if isinstance(layer, Dense | Conv2D))
    first = model.layers[at]
    if isinstance(first, Dense) and all(isinstance(layer, Flatten) for layer in model.layers[:at]):
        zero_features = np.all(np.asarray(X).reshape(len(X), -1) == 0, axis=0)
        inert[: zero_features.size * first.units] = np.repeat(zero_features, first.units)
    return inert


def place_canaries(
    abs_sum: np.ndarray, sizes: np.ndarray, inert: np.ndarray, placement: str
) -> tuple[list[np.ndarray], np.ndarray]:
    """Crafter 4's coordinates per trial: the 2n = ``sizes[t]`` with the smallest summed |update|
    (``placement="update"``, the paper's rule), or inert coordinates first and then that rule
    (``"inert"``). Also returns, per trial, whether every chosen coordinate is inert: only then does
    the data leave the canary's projections alone in both worlds (the per-step family law)."""
    if placement not in ("inert", "update"):
        raise ValueError(f"canary_placement must be 'inert' or 'update', got {placement!r}")
    key = abs_sum
    if placement == "inert" and inert.any():
        key = abs_sum + np.where(inert, 0.0, abs_sum.max() + 1.0)
    coords: list[np.ndarray] = [np.empty(0, np.int64)] * len(sizes)
    all_inert = np.zeros(len(sizes), dtype=bool)
    for size in np.unique(sizes):
        rows = np.flatnonzero(sizes == size)
        chosen = smallest_update_coordinates(key[rows], int(size))
        for r, c in zip(rows, chosen, strict=True):
            coords[r] = c
            all_inert[r] = bool(inert[c].all())
    return coords, all_inert


def play_gradient_canary(
    game: Game,
    z: float,
    inserted: np.ndarray,
    sizes: np.ndarray,
    seed: int,
    warmup: int,
    placement: str = "inert",
) -> dict[str, np.ndarray]:
    """Threat model E (§IV-E): t_o warm-up steps (one trainer call per step, summing |θ_{k+1} − θ_k|),
    Crafter 4 per trial with 2n = ``sizes[t]`` (:func:`place_canaries`), then T − t_o steps with the
    canary in world D′ (probability q per step) and the projection ⟨g̃_t, u⟩ observed at every one."""
    model = game.model
    T = len(inserted)
    mask = np.ones((T, len(game.X_d)), dtype=bool)
    params = model.init(T, seed)
    abs_sum = np.zeros((T, model.num_params), dtype=np.float64)
    one = game.config(z, steps=1)
    for k in range(warmup):
        result = train_trials(
            model, game.X_d, game.y_d, mask, one, seed=seed * 1000 + k + 1, init_params=params,
            chunk_size=game.chunk_size, desc="E: warm-up",
        )  # fmt: skip
        abs_sum += np.abs(_flat(result.params) - _flat(params))
        params = result.params
    coords, all_inert = place_canaries(abs_sum, sizes, inert_coordinates(model, game.X_d), placement)
    canary = np.zeros((T, model.num_params), dtype=np.float32)
    for r, c in enumerate(coords):
        canary[r] = canary_gradient(model.num_params, c, game.clip_norm)
    injected = InjectedGradient(
        grads=_split_flat(model, canary),
        weights=np.ones(T, np.float32),
        gate=inserted.astype(np.float32),
        per_trial=True,
    )
    result = train_trials(
        model,
        game.X_d,
        game.y_d,
        mask,
        game.config(z, steps=game.steps - warmup),
        seed=seed * 1000,
        init_params=params,
        injected=injected,
        observers={"dot": _projection_observer},
        trial_data={"unit": canary / game.clip_norm},
        chunk_size=game.chunk_size,
        desc="E: gradient canary",
    )
    return {
        "inserted": inserted,
        "canary_size": sizes,
        "canary_inert": all_inert,
        "dots": result.records["dot"].astype(np.float64),
        "test_accuracy": test_accuracy(model, result.params, game.X_eval, game.y_eval),
    }


def craft_malicious_dataset(
    model: Model, params0: Sequence[np.ndarray], size: int, lo: np.ndarray, hi: np.ndarray, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Crafter 5 (§IV-F): ``size`` inputs uniform in [lo, hi], labelled by the initial model θ_0."""
    rng = np.random.default_rng([seed, 5])
    X = rng.uniform(0.0, 1.0, size=(size, *model.input_shape)).astype(np.float32)
    X = (np.asarray(lo) + X * (np.asarray(hi) - np.asarray(lo))).astype(np.float32)
    y = np.argmax(model.predict_proba(params0, X)[0], axis=-1)
    return X, y.astype(np.int64)


def clipped_gradient_mass(
    model: Model, params0: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray, clip_norm: float
) -> np.ndarray:
    """Σ_n |clip_C(∇_θ ℓ(θ_0; x_n, y_n))| per flat coordinate ``[P]``: the expected update of D at θ_0
    up to the factor q·η, which Crafter 4 ranks when the learning rate is 0 (F)."""
    ps = [tf.constant(np.asarray(p, np.float32)) for p in params0]
    x = tf.constant(np.asarray(X, np.float32)[:, None])  # [N, 1, ...]: one "trial" per example
    tiled = [tf.repeat(p, len(X), axis=0) for p in ps]
    with tf.GradientTape() as tape:
        tape.watch(tiled)
        logits, _ = model.forward(tiled, x, shared=False)
        loss = tf.reduce_sum(model.example_losses(logits, tf.constant(np.asarray(y)[:, None], tf.int32)))
    grads = _flat([g.numpy() for g in tape.gradient(loss, tiled)])  # [N, P]
    norms = np.linalg.norm(grads, axis=1, keepdims=True)
    clipped = grads * np.minimum(1.0, clip_norm / np.maximum(norms, 1e-12))
    return np.abs(clipped).sum(axis=0)


def silence_features(model: Model, X: np.ndarray, canary_size: int, seed: int) -> np.ndarray:
    """Crafter 5's dataset with a few input features set to 0 in every record, when the model's first
    weighted layer is dense on the raw features: the first-layer weights of those features then get
    no gradient from any record (∂ℓ/∂W[i, j] = x_i·δ_j = 0), so Crafter 4 finds 2n coordinates where
    the data's clipped gradients are exactly 0 and the per-step baseline is 0 by construction. The
    adversary of threat model F writes the whole dataset, so this is within its power. Otherwise
    (convolutions, pooling first) ``X`` is returned unchanged."""
    at = next(i for i, layer in enumerate(model.layers) if isinstance(layer, Dense | Conv2D))
    first = model.layers[at]
    if not (isinstance(first, Dense) and all(isinstance(layer, Flatten) for layer in model.layers[:at])):
        return X
    flat = np.asarray(X).reshape(len(X), -1).copy()
    count = min(-(-canary_size // first.units), flat.shape[1] - 1)
    silent = np.random.default_rng([seed, 55]).choice(flat.shape[1], size=count, replace=False)
    flat[:, silent] = 0.0
    return flat.reshape(np.shape(X)).astype(np.asarray(X).dtype)


def play_malicious_dataset(
    game: Game,
    z: float,
    inserted: np.ndarray,
    seed: int,
    *,
    dataset_size: int,
    canary_size: int,
    batch_trials: int = 2000,
) -> dict[str, np.ndarray]:
    """Threat model F (§IV-F): Crafter 5's dataset, learning rate 0, θ_0 shared by every trial;
    Crafter 4's canary in world D′ from the first step; the privatized sums at its coordinates at
    every step. Trials go through the trainer ``batch_trials`` at a time (one compiled trace),
    which releases only the canary coordinates (``train_trials(released=...)``: θ never moves, so
    the rest of the privatized sum is never seen and its noise is not drawn)."""
    model = game.model
    params0 = model.init(1, seed)
    X, y = craft_malicious_dataset(model, params0, dataset_size, game.lo, game.hi, seed)
    X = silence_features(model, X, canary_size, seed)
    mass = clipped_gradient_mass(model, params0, X, y, game.clip_norm)
    coords = smallest_update_coordinates(mass, canary_size)
    canary = canary_gradient(model.num_params, coords, game.clip_norm)
    grads = _split_flat(model, canary)
    cfg = game.config(z, learning_rate=0.0)
    T = len(inserted)
    dots = np.empty((T, game.steps))
    signs = canary_signs(canary_size)
    for start in range(0, T, batch_trials):
        gate = inserted[start : start + batch_trials].astype(np.float32)
        t = len(gate)
        result = train_trials(
            model,
            X,
            y,
            np.ones((t, len(X)), dtype=bool),
            cfg,
            seed=seed * 1000 + start // batch_trials,
            init_params=[np.broadcast_to(p, (t, *p.shape[1:])).copy() for p in params0],
            injected=InjectedGradient(grads=grads, weights=np.ones(t, np.float32), gate=gate),
            observers={"sum": privatized_sum_observer(coords.tolist())},
            chunk_size=game.chunk_size,
            desc="F: malicious dataset",
            released=coords.tolist(),
        )
        dots[start : start + t] = canary_projection(result.records["sum"], signs)
    accuracy = test_accuracy(model, params0, game.X_eval, game.y_eval)
    return {
        "inserted": inserted,
        "canary_size": np.full(T, canary_size),
        "dots": dots,
        "test_accuracy": np.full(T, float(accuracy[0])),
        "data_mass_at_canary": np.asarray(float(mass[coords].sum())),
    }
