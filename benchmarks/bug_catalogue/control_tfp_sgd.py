"""Control: TF Privacy's DPKerasSGDOptimizer on shuffled fixed-size batches, as its tutorials train."""

from __future__ import annotations

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_tfp_sgd"
BUG_CLASS = "control"
DESCRIPTION = "TF Privacy DPKerasSGDOptimizer on shuffled batches of 64, σ and C as declared"
# The claim: PLD's ε of the declared (σ, q = 64/1437, T = 230) is 2, computed for Poisson sampling as
# usual for shuffled batches (the verdict warns that shuffling is not what the claim accounted).
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


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
    return audit.verdict()  # audit
