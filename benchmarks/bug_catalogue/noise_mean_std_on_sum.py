"""Noise scale: a hand-written step adds the MEAN's noise std σC/B to the SUM, then divides by B again."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_mean_std_on_sum"
BUG_CLASS = "noise scale"
DESCRIPTION = "hand-written step: noise std σC/B (the mean's) on the clipped sum, then ÷B: B× too little"
# The sum gets noise σC/64: PLD's ε of (σ/64, q, T), common.epsilon(σ / 64) (about 3 minutes to compute).
TRUE_EPSILON = 20484.834104340545


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD; slow)."""
    return common.epsilon(common.declared_sigma() / common.BATCH)


class MeanNoiseOnSum(common.DPSGDModel):
    def privatize(self, summed: list[tf.Tensor]) -> list[tf.Tensor]:
        batch = float(self.expected_batch)
        # the bug: "the mean has noise std σC/B", but it is added to the sum before averaging
        return [(s + self.noise(s.shape) / batch) / batch for s in summed]


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=MeanNoiseOnSum)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
