"""Noise reused: ``tf.random.stateless_normal`` with a constant seed, "for reproducibility": the same noise
every step."""

from __future__ import annotations

import math

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_fixed_seed"
BUG_CLASS = "noise reused or skipped"
DESCRIPTION = "hand-written step: stateless_normal(seed=[seed, 0]) each step, i.e. the same noise every step"
# The same noise vector at every step: two steps' difference is noiseless, so no finite ε holds.
TRUE_EPSILON = math.inf


def true_epsilon() -> float:
    """Reused noise cancels: no finite ε."""
    return math.inf


class FixedSeedNoise(common.DPSGDModel):
    noise_seed: int = 0

    def noise(self, shape: tf.TensorShape) -> tf.Tensor:
        # the bug: a stateless op with a constant seed returns the same numbers at every call
        return tf.random.stateless_normal(
            shape, seed=[self.noise_seed, 0], stddev=self.noise_multiplier * self.l2_norm_clip
        )


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=FixedSeedNoise)
    model.noise_seed = seed

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
