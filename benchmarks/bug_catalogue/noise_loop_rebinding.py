"""Noise skipped: ``for s in summed: s += noise`` rebinds the loop variable, so the gradients never get the
noise."""

from __future__ import annotations

import math

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_loop_rebinding"
BUG_CLASS = "noise reused or skipped"
DESCRIPTION = "hand-written step adds noise to a loop variable (s += noise rebinds s): no noise in the update"
# No noise at all: the clipped sum is released exactly, so no finite ε holds.
TRUE_EPSILON = math.inf


def true_epsilon() -> float:
    """No noise: no finite ε."""
    return math.inf


class RebindingNoise(common.DPSGDModel):
    def privatize(self, summed: list[tf.Tensor]) -> list[tf.Tensor]:
        for s in summed:
            s += self.noise(s.shape)  # the bug: tensors are immutable, this rebinds s and summed is unchanged
        return [s / float(self.expected_batch) for s in summed]


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=RebindingNoise)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
