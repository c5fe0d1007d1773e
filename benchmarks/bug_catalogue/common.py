"""The catalogue's shared setting: digits, the MLP, the loaders and a correct hand-written DP-SGD step.

Every entry trains the same model on the same records and claims the same privacy (ε = 2 at δ = 1e-5
for Poisson-sampled DP-SGD with q = 64/1437, T = 230, C = 1 and the noise multiplier PLD calibrates
for that), so a control and a bug differ only by the bug. Everything here is what a user would write
(nothing reads dpaudit's internals); the catalogue's entries import it as their own helpers.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import tensorflow as tf

N_TRAIN = 1437
BATCH = 64
EPOCHS = 10
CLIP = 1.0
DELTA = 1e-5
CLAIMED_EPSILON = 2.0
LEARNING_RATE = 0.25
SAMPLING_RATE = BATCH / N_TRAIN
STEPS_PER_EPOCH = math.ceil(N_TRAIN / BATCH)
STEPS = EPOCHS * STEPS_PER_EPOCH
#: The seed of the 80/20 split (fixed: every entry and seed trains on the same 1437 records).
SPLIT_SEED = 0


@functools.cache
def digits() -> tuple[np.ndarray, np.ndarray]:
    """The training part of a seeded 80/20 split of sklearn's digits: x/16 as float32 [1437, 64], int64
    labels.

    Three pixels (0, 32, 39) are 0 in every training record: the audit's inert features."""
    from sklearn.datasets import load_digits

    data = load_digits()
    x, y = (data.data / 16.0).astype("float32"), data.target.astype("int64")
    order = np.random.default_rng(SPLIT_SEED).permutation(len(x))[:N_TRAIN]
    return x[order], y[order]


@functools.cache
def declared_sigma() -> float:
    """The noise multiplier every script declares: PLD's calibration for ε = 2 at q = 64/1437, T = 230
    (≈ 1.609; about 2 s, once per process)."""
    from dpaudit.training.accounting import calibrate_noise_multiplier

    return calibrate_noise_multiplier(CLAIMED_EPSILON, DELTA, SAMPLING_RATE, STEPS, "pld")


def epsilon(noise_multiplier: float, sampling_rate: float = SAMPLING_RATE, steps: int = STEPS) -> float:
    """PLD's ε at δ = 1e-5 of Poisson-sampled DP-SGD (z, q, T): the entries' true ε where it is defined."""
    from dpaudit.training.accounting import compute_epsilon

    return compute_epsilon(noise_multiplier, sampling_rate, steps, DELTA, "pld")


def epsilon_of_phases(phases: list[tuple[float, int]], sampling_rate: float = SAMPLING_RATE) -> float:
    """PLD's ε at δ = 1e-5 of Poisson-sampled DP-SGD whose noise multiplier changes during training:
    ``phases`` lists (effective noise multiplier, steps); a clip norm raised to k·C under noise σC is
    the multiplier σ/k (dp_accounting's ``PLDAccountant`` on the composed events)."""
    import dp_accounting

    from dpaudit.training.accounting import _step_event

    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    for z, steps in phases:
        accountant.compose(_step_event(z, sampling_rate), steps)
    return float(accountant.get_epsilon(DELTA))


# ----------------------------------------------------------------------------------------- loaders


def shuffled_batches(x: np.ndarray, y: np.ndarray, seed: int, batch: int = BATCH) -> tf.data.Dataset:
    """The usual Keras loader: a fresh permutation each epoch, cut into batches of ``batch``."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True).batch(batch)


def poisson_batches(x: np.ndarray, y: np.ndarray, rate: float, steps: int, seed: int) -> tf.data.Dataset:
    """Poisson sampling: ``steps`` batches per epoch, each record in each batch independently w.p. ``rate``.

    The per-batch keys come from ``Dataset.random`` re-randomised every epoch, so every step of every
    epoch draws a fresh mask."""
    xs, ys = tf.constant(x), tf.constant(y)
    n = len(x)

    def sample(key: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        keep = tf.random.stateless_uniform([n], seed=tf.stack([key, tf.constant(seed, tf.int64)])) < rate
        return tf.boolean_mask(xs, keep), tf.boolean_mask(ys, keep)

    keys = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(steps)
    return keys.map(sample)


# ------------------------------------------------------------------------------------------- model


def per_example_loss() -> tf.keras.losses.Loss:
    """Cross-entropy on logits with no reduction: one loss per example (what DP optimizers need)."""
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def mlp(seed: int, cls: type = tf.keras.Model) -> Any:
    """The 64-64-10 ReLU MLP (logits) as a functional model of class ``cls``, weights seeded by ``seed``."""
    tf.keras.utils.set_random_seed(seed)
    inputs = tf.keras.Input((64,))
    hidden = tf.keras.layers.Dense(64, activation="relu")(inputs)
    hidden = tf.keras.layers.Dense(64, activation="relu")(hidden)
    return cls(inputs=inputs, outputs=tf.keras.layers.Dense(10)(hidden))


def _per_example_scale(factor: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """``factor`` [n] reshaped to broadcast over a per-example tensor [n, ...]."""
    return tf.reshape(factor, [-1] + [1] * (len(like.shape) - 1))


class DPSGDModel(tf.keras.Model):
    """DP-SGD by hand, the way the Keras guide "Customizing what happens in fit" suggests: per-example
    gradients (``tape.jacobian``), clipping each to ``l2_norm_clip``, Gaussian noise
    ``noise_multiplier · l2_norm_clip`` on the sum, division by the expected batch size.

    Split into small methods so an entry's bug is one overridden method; this class is correct.
    Set ``l2_norm_clip``, ``noise_multiplier`` and ``expected_batch`` after construction."""

    l2_norm_clip: float = CLIP
    noise_multiplier: float = 1.0
    expected_batch: int = BATCH

    def per_example_gradients(self, x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """The per-example losses [n] and each variable's per-example gradients [n, *shape]."""
        with tf.GradientTape() as tape:
            losses = self.loss(y, self(x, training=True))
        return losses, tape.jacobian(losses, self.trainable_variables)

    def global_norms(self, grads: list[tf.Tensor]) -> tf.Tensor:
        """Each example's gradient norm over every variable [n]."""
        n = tf.shape(grads[0])[0]
        return tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(g * g, [n, -1]), axis=1) for g in grads]))

    def clip(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        """Scale each example's whole gradient to norm ≤ C."""
        factor = tf.minimum(1.0, self.l2_norm_clip / (self.global_norms(grads) + 1e-12))
        return [g * _per_example_scale(factor, g) for g in grads]

    def noise(self, shape: tf.TensorShape) -> tf.Tensor:
        """One fresh Gaussian draw N(0, (σC)²) of ``shape``."""
        return tf.random.normal(shape, stddev=self.noise_multiplier * self.l2_norm_clip)

    def privatize(self, summed: list[tf.Tensor]) -> list[tf.Tensor]:
        """Noise on the clipped sum, then the mean over the expected batch size."""
        return [(s + self.noise(s.shape)) / float(self.expected_batch) for s in summed]

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        x, y = data
        losses, grads = self.per_example_gradients(x, y)
        summed = [tf.reduce_sum(g, axis=0) for g in self.clip(grads)]
        self.optimizer.apply_gradients(zip(self.privatize(summed), self.trainable_variables, strict=True))
        return {"loss": tf.reduce_mean(losses)}


def compile_dp(model: Any, noise_multiplier: float, l2_norm_clip: float = CLIP) -> Any:
    """Set a hand-written DP-SGD model's σ, C and divisor, and compile it with plain SGD at
    :data:`LEARNING_RATE` (what applies its privatized gradient)."""
    model.l2_norm_clip, model.noise_multiplier, model.expected_batch = l2_norm_clip, noise_multiplier, BATCH
    model.compile(optimizer=tf.keras.optimizers.SGD(LEARNING_RATE), loss=per_example_loss())
    return model


def dp_model(seed: int, noise_multiplier: float, l2_norm_clip: float = CLIP, cls: type = DPSGDModel) -> Any:
    """A compiled hand-written DP-SGD model on the catalogue's MLP."""
    return compile_dp(mlp(seed, cls), noise_multiplier, l2_norm_clip)


def late_start(steps: int, share: float = 0.2) -> int:
    """The first step of the last ``share`` of ``steps`` (184 of 230 at the default 10 epochs): where
    the entries whose bug begins late in training switch it on."""
    return steps - round(share * steps)


def tfp_model(seed: int, optimizer: Any) -> Any:
    """The MLP compiled with a TF Privacy optimizer and the per-example loss TF Privacy requires."""
    model = mlp(seed)
    model.compile(optimizer=optimizer, loss=per_example_loss(), metrics=["accuracy"])
    return model


def dp_keras_sgd(noise_multiplier: float, num_microbatches: int | None = None) -> Any:
    """TF Privacy's ``DPKerasSGDOptimizer`` at C = :data:`CLIP` and :data:`LEARNING_RATE`."""
    from tensorflow_privacy import DPKerasSGDOptimizer

    return DPKerasSGDOptimizer(
        l2_norm_clip=CLIP,
        noise_multiplier=noise_multiplier,
        num_microbatches=num_microbatches,
        learning_rate=LEARNING_RATE,
    )


# ------------------------------------------------------------------------------------------- audit


def declared_audit(seed: int, epochs: int, canaries: int, sampling: str = "shuffle") -> Any:
    """The documented audit set-up every script adds (its ``# audit`` lines): the claim it makes — the
    declared σ, C, B, N, epochs and δ with ε = 2 — and an ``TrainingAuditor`` of ``canaries`` for it."""
    from dpaudit.training_audit import DeclaredDPSGD, TrainingAuditor

    declared = DeclaredDPSGD(
        noise_multiplier=declared_sigma(),
        clip_norm=CLIP,
        batch_size=BATCH,
        dataset_size=N_TRAIN,
        epochs=epochs,
        delta=DELTA,
        sampling=sampling,
        epsilon=CLAIMED_EPSILON,
    )
    return TrainingAuditor(canaries=canaries, declared=declared, seed=seed)
