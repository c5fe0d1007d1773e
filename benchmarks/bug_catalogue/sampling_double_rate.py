"""Sampling: the Poisson loader samples at 128/N (batch raised "for speed") while the claim was computed
for 64/N."""

from __future__ import annotations

from dpaudit.training_audit import Verdict

from . import common

NAME = "sampling_double_rate"
BUG_CLASS = "sampling"
DESCRIPTION = "Poisson loader at q = 128/1437 for the declared 230 steps; the claim is for q = 64/1437"
# PLD's ε of (σ, 2q, T): common.epsilon(σ, 2q).
TRUE_EPSILON = 4.311006459711059
LOADER_BATCH = 128  # the bug: the loader's batch size, changed without recomputing the claim


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD)."""
    return common.epsilon(common.declared_sigma(), LOADER_BATCH / common.N_TRAIN)


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    train_ds = common.poisson_batches(x, y, LOADER_BATCH / len(x), common.STEPS_PER_EPOCH, seed)
    model = common.dp_model(seed, sigma)
    model.expected_batch = LOADER_BATCH

    audit = common.declared_audit(seed, epochs, canaries, sampling="poisson")  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
