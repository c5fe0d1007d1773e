"""Clipping: a hand-written step clips every layer but the output layer (``[:-2]`` leaves its kernel and
bias out)."""

from __future__ import annotations

import math

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "clip_skip_output_layer"
BUG_CLASS = "clipping"
DESCRIPTION = "hand-written step: per-example norm and clipping over all layers but the output layer's"
# The output layer's per-example gradient is unbounded, so no (ε, δ) holds for any finite ε.
TRUE_EPSILON = math.inf


def true_epsilon() -> float:
    """Unbounded sensitivity: no finite ε."""
    return math.inf


class SkipOutputLayer(common.DPSGDModel):
    def clip(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        hidden = grads[:-2]  # the bug: "the logits layer is small, leave it alone"
        factor = tf.minimum(1.0, self.l2_norm_clip / (self.global_norms(hidden) + 1e-12))
        return [g * tf.reshape(factor, [-1] + [1] * (len(g.shape) - 1)) for g in hidden] + grads[-2:]


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=SkipOutputLayer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
