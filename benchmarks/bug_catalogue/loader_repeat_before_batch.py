"""Data loader: ``.repeat(2)`` placed before shuffling and batching, so every epoch passes over each record
twice."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "loader_repeat_before_batch"
BUG_CLASS = "data loader"
DESCRIPTION = "loader .repeat(2) before .shuffle().batch(): every record twice an epoch, T = 450 not 230"
# Each copy joins a step w.p. ≈ 64/2874, so a record joins each of 45 steps per epoch w.p. ≈ q: about PLD's
# ε of (σ, q, 450), common.epsilon(σ, steps=450) (approximate: the rare steps holding both copies add more).
TRUE_EPSILON = 2.8364769000485412


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD, the approximation above)."""
    return common.epsilon(common.declared_sigma(), steps=450)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    records = tf.data.Dataset.from_tensor_slices((x, y)).repeat(2)  # the bug: meant as "train twice as long"
    train_ds = records.shuffle(2 * len(x), seed=seed, reshuffle_each_iteration=True).batch(common.BATCH)
    optimizer = common.dp_keras_sgd(sigma)
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
