"""Model helpers shared by experiments: the trainer's model for a dataset, and batched logits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from dpaudit.training.models import Model

__all__ = ["build_model", "neural_logits"]


def build_model(
    dataset: str, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] | None
) -> Model:
    """The shared trainer's model for ``dataset`` (MLP, or CNN for mnist / cifar10)."""
    from dpaudit.training.models import model_for_dataset

    return model_for_dataset(
        dataset, tuple(input_shape), num_classes, hidden=None if hidden is None else list(hidden)
    )


def neural_logits(
    model: Model, params: Sequence[np.ndarray], X: np.ndarray, budget_floats: float = 5e7
) -> np.ndarray:
    """Logits ``[T, N, C]`` (float32) of every trial's model on ``X``.

    Rows go through in batches sized so that all trials' activations stay within about
    ``budget_floats`` floats (CNNs on image data would otherwise need gigabytes at once).
    """
    import tensorflow as tf

    tensors = [tf.convert_to_tensor(p, dtype=tf.float32) for p in params]
    trials = int(tensors[0].shape[0])
    batch = max(1, int(budget_floats // max(1, trials * model.activation_size())))
    outs = []
    for start in range(0, len(X), batch):
        logits, _ = model.forward(tensors, tf.convert_to_tensor(X[start : start + batch], dtype=tf.float32))
        outs.append(logits.numpy())
    if not outs:
        return np.zeros((trials, 0, model.num_classes), dtype=np.float32)
    return np.concatenate(outs, axis=1)
