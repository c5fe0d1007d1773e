"""Noise that changes during training: the noise multiplier cut to σ/4 for the last 20 % of the steps
("fine-tune with less noise at the end"), while the claim counts σ throughout."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_lowered_late"
BUG_CLASS = "noise scale"
DESCRIPTION = "hand-written step: noise σC/4 (declared σC) in the last 20 % of steps, a fine-tuning phase"
#: PLD's ε of σ for 184 steps then σ/4 for 46.
TRUE_EPSILON = 21.58
FACTOR = 4.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD over the two phases)."""
    sigma, start = common.declared_sigma(), common.late_start(common.STEPS)
    return common.epsilon_of_phases([(sigma, start), (sigma / FACTOR, common.STEPS - start)])


class NoiseLoweredLate(common.DPSGDModel):
    late_from: int = common.late_start(common.STEPS)

    def noise(self, shape: tf.TensorShape) -> tf.Tensor:
        late = tf.cast(self.optimizer.iterations >= self.late_from, tf.float32)
        scale = 1.0 - (1.0 - 1.0 / FACTOR) * late  # the bug: a quarter of the noise once training is late
        return scale * tf.random.normal(shape, stddev=self.noise_multiplier * self.l2_norm_clip)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=NoiseLoweredLate)
    model.late_from = common.late_start(epochs * common.STEPS_PER_EPOCH)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
