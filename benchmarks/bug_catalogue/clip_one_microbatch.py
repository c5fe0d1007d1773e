"""Clipping: TF Privacy's optimizer with ``num_microbatches=1`` clips the batch's mean gradient as one
microbatch."""

from __future__ import annotations

from dpaudit.training_audit import Verdict

from . import common

NAME = "clip_one_microbatch"
BUG_CLASS = "clipping"
DESCRIPTION = "DPKerasSGDOptimizer(num_microbatches=1): the batch mean is clipped once, noise σC on it"
# One record moves the clipped batch mean by up to 2C against noise σC: at most PLD's ε of (σ/2, q, T),
# common.epsilon(σ / 2) (an upper bound: the per-record sensitivity is 2C only in the worst case).
TRUE_EPSILON = 7.2285035948882035


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma() / 2)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    optimizer = common.dp_keras_sgd(sigma, num_microbatches=1)  # the bug: "1 = none"
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
