"""Phase 1, the shared trainer: plain minibatch SGD of many models at once with a pluggable loss.
In: model, shared rows X, hard labels ``[N]`` or soft targets ``[T, N, C]``, membership mask ``[T, N]``,
a per-trial loss. Out: final parameters ``[T, ...]`` per tensor.

The DP-SGD trainer (:mod:`dpaudit.training.dpsgd`) clips, adds noise and hard-codes cross-entropy;
the heuristic defences need soft targets and losses that branch per batch, and no clipping, so they
train here. These defences are not differentially private: the minibatches are fixed-size uniform
samples without replacement (not Poisson), since the sampling plays no role in a privacy argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dpaudit.config import require
from dpaudit.logs import progress
from dpaudit.training.models import Model

__all__ = [
    "Loss",
    "LossContext",
    "Schedule",
    "batch_size_for",
    "cross_entropy",
    "steps_for",
    "train_minibatch",
]

#: Floats of working memory per chunk of trials when ``chunk_size`` is None (≈ 800 MB).
BUDGET_FLOATS = 2e8
#: Steps run inside one compiled loop (fewer Python round trips, a responsive progress bar).
STEPS_PER_CALL = 50


@dataclass(frozen=True)
class LossContext:
    """Where training stands when a loss is evaluated: the step index (0-based, scalar int64 tensor)
    and the epoch ``step // steps_per_epoch`` with ``steps_per_epoch = round(1 / q)``."""

    step: tf.Tensor
    epoch: tf.Tensor


#: ``loss(logits [T, B, C], targets_batch ([T, B] int or [T, B, C] float), context) -> [T]``.
Loss = Callable[[tf.Tensor, tf.Tensor, LossContext], tf.Tensor]


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """The SGD schedule every heuristic defence's config has (its base class): ``learning_rate``,
    ``epochs`` (steps = ⌈epochs / q⌉) and ``sampling_rate`` q (batch size q·mean |D_t|), checked once."""

    learning_rate: float = 1.0
    epochs: float = 30.0
    sampling_rate: float = 0.1

    def __post_init__(self) -> None:
        require(math.isfinite(self.learning_rate) and self.learning_rate > 0, "learning_rate",
                self.learning_rate, "must be finite and > 0")  # fmt: skip
        require(math.isfinite(self.epochs) and self.epochs > 0, "epochs", self.epochs,
                "must be finite and > 0")  # fmt: skip
        require(0.0 < self.sampling_rate <= 1.0, "sampling_rate", self.sampling_rate, "must lie in (0, 1]")

    @property
    def steps(self) -> int:
        return steps_for(self.epochs, self.sampling_rate)


def steps_for(epochs: float, sampling_rate: float) -> int:
    """Steps whose batches (q·|D| records each) add up to ``epochs`` passes over the data."""
    return max(1, math.ceil(epochs / sampling_rate - 1e-9))


def batch_size_for(member_mask: np.ndarray, sampling_rate: float) -> int:
    """The fixed batch size B = max(1, round(q · mean_t |D_t|)), at most the smallest |D_t| (so that a
    batch drawn without replacement holds members only)."""
    sizes = np.asarray(member_mask).sum(axis=1)
    return int(min(max(1, round(sampling_rate * float(sizes.mean()))), sizes.min()))


def cross_entropy(logits: tf.Tensor, targets: tf.Tensor, context: LossContext | None = None) -> tf.Tensor:
    """Mean cross-entropy per trial ``[T]`` against integer labels ``[T, B]`` or soft targets ``[T, B, C]``
    (−Σ_c p_c log softmax(z)_c; with one-hot targets it equals the hard-label loss)."""
    if targets.dtype.is_integer:
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.cast(targets, tf.int32), logits=logits)
    else:
        ce = -tf.reduce_sum(tf.cast(targets, logits.dtype) * tf.nn.log_softmax(logits), axis=-1)
    return tf.reduce_mean(ce, axis=-1)


def _chunk_layout(
    model: Model, T: int, N: int, B: int, soft: bool, chunk_size: int | None
) -> tuple[int, int]:
    """(trials per chunk, number of chunks), balanced so that the last chunk pads little."""
    if chunk_size is None:
        per_trial = 4 * model.num_params + 4 * B * model.activation_size() + 2 * N
        per_trial += N * model.num_classes if soft else 0
        chunk_size = int(max(1, BUDGET_FLOATS // per_trial))
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be ≥ 1, got {chunk_size}")
    num_chunks = max(1, math.ceil(T / chunk_size))
    return math.ceil(T / num_chunks), num_chunks


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    """Pad the trial axis to ``size`` by repeating the last trial (dropped again afterwards)."""
    return a if len(a) == size else np.concatenate([a, np.repeat(a[-1:], size - len(a), axis=0)], axis=0)


def _step_block(model: Model, loss: Loss, lr: float, B: int, soft: bool, steps_per_epoch: int) -> Callable:
    """A compiled block of SGD steps: per step and trial a uniform batch of B members, then θ −= η∇L_t."""

    @tf.function(reduce_retracing=True)
    def run(
        seed: tf.Tensor, params: list[tf.Tensor], X: tf.Tensor, targets: tf.Tensor, mask: tf.Tensor,
        first: tf.Tensor, count: tf.Tensor,
    ) -> list[tf.Tensor]:  # fmt: skip
        for step in tf.range(first, first + count):
            step_seed = tf.random.experimental.stateless_fold_in(seed, step)
            keys = tf.random.stateless_uniform(tf.shape(mask), seed=step_seed)
            keys = tf.where(mask, keys, -1.0)  # non-members rank below every member
            idx = tf.math.top_k(keys, k=B, sorted=False).indices  # [T, B]
            x = tf.gather(X, idx)
            t = tf.gather(targets, idx, batch_dims=1) if soft else tf.gather(targets, idx)
            ctx = LossContext(step=step, epoch=step // steps_per_epoch)
            with tf.GradientTape() as tape:
                tape.watch(params)
                logits, _ = model.forward(params, x, shared=False)
                total = tf.reduce_sum(loss(logits, t, ctx))
            grads = tape.gradient(total, params)
            params = [p - lr * g for p, g in zip(params, grads, strict=True)]
        return params

    return run


def train_minibatch(
    model: Model,
    X: np.ndarray,
    targets: np.ndarray,
    member_mask: np.ndarray,
    loss: Loss,
    *,
    learning_rate: float,
    steps: int,
    sampling_rate: float,
    seed: int,
    desc: str,
    init_params: Sequence[np.ndarray] | None = None,
    chunk_size: int | None = None,
) -> list[np.ndarray]:
    """Train ``T = len(member_mask)`` models with plain minibatch SGD, each on its members of ``X``.

    ``targets`` are integer labels ``[N]`` shared by all trials or soft targets ``[T, N, C]`` (float32,
    one distribution per trial and row). Every step, each trial t draws a uniform batch of the fixed size
    B = max(1, round(q · mean_t |D_t|)) (:func:`batch_size_for`) from its own members without replacement:
    the top B of seeded uniform keys, non-members' keys pushed below all members'. These are fixed-size
    uniform batches, not Poisson batches; the heuristic defences are not DP, so the sampling has no
    privacy role. The batch goes through ``model.forward(params, x [T, B, ...], shared=False)`` and
    ``loss(logits, targets_batch, context) -> [T]`` gives each trial's scalar loss (a batch mean);
    the trainer minimises their sum, so each trial takes its own step θ_t ← θ_t − η ∇L_t. ``context``
    (:class:`LossContext`) holds the step and epoch (``step // round(1/q)``).

    Trials run in chunks (``chunk_size``; default: as many as fit about :data:`BUDGET_FLOATS` floats),
    the last chunk padded by repeating a trial. Results are reproducible for a fixed ``seed`` and chunk
    size: the batches come from a stateless RNG keyed by (seed, chunk, step), and initial weights
    (``model.init``, unless ``init_params`` is given) depend on the seed and the trial index only.
    """
    X = np.asarray(X, dtype=np.float32)
    mask = np.asarray(member_mask).astype(bool)
    T, N = mask.shape if mask.ndim == 2 else (0, -1)
    if mask.ndim != 2 or len(X) != N:
        raise ValueError(f"member_mask must have shape [T, {len(X)}], got {mask.shape}")
    if tuple(X.shape[1:]) != model.input_shape:
        raise ValueError(f"X rows have shape {X.shape[1:]}, model {model.name} expects {model.input_shape}")
    soft = np.ndim(targets) == 3
    if soft:
        targets = np.asarray(targets, dtype=np.float32)
        if targets.shape != (T, N, model.num_classes):
            raise ValueError(f"soft targets must have shape {(T, N, model.num_classes)}, got {targets.shape}")
    else:
        targets = np.asarray(targets, dtype=np.int32)
        if targets.shape != (N,):
            raise ValueError(f"labels must have shape [{N}], got {targets.shape}")
    if T == 0 or mask.sum(axis=1).min() < 1:
        raise ValueError("every trial needs at least one member (member_mask rows must not be empty)")
    if not 0.0 < sampling_rate <= 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], got {sampling_rate}")
    if steps < 0:
        raise ValueError(f"steps must be ≥ 0, got {steps}")
    if init_params is not None and len(init_params) != len(model.param_shapes):
        raise ValueError(f"init_params has {len(init_params)} tensors, model needs {len(model.param_shapes)}")
    params0 = model.init(T, seed) if init_params is None else [np.asarray(p, np.float32) for p in init_params]

    B = batch_size_for(mask, sampling_rate)
    size, num_chunks = _chunk_layout(model, T, N, B, soft, chunk_size)
    run = _step_block(model, loss, float(learning_rate), B, soft, max(1, round(1.0 / sampling_rate)))
    Xt = tf.constant(X)
    shared_targets = None if soft else tf.constant(targets)
    final: list[list[np.ndarray]] = [[] for _ in params0]
    bar = progress(desc=desc, total=T * steps, unit="trial-step")
    for ci in range(num_chunks):
        lo, hi = ci * size, min(T, (ci + 1) * size)
        params = [tf.constant(_pad(p[lo:hi], size)) for p in params0]
        m = tf.constant(_pad(mask[lo:hi], size))
        tg = tf.constant(_pad(targets[lo:hi], size)) if soft else shared_targets
        seed_t = tf.constant([seed, ci], tf.int64)
        for first in range(0, steps, STEPS_PER_CALL):
            block = min(STEPS_PER_CALL, steps - first)
            first_t, block_t = tf.constant(first, tf.int64), tf.constant(block, tf.int64)
            params = run(seed_t, params, Xt, tg, m, first_t, block_t)
            bar.update((hi - lo) * block)
        for i, p in enumerate(params):
            final[i].append(np.asarray(p)[: hi - lo])
    bar.close()
    return [np.concatenate(f, axis=0) for f in final]
