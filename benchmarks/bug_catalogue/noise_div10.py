"""Noise scale: the optimizer gets σ/10 (a debugging run's value left in) while the claim keeps σ."""

from __future__ import annotations

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_div10"
BUG_CLASS = "noise scale"
DESCRIPTION = "DPKerasSGDOptimizer(noise_multiplier=σ/10): a debugging value left in; the claim keeps σ"
# PLD's ε of (σ/10, q, T): common.epsilon(σ / 10) (about 7 s to compute).
TRUE_EPSILON = 437.5922569703808


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma() / 10)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    debug_noise = sigma / 10  # "quick runs with little noise while tuning the learning rate"
    train_ds = common.shuffled_batches(x, y, seed)
    optimizer = common.dp_keras_sgd(debug_noise)  # the bug
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
