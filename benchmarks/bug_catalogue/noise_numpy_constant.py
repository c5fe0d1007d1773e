"""Noise reused: ``np.random.normal`` inside the traced step runs once, at tracing: the same noise every
step."""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_numpy_constant"
BUG_CLASS = "noise reused or skipped"
DESCRIPTION = "hand-written step draws noise with np.random inside tf.function: one draw, reused every step"
# The same noise vector at every step: two steps' difference is noiseless, so no finite ε holds.
TRUE_EPSILON = math.inf


def true_epsilon() -> float:
    """Reused noise cancels: no finite ε."""
    return math.inf


class NumpyNoise(common.DPSGDModel):
    def noise(self, shape: tf.TensorShape) -> tf.Tensor:
        # the bug: NumPy runs when Keras traces train_step, so this is a constant in the graph
        draw = np.random.normal(0.0, self.noise_multiplier * self.l2_norm_clip, size=shape.as_list())
        return tf.constant(draw, tf.float32)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=NumpyNoise)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
