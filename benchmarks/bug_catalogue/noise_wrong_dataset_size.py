"""Noise scale: the optimizer's σ was calibrated for a template's N = 60,000, not for the 1437 records
trained on."""

from __future__ import annotations

from tensorflow_privacy import DPKerasAdamOptimizer

from dpaudit.training_audit import Verdict

from . import common

NAME = "noise_wrong_dataset_size"
BUG_CLASS = "noise scale"
DESCRIPTION = "DPKerasAdamOptimizer, σ calibrated for a template's N = 60,000 (q = 64/60000): 3× too little"
# The σ the template's config gives: calibrate_noise_multiplier(2, 1e-5, 64/60000, 230, "pld") (9 s).
TEMPLATE_NOISE = 0.5299928695230279
# PLD's ε of (TEMPLATE_NOISE, q = 64/1437, T): common.epsilon(TEMPLATE_NOISE).
TRUE_EPSILON = 20.564213165766404


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(TEMPLATE_NOISE)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    train_ds = common.shuffled_batches(x, y, seed)
    optimizer = DPKerasAdamOptimizer(
        l2_norm_clip=common.CLIP, noise_multiplier=TEMPLATE_NOISE, num_microbatches=None,  # the bug
        learning_rate=0.01,
    )
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit: the claim, computed correctly for N = 1437
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
