"""Control: the correct hand-written DP-SGD ``train_step`` with Adam applying the privatized gradient
(post-processing: the claim holds; the tap reads the gradient Adam receives)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_adam_step"
BUG_CLASS = "control"
DESCRIPTION = "hand-written step (per-example clip, noise σC on the sum) applied by Adam, shuffled batches"
# Exactly the accounted mechanism on shuffled batches (the catalogue's claim): PLD's ε of (σ, q, T) = 2.
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


def adam_model(seed: int, sigma: float) -> Any:
    """The catalogue's hand-written DP-SGD model compiled with Adam instead of SGD."""
    model = common.dp_model(seed, sigma)
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=common.per_example_loss())
    return model


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = adam_model(seed, sigma)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
