"""Sampling: ``shuffle(reshuffle_each_iteration=False)``, so the same 23 batches come back every epoch."""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training_audit import Verdict

from . import common

NAME = "sampling_fixed_batches"
BUG_CLASS = "sampling"
DESCRIPTION = "loader shuffles once (reshuffle_each_iteration=False): the same batches every epoch"
# Without fresh sampling a record is in one known-fixed batch each epoch: 10 Gaussian steps at σ with no
# amplification credited, gaussian_epsilon(√10/σ, δ) (the one secret permutation is not counted).
TRUE_EPSILON = 9.78545641404089


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (Gaussian mechanism, μ = √epochs/σ)."""
    from dpaudit.training.accounting import gaussian_epsilon

    return gaussian_epsilon(common.EPOCHS**0.5 / common.declared_sigma(), common.DELTA)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    records = tf.data.Dataset.from_tensor_slices((x, y))
    once = records.shuffle(len(x), seed=seed, reshuffle_each_iteration=False)  # the bug
    train_ds = once.batch(common.BATCH)
    optimizer = common.dp_keras_sgd(sigma)
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
