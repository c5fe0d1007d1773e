"""Sampling: a Poisson loader seeds each step's mask by its index within the epoch, so every epoch repeats
the masks."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "sampling_same_poisson_mask"
BUG_CLASS = "sampling"
DESCRIPTION = "Poisson loader seeds step t's mask with (seed, t), t within the epoch: the same 23 batches"
# 23 Poisson draws at q, each batch then used 10 times with fresh noise (= one Gaussian at σ/√10):
# PLD's ε of (σ/√10, q, 23), common.epsilon(σ / √10, steps=23).
TRUE_EPSILON = 9.676306752902864


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma() / common.EPOCHS**0.5, steps=common.STEPS_PER_EPOCH)


def poisson_batches_by_step(
    x: np.ndarray, y: np.ndarray, rate: float, steps: int, seed: int
) -> tf.data.Dataset:
    """The user's Poisson loader: ``steps`` masks per epoch, each record kept w.p. ``rate``."""
    xs, ys = tf.constant(x), tf.constant(y)

    def sample(t: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        # the bug: the key has the step within the epoch but not the epoch
        keep = tf.random.stateless_uniform([len(x)], seed=tf.stack([tf.constant(seed, tf.int64), t])) < rate
        return tf.boolean_mask(xs, keep), tf.boolean_mask(ys, keep)

    return tf.data.Dataset.range(steps).map(sample)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = poisson_batches_by_step(x, y, common.SAMPLING_RATE, common.STEPS_PER_EPOCH, seed)
    model = common.dp_model(seed, sigma)

    audit = common.declared_audit(seed, epochs, canaries, sampling="poisson")  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
