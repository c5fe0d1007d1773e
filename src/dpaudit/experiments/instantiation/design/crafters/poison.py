"""Crafters 2 and 3 (Nasr et al. 2021 §IV-B–D, :data:`dpaudit.references.NASR_2021`): crafted inputs.

- Crafter 2 (B, C; D's query): n shadow models trained at once on disjoint data with the game's
  hyper-parameters (:func:`train_shadow_models`); from a population record, T_c normalised
  gradient-*ascent* steps on x of the mean shadow loss, clipped to the input range
  (:func:`craft_static_poison`). B and C play the same trials (:func:`play_static_poison`): the trainer
  reveals every θ_i to C and only θ_T to B.
- Crafter 3 (D): the query (x_q, y_q) is Crafter 2's poison and is never inserted; at every step of
  world D′ a fresh x is crafted from x_q (or 0, the paper's start) by double back-propagation so that
  one virtual SGD step on (x, y_q) (clipped to C, or unclipped as the paper's) lowers ℓ(x_q, y_q);
  its clipped gradient enters the step with probability q (:func:`adaptive_poison_injector`,
  :func:`play_adaptive_poison`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from dpaudit.experiments.instantiation.design.game import (
    Game,
    per_trial_losses,
    point_loss_observer,
    test_accuracy,
)
from dpaudit.training.dpsgd import Injector, StepState, train_trials
from dpaudit.training.models import Model

__all__ = [
    "adaptive_poison_injector",
    "craft_adaptive_input",
    "craft_static_poison",
    "play_adaptive_poison",
    "play_static_poison",
    "train_shadow_models",
]


def train_shadow_models(game: Game, z: float, count: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Crafter 2's shadow models: ``count`` models trained at once on disjoint pool subsets of size
    min(|D|, |pool|/(count+1)), with the game's hyper-parameters. Returns their weights and the pool
    rows they did not use (the start record is drawn from those)."""
    rng = np.random.default_rng([seed, 2])
    order = rng.permutation(len(game.X_pool))
    size = max(1, min(len(game.X_d), len(game.X_pool) // (count + 1)))
    mask = np.zeros((count, len(game.X_pool)), dtype=bool)
    for s in range(count):
        mask[s, order[s * size : (s + 1) * size]] = True
    result = train_trials(
        game.model, game.X_pool, game.y_pool, mask, game.config(z), seed=seed + 7, desc="Crafter 2: shadows"
    )
    return result.params, order[count * size :]


def craft_static_poison(
    model: Model,
    shadow_params: Sequence[np.ndarray],
    x0: np.ndarray,
    y0: int,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    step_size: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Crafter 2 (§IV-B): gradient ascent on x of the mean shadow loss, kept in [lo, hi].

    Each of ``steps`` steps moves x by ``step_size``·(hi − lo) along the normalised input gradient of
    the mean shadow loss (:meth:`Model.input_gradients`) and clips to the range. Returns the poison
    and the mean shadow loss before every step and after the last (``[steps + 1]``).
    """
    x = np.asarray(x0, np.float32).copy()
    span = np.maximum(np.asarray(hi, np.float32) - np.asarray(lo, np.float32), 1e-6)
    labels = np.full((1,), int(y0))
    history = []
    for _ in range(steps):
        losses = model.losses(shadow_params, x[None], labels)
        history.append(float(np.mean(losses)))
        g = np.asarray(model.input_gradients(shadow_params, x[None], labels)).mean(axis=0)[0]
        g = g * span
        norm = float(np.linalg.norm(g))
        if norm == 0.0:
            break
        x = np.clip(x + step_size * span * g / norm, lo, hi).astype(np.float32)
    history.append(float(np.mean(model.losses(shadow_params, x[None], labels))))
    return x, np.asarray(history)


def play_static_poison(
    game: Game, z: float, inserted: np.ndarray, seed: int, poison: np.ndarray, label: int
) -> dict[str, np.ndarray]:
    """Threat models B and C (§IV-B/C) on the same trials: D′ = D ∪ {poison}; records ℓ(θ_i; poison)
    at every step (C's view) and on the final model (B's view)."""
    T = len(inserted)
    X = np.concatenate([game.X_d, poison[None]])
    y = np.concatenate([game.y_d, [label]])
    mask = np.zeros((T, len(X)), dtype=bool)
    mask[:, :-1] = True
    mask[:, -1] = inserted.astype(bool)
    result = train_trials(
        game.model,
        X,
        y,
        mask,
        game.config(z),
        seed=seed,
        observers={"loss": point_loss_observer(game.model, poison, label)},
        chunk_size=game.chunk_size,
        desc="B/C: static poison",
    )
    final = per_trial_losses(game.model, result.params, np.broadcast_to(poison, (T, 1, *poison.shape)),
                             np.full((T, 1), label))[:, 0]  # fmt: skip
    path = np.concatenate([result.records["loss"], final[:, None]], axis=1)
    return {
        "inserted": inserted,
        "final_loss": final,
        "loss_path": path.astype(np.float32),
        "test_accuracy": test_accuracy(game.model, result.params, game.X_eval, game.y_eval),
    }


def craft_adaptive_input(
    model: Model,
    params: Sequence[tf.Tensor],
    x_query: tf.Tensor,
    y_query: int,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    step_size: float,
    virtual_learning_rate: float,
    start: str = "zero",
    clip_norm: float | None = None,
) -> tf.Tensor:
    """Crafter 3's inner loop (§IV-D): per trial, x ``[T, 1, ...]`` by double back-propagation.

    Minimises the query's loss after one virtual step, ℓ(θ − η_v·clip_C(∇_θ ℓ(θ; x, y_q)); x_q, y_q), over
    x by ``steps`` normalised gradient steps of ``step_size``·(hi − lo), clipped to [lo, hi], from x = 0
    (the paper's start) or from x = x_q (``start="query"``), and returns the best iterate, the start
    included. The virtual step clips to C as DP-SGD does (``clip_norm``; None: unclipped, the paper's
    literal step): unclipped, the objective rewards a large gradient that the real step then scales
    down, and x drifts away from x_q, whose clipped gradient is already the steepest first-order descent
    of the query's loss. With the start kept as a candidate, D's inserted gradient is never worse than
    C's poison by this objective. Runs eagerly or inside the compiled step.
    """
    T = tf.shape(params[0])[0]
    span = tf.constant(np.maximum(np.asarray(hi) - np.asarray(lo), 1e-6), tf.float32)
    lo_t, hi_t = tf.constant(lo, tf.float32), tf.constant(hi, tf.float32)
    shape = tf.concat([[T, 1], tf.constant(model.input_shape, tf.int32)], 0)
    if start == "query":
        x = tf.broadcast_to(tf.convert_to_tensor(x_query, tf.float32)[None], shape)
    elif start == "zero":
        x = tf.zeros(shape)
    else:
        raise ValueError(f"start must be 'query' or 'zero', got {start!r}")
    x = tf.clip_by_value(x, lo_t, hi_t)
    labels = tf.fill([T, 1], tf.constant(int(y_query), tf.int32))
    query_labels = tf.constant([int(y_query)], tf.int32)
    reduce_axes = list(range(2, 2 + len(model.input_shape)))
    x_axes = [1] * (1 + len(model.input_shape))

    def query_loss_after_step(x: tf.Tensor) -> tf.Tensor:
        """Per trial ``[T]``: the query's loss after the virtual step on (x, y_q)."""
        with tf.GradientTape() as inner:
            inner.watch(params)
            logits, _ = model.forward(params, x, shared=False)
            loss = tf.reduce_sum(model.example_losses(logits, labels))
        grads = inner.gradient(loss, params)
        if clip_norm is not None:
            norms = tf.sqrt(
                tf.add_n([tf.reduce_sum(tf.square(tf.reshape(g, [T, -1])), axis=1) for g in grads]) + 1e-24
            )
            scale = tf.minimum(1.0, clip_norm / norms)
            grads = [g * tf.reshape(scale, [-1] + [1] * (len(g.shape) - 1)) for g in grads]
        virtual = [p - virtual_learning_rate * g for p, g in zip(params, grads, strict=True)]
        q_logits, _ = model.forward(virtual, x_query)
        return tf.reshape(model.example_losses(q_logits, query_labels), [T])

    best_x, best_loss = x, tf.fill([T], np.float32(np.inf))
    for step in range(steps + 1):
        with tf.GradientTape() as outer:
            outer.watch(x)
            q_loss = query_loss_after_step(x)
            total = tf.reduce_sum(q_loss)
        better = q_loss < best_loss
        best_x = tf.where(tf.reshape(better, [-1, *x_axes]), x, best_x)
        best_loss = tf.where(better, q_loss, best_loss)
        if step == steps:
            break
        gx = outer.gradient(total, x) * span
        norm = tf.sqrt(tf.reduce_sum(tf.square(gx), axis=reduce_axes, keepdims=True)) + 1e-12
        x = tf.clip_by_value(x - step_size * span * gx / norm, lo_t, hi_t)
    return best_x


def adaptive_poison_injector(
    model: Model,
    x_query: np.ndarray,
    y_query: int,
    lo: np.ndarray,
    hi: np.ndarray,
    steps: int,
    step_size: float,
    virtual_learning_rate: float,
    start: str = "zero",
    clip_norm: float | None = None,
) -> Injector:
    """Crafter 3 as a trainer injector: each step, craft x per trial and return ∇_θ ℓ(θ_i; x, y_q)
    (the trainer clips it to C and adds it with probability q where the world gate is 1)."""
    xq = tf.constant(np.asarray(x_query, np.float32)[None])

    def inject(state: StepState) -> list[tf.Tensor]:
        params = list(state.params)
        x = tf.stop_gradient(
            craft_adaptive_input(
                model, params, xq, y_query, lo, hi, steps, step_size, virtual_learning_rate, start, clip_norm
            )
        )
        T = tf.shape(params[0])[0]
        with tf.GradientTape() as tape:
            tape.watch(params)
            logits, _ = model.forward(params, x, shared=False)
            loss = tf.reduce_sum(model.example_losses(logits, tf.fill([T, 1], tf.constant(int(y_query)))))
        return tape.gradient(loss, params)

    return inject


def play_adaptive_poison(
    game: Game,
    z: float,
    inserted: np.ndarray,
    seed: int,
    query: np.ndarray,
    label: int,
    *,
    steps: int,
    step_size: float,
    virtual_learning_rate: float | None,
    start: str = "zero",
    virtual_clip: bool = True,
) -> dict[str, np.ndarray]:
    """Threat model D (§IV-D): both worlds train on D; world D′ gets Crafter 3's gradient each step
    with probability q; the view is ℓ(θ_i; x_q, y_q) at every step and on the final model.

    Crafter 3's virtual step is the real one for a single example: clipped to C (unless
    ``virtual_clip`` is False, the paper's literal step) and at rate η/(q|D|) (the trainer divides the
    noisy sum by the expected batch q|D|) unless ``virtual_learning_rate`` is given. A much larger
    virtual rate (the earlier default, 1.0, is 50× adult's real one) rewards x whose large, non-linear
    step helps the query, not the small first-order step training takes."""
    T = len(inserted)
    mask = np.ones((T, len(game.X_d)), dtype=bool)
    if virtual_learning_rate is None:
        virtual_learning_rate = game.learning_rate / (game.sampling_rate * len(game.X_d))
    injector = adaptive_poison_injector(
        game.model, query, label, game.lo, game.hi, steps, step_size, virtual_learning_rate, start,
        clip_norm=game.clip_norm if virtual_clip else None,
    )  # fmt: skip
    result = train_trials(
        game.model,
        game.X_d,
        game.y_d,
        mask,
        game.config(z),
        seed=seed,
        observers={"loss": point_loss_observer(game.model, query, label)},
        injector=injector,
        injector_gate=inserted.astype(np.float32),
        chunk_size=game.chunk_size,
        desc="D: adaptive poison",
    )
    final = per_trial_losses(game.model, result.params, np.broadcast_to(query, (T, 1, *query.shape)),
                             np.full((T, 1), label))[:, 0]  # fmt: skip
    return {
        "inserted": inserted,
        "loss_path": np.concatenate([result.records["loss"], final[:, None]], axis=1).astype(np.float32),
        "test_accuracy": test_accuracy(game.model, result.params, game.X_eval, game.y_eval),
    }
