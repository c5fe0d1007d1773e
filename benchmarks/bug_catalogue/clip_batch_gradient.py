"""Clipping: a hand-written step clips the batch's mean gradient (``tf.clip_by_global_norm``), not each
example's."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "clip_batch_gradient"
BUG_CLASS = "clipping"
DESCRIPTION = "hand-written step: tf.clip_by_global_norm on the batch's mean gradient, noise σC/B on the mean"
# One record moves the clipped mean by up to 2C against noise σC/B: the ε of (σ/(2B), q, T), an upper
# bound far beyond any claim: RDP's compute_epsilon(σ/128, q, T, δ, "rdp") (PLD takes too long).
TRUE_EPSILON = 792914.6740062903


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (RDP upper bound)."""
    from dpaudit.training.accounting import compute_epsilon

    z = common.declared_sigma() / (2 * common.BATCH)
    return compute_epsilon(z, common.SAMPLING_RATE, common.STEPS, common.DELTA, "rdp")


class ClipBatchGradient(common.DPSGDModel):
    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        x, y = data
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(self.loss(y, self(x, training=True)))
        grads = tape.gradient(loss, self.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, self.l2_norm_clip)  # the bug: not each example's
        noisy = [g + self.noise(g.shape) / float(self.expected_batch) for g in grads]
        self.optimizer.apply_gradients(zip(noisy, self.trainable_variables, strict=True))
        return {"loss": loss}


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=ClipBatchGradient)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
