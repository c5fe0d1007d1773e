"""Clipping that changes during training: the clip norm raised to 3C for the last 20 % of the steps
("the model underfits; relax clipping once it has converged"), noise still σC."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "clip_raised_late"
BUG_CLASS = "clipping"
DESCRIPTION = "hand-written step clips at 3C (declared C) in the last 20 % of steps, noise still σC"
#: Sensitivity 3C against noise σC in the last 46 of 230 steps: PLD's ε of σ for 184 steps then σ/3 for 46.
TRUE_EPSILON = 10.73
FACTOR = 3.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD over the two phases)."""
    sigma, start = common.declared_sigma(), common.late_start(common.STEPS)
    return common.epsilon_of_phases([(sigma, start), (sigma / FACTOR, common.STEPS - start)])


class ClipRaisedLate(common.DPSGDModel):
    late_from: int = common.late_start(common.STEPS)

    def clip(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        late = tf.cast(self.optimizer.iterations >= self.late_from, tf.float32)
        bound = self.l2_norm_clip * (1.0 + (FACTOR - 1.0) * late)  # the bug: 3C once training is late
        factor = tf.minimum(1.0, bound / (self.global_norms(grads) + 1e-12))
        return [g * tf.reshape(factor, [-1] + [1] * (len(g.shape) - 1)) for g in grads]


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=ClipRaisedLate)
    model.late_from = common.late_start(epochs * common.STEPS_PER_EPOCH)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
