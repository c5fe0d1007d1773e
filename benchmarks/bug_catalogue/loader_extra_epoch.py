"""Data loader: one more "polishing" epoch after the declared ones, in a second ``fit``; the claim counts
10."""

from __future__ import annotations

from dpaudit.training_audit import Verdict

from . import common

NAME = "loader_extra_epoch"
BUG_CLASS = "data loader"
DESCRIPTION = "a second model.fit(epochs=1) to polish the model: T = 253 steps where the claim composed 230"
# PLD's ε of (σ, q, T + 23): common.epsilon(σ, steps=253).
TRUE_EPSILON = 2.0999642481228427


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma(), steps=common.STEPS + common.STEPS_PER_EPOCH)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    optimizer = common.dp_keras_sgd(sigma)
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    model.fit(train_ds, epochs=1, verbose=0, callbacks=[audit.callback()])  # the bug (audit's callback too)
    return audit.verdict()  # audit
