"""Clipping: clip norm raised to 10 in a hand-written step whose noise std is σ (the ×C was never written)."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "clip_norm_10_noise_for_1"
BUG_CLASS = "clipping"
DESCRIPTION = "hand-written step clips at C = 10 (declared 1), its noise std is σ·1: clip and noise disagree"
# Sensitivity 10 against noise σ: PLD's ε of (σ/10, q, T), common.epsilon(σ / 10).
TRUE_EPSILON = 437.5922569703808
USED_CLIP = 10.0  # "accuracy is better with a larger clip norm"


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma() / USED_CLIP)


class NoiseWithoutClip(common.DPSGDModel):
    def noise(self, shape: tf.TensorShape) -> tf.Tensor:
        # the bug: std σ, not σ·C (identical while C was 1)
        return tf.random.normal(shape, stddev=self.noise_multiplier)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, l2_norm_clip=USED_CLIP, cls=NoiseWithoutClip)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
