"""Data loader: 300 records of the hardest classes appended again ("oversampling"), so they are seen twice
an epoch."""

from __future__ import annotations

import numpy as np

from dpaudit.training_audit import Verdict

from . import common

NAME = "loader_oversample_subset"
BUG_CLASS = "data loader"
DESCRIPTION = "loader appends 300 records of classes 1, 8, 9 again: they are in 2 of 28 batches an epoch"
# A duplicated record: two copies among N' = 1737, 28 steps an epoch, T = 280; about PLD's ε of
# (σ, 2·64/1737, 280), common.epsilon(σ, 128/1737, 280) (approximate: steps holding both copies add more).
TRUE_EPSILON = 3.8708981867840317
EXTRA = 300


def true_epsilon() -> float:
    """TRUE_EPSILON recomputed (PLD, the approximation above)."""
    n = common.N_TRAIN + EXTRA
    return common.epsilon(common.declared_sigma(), 2 * common.BATCH / n, 10 * -(-n // common.BATCH))


def run(seed: int, epochs: int = common.EPOCHS, canaries: int = 500) -> Verdict:
    """Train and audit once; the ``# audit`` lines are the audit's only additions."""
    x, y = common.digits()
    sigma = common.declared_sigma()
    hard = np.flatnonzero(np.isin(y, (1, 8, 9)))[:EXTRA]  # the bug: the same people twice
    x_train, y_train = np.concatenate([x, x[hard]]), np.concatenate([y, y[hard]])
    train_ds = common.shuffled_batches(x_train, y_train, seed)
    optimizer = common.dp_keras_sgd(sigma)
    model = common.tfp_model(seed, optimizer)

    audit = common.declared_audit(seed, epochs, canaries)  # audit
    train_ds = audit.wrap(train_ds)  # audit
    model.fit(train_ds, epochs=epochs, verbose=0, callbacks=[audit.callback()])  # audit
    return audit.verdict()  # audit
