"""Noise skipped: noise only on the weight matrices; the biases' clipped gradients go out exactly ("biases
are not private")."""

from __future__ import annotations

import math

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_kernels_only"
BUG_CLASS = "noise reused or skipped"
DESCRIPTION = "hand-written step noises the kernels only; the biases' clipped sums are released without noise"
# The biases' gradient sums are released exactly: no finite ε holds.
TRUE_EPSILON = math.inf


def true_epsilon() -> float:
    """Noiseless coordinates: no finite ε."""
    return math.inf


class KernelNoiseOnly(common.DPSGDModel):
    def privatize(self, summed: list[tf.Tensor]) -> list[tf.Tensor]:
        out = []
        for s, v in zip(summed, self.trainable_variables, strict=True):
            noisy = s + self.noise(s.shape) if "kernel" in v.name else s  # the bug: biases skipped
            out.append(noisy / float(self.expected_batch))
        return out


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=KernelNoiseOnly)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
