"""Control: TF Privacy's DPKerasAdamOptimizer on shuffled fixed-size batches (Adam on the privatized
gradient)."""

from __future__ import annotations

from tensorflow_privacy import DPKerasAdamOptimizer

from dpaudit.training_audit import Verdict

from . import common

NAME = "control_tfp_adam"
BUG_CLASS = "control"
DESCRIPTION = "TF Privacy DPKerasAdamOptimizer on shuffled batches of 64, σ and C as declared"
# The claim: PLD's ε of the declared (σ, q, T) is 2 (Adam post-processes the privatized gradient).
TRUE_EPSILON = 2.0


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma())


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.shuffled_batches(x, y, seed)
    optimizer = DPKerasAdamOptimizer(
        l2_norm_clip=common.CLIP, noise_multiplier=sigma, num_microbatches=None, learning_rate=0.01
    )
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
