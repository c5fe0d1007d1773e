"""Phase 2a, RelaxLoss: train towards a target loss level α instead of towards zero.
In: model, rows X, labels y, membership mask ``[T, N]``, :class:`RelaxLossConfig`, seed.
Out: final parameters ``[T, ...]`` per tensor.

Chen, Yu, Fritz, "RelaxLoss: Defending Membership Inference Attacks without Losing Utility", ICLR 2022
(:data:`REFERENCE`), Algorithm 1. Per minibatch with mean cross-entropy L:

* L ≥ α: gradient descent on L;
* L < α in an even epoch: gradient ascent on L (descent on −L), pushing the loss back up to α;
* L < α in an odd epoch: posterior flattening, descent on the cross-entropy against a soft target that
  keeps the model's own (stop-gradient) probability p_y of the true class and spreads 1 − p_y evenly
  over the other C − 1 classes. This does not change the true class's target but flattens the
  non-true posteriors, so members' and non-members' output distributions look alike.

The branch is taken per trial (each trial's own batch mean), vectorised with ``tf.where``. Epochs are
``step // round(1/q)``. The authors' code additionally clips p_y to an upper confidence level in the
flattening target (e.g. 0.3 for Purchase); Algorithm 1 does not, and neither does this module.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dpaudit.config import require
from dpaudit.training.heuristics.trainer import Loss, LossContext, Schedule, train_minibatch
from dpaudit.training.models import Model

__all__ = ["REFERENCE", "RelaxLossConfig", "flattened_targets", "relaxloss_loss", "relaxloss_objective",
           "train_relaxloss"]  # fmt: skip

REFERENCE = (
    "D. Chen, N. Yu, M. Fritz. RelaxLoss: Defending Membership Inference Attacks without Losing "
    "Utility. ICLR 2022, Algorithm 1."
)


@dataclass(frozen=True, kw_only=True)
class RelaxLossConfig(Schedule):
    """RelaxLoss hyper-parameters: target loss ``alpha`` (> 0; larger is more private and less
    accurate), SGD ``learning_rate``, ``epochs`` (steps = ⌈epochs / q⌉) and ``sampling_rate`` q (batch
    size q·mean |D_t|). The defaults are the digits setting tuned by ``benchmarks/tune_heuristics.py``.

    Training stops in the phase of its last epoch: with an odd number of epochs that is an even,
    gradient-ascent epoch, and the released model sits at a raised loss (on digits, 15 epochs at α 0.5
    measured test accuracy 0.72); prefer an even number of epochs, ending on posterior flattening."""

    alpha: float = 0.6
    learning_rate: float = 0.5
    epochs: float = 60.0

    def __post_init__(self) -> None:
        super().__post_init__()  # learning_rate, epochs, sampling_rate
        require(math.isfinite(self.alpha) and self.alpha > 0, "alpha", self.alpha, "must be finite and > 0")


def flattened_targets(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Posterior-flattening targets ``[..., C]``: the (stop-gradient) softmax probability p_y of the true
    class at y and (1 − p_y) / (C − 1) at every other class."""
    C = int(logits.shape[-1])
    probs = tf.stop_gradient(tf.nn.softmax(logits))
    onehot = tf.one_hot(tf.cast(labels, tf.int32), C, dtype=logits.dtype)
    p_y = tf.reduce_sum(probs * onehot, axis=-1, keepdims=True)
    return onehot * p_y + (1.0 - onehot) * (1.0 - p_y) / (C - 1)


def relaxloss_objective(logits: tf.Tensor, labels: tf.Tensor, epoch: tf.Tensor, alpha: float) -> tf.Tensor:
    """The per-trial objective ``[T]`` that Algorithm 1 descends on, for logits ``[T, B, C]`` and labels
    ``[T, B]``: L if L ≥ α; −L in even epochs and the flattened-target CE in odd epochs otherwise."""
    log_probs = tf.nn.log_softmax(logits)
    onehot = tf.one_hot(tf.cast(labels, tf.int32), int(logits.shape[-1]), dtype=logits.dtype)
    ce = tf.reduce_mean(-tf.reduce_sum(onehot * log_probs, axis=-1), axis=-1)
    flat = tf.reduce_mean(-tf.reduce_sum(flattened_targets(logits, labels) * log_probs, axis=-1), axis=-1)
    even = tf.equal(tf.math.floormod(tf.cast(epoch, tf.int64), 2), 0)
    below = tf.where(even, -ce, flat)
    return tf.where(ce >= alpha, ce, below)


def relaxloss_loss(alpha: float) -> Loss:
    """The RelaxLoss objective as a :func:`~dpaudit.training.heuristics.trainer.train_minibatch` loss."""

    def loss(logits: tf.Tensor, labels: tf.Tensor, context: LossContext) -> tf.Tensor:
        return relaxloss_objective(logits, labels, context.epoch, alpha)

    return loss


def train_relaxloss(
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: RelaxLossConfig,
    seed: int = 0,
    desc: str = "train relaxloss",
    *,
    init_params: Sequence[np.ndarray] | None = None,
    chunk_size: int | None = None,
) -> list[np.ndarray]:
    """Train ``T = len(member_mask)`` RelaxLoss models, trial t on its members of ``X`` (labels ``y``)."""
    return train_minibatch(
        model, X, np.asarray(y, np.int32), member_mask, relaxloss_loss(cfg.alpha),
        learning_rate=cfg.learning_rate, steps=cfg.steps, sampling_rate=cfg.sampling_rate, seed=seed,
        desc=desc, init_params=init_params, chunk_size=chunk_size,
    )  # fmt: skip
