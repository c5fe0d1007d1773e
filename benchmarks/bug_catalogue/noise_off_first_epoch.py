"""Noise skipped: no noise during a "warm-up" first epoch, to let the model find its feet before DP starts."""

from __future__ import annotations

import math

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_off_first_epoch"
BUG_CLASS = "noise reused or skipped"
DESCRIPTION = "hand-written step: no noise in the first epoch's 23 steps (a warm-up); the claim counts them"
# The warm-up steps release clipped sums without noise: no finite ε holds.
TRUE_EPSILON = math.inf
WARMUP_STEPS = common.STEPS_PER_EPOCH


def true_epsilon() -> float:
    """Noiseless steps: no finite ε."""
    return math.inf


class NoiseAfterWarmup(common.DPSGDModel):
    def privatize(self, summed: list[tf.Tensor]) -> list[tf.Tensor]:
        on = tf.cast(self.optimizer.iterations >= WARMUP_STEPS, tf.float32)  # the bug: warm-up without noise
        return [(s + on * self.noise(s.shape)) / float(self.expected_batch) for s in summed]


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=NoiseAfterWarmup)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
