"""Clipping: a hand-written step clips each variable's gradient to C separately (per-layer clipping, C not
split)."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "clip_per_variable"
BUG_CLASS = "clipping"
DESCRIPTION = "hand-written step: each of the 6 variables clipped to C on its own, a record's norm up to C·√6"
# Sensitivity C·√6 against noise σC: PLD's ε of (σ/√6, q, T), common.epsilon(σ / √6).
TRUE_EPSILON = 11.808722457703611


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma() / 6**0.5)


class ClipPerVariable(common.DPSGDModel):
    def clip(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        out = []
        for g in grads:  # the bug: per-layer clipping must split C (e.g. C/√L each), this gives each layer C
            norms = self.global_norms([g])
            factor = tf.minimum(1.0, self.l2_norm_clip / (norms + 1e-12))
            out.append(g * tf.reshape(factor, [-1] + [1] * (len(g.shape) - 1)))
        return out


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = common.dp_model(seed, sigma, cls=ClipPerVariable)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
