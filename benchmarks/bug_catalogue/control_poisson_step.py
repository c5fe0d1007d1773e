"""Control: a correct hand-written ``train_step`` fed by a Poisson-sampling loader (what the accountant
assumes)."""

from __future__ import annotations

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_poisson_step"
BUG_CLASS = "control"
DESCRIPTION = "hand-written train_step (per-example clip, noise σC on the sum), Poisson batches at q"
# Exactly the accounted mechanism: PLD's ε of (σ, q = 64/1437, T = 230) = 2.
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.poisson_batches(x, y, common.SAMPLING_RATE, common.STEPS_PER_EPOCH, seed)
    model = common.dp_model(seed, sigma)

    audit = common.declared_audit(seed, epochs, canaries, sampling="poisson")  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
