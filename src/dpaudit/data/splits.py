"""The seeded split of a population into D, the pool U \\ D and the evaluation set.

One pure function that both the built-in datasets (:mod:`dpaudit.data.prepare`) and the user's own
(:mod:`dpaudit.data.custom`) draw with, in a module of its own so that neither imports the other for it.
"""

from __future__ import annotations

import numpy as np

from dpaudit.config import require


def draw_split(
    n: int, train_size: int, eval_size: int, seed: int, where: str = "data.prepare"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices ``(train, pool, eval)`` of a population of ``n`` rows: disjoint, sorted, covering ``0..n-1``.

    One permutation from ``numpy.random.default_rng(seed)``: its first ``train_size`` entries are D,
    the next ``eval_size`` the evaluation set, the rest the pool U \\ D (minus the evaluation set).
    Sizes that do not fit are a :class:`ParamsError` naming ``<where>.train_size``.
    """
    require(
        train_size + eval_size <= n,
        f"{where}.train_size",
        train_size,
        f"train_size + eval_size = {train_size} + {eval_size} exceeds the population of {n} rows",
    )
    order = np.random.default_rng(seed).permutation(n)
    train = np.sort(order[:train_size])
    evaluation = np.sort(order[train_size : train_size + eval_size])
    pool = np.sort(order[train_size + eval_size :])
    return train.astype(np.int64), pool.astype(np.int64), evaluation.astype(np.int64)
