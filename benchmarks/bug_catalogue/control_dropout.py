"""Control: the correct hand-written DP-SGD step on an MLP with a ``Dropout(0.1)`` layer (random per
example, so the audit cannot recompute the step exactly)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_dropout"
BUG_CLASS = "control"
DESCRIPTION = "hand-written step (per-example clip, noise σC on the sum) on an MLP with Dropout(0.1)"
# Exactly the accounted mechanism on shuffled batches (the catalogue's claim): PLD's ε of (σ, q, T) = 2.
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


def dropout_model(seed: int, sigma: float) -> Any:
    """The 64-64-10 MLP with Dropout(0.1) after each hidden layer, trained by the hand-written step."""
    tf.keras.utils.set_random_seed(seed)
    inputs = tf.keras.Input((64,))
    hidden = tf.keras.layers.Dropout(0.1)(tf.keras.layers.Dense(64, activation="relu")(inputs))
    hidden = tf.keras.layers.Dropout(0.1)(tf.keras.layers.Dense(64, activation="relu")(hidden))
    model = common.DPSGDModel(inputs=inputs, outputs=tf.keras.layers.Dense(10)(hidden))
    return common.compile_dp(model, sigma)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    model = dropout_model(seed, sigma)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
