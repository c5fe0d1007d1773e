"""What a trained model's logits say about each query: per-example losses and confidences.
In: logits ``[..., n, C]`` (or ``[..., C]``) of released models and the queries' true labels.
Out: cross-entropy and logit loss per query, or a confidence (logit-scaled, hinge) per query.

The losses stage runs the trained models on their queries and stores these numbers; the attacks
(:mod:`dpaudit.attacks.membership`, :mod:`dpaudit.attacks.lira`) score membership from them. They
live with the trainer so that editing an attack never recomputes the losses. Everything is computed
from the logits in float64 with a stable logsumexp, so the values stay exact where float32
probabilities round to 1.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

__all__ = ["hinge_confidence", "logit_scaled_confidence", "losses_from_logits"]


def losses_from_logits(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cross-entropy and Negoescu's logit loss (footnote 1) of softmax outputs, from the logits.

    With logits z and true class y, p_y = softmax(z)_y gives cross-entropy −log p_y =
    logsumexp(z) − z_y and logit loss −(log p_y − log(1 − p_y)) = logsumexp_{j≠y}(z_j) − z_y.
    Working on logits in float64 (``scipy.special.logsumexp``) keeps both exact where float32
    probabilities round to 1 and a probability-based logit loss would hit its clipping floor.
    ``logits`` is ``[..., n, C]`` with ``C >= 2``; ``labels`` is ``[n]``.
    """
    z = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels)
    if z.ndim < 2 or z.shape[-1] < 2:
        raise ValueError(f"logits must be [..., n, C] with C >= 2, got shape {z.shape}")
    n, num_classes = z.shape[-2], z.shape[-1]
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},) to match logits {z.shape}, got {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels must lie in 0..{num_classes - 1}, got {labels.min()}..{labels.max()}")
    onehot = np.arange(num_classes) == labels[:, None]  # [n, C]
    z_true = np.sum(np.where(onehot, z, 0.0), axis=-1)
    ce = logsumexp(z, axis=-1) - z_true
    others = logsumexp(np.where(onehot, -np.inf, z), axis=-1)
    return ce, others - z_true


def _logits_and_labels(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels)
    if z.ndim < 1 or z.shape[-1] < 2:
        raise ValueError(f"logits must have a class axis of size >= 2 last, got shape {z.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels must be integers, got dtype {y.dtype}")
    if y.shape != z.shape[:-1]:
        try:
            y = np.broadcast_to(y, z.shape[:-1])
        except ValueError as error:
            raise ValueError(
                f"labels of shape {y.shape} do not match logits of shape {z.shape} (expected {z.shape[:-1]})"
            ) from error
    num_classes = z.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"labels must lie in 0..{num_classes - 1}, got range {y.min()}..{y.max()}")
    return z, y


def _split_true_class(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The true-class logit z_y and the other logits with z_y replaced by −inf."""
    z, y = _logits_and_labels(logits, labels)
    is_true = np.arange(z.shape[-1]) == y[..., None]
    true_logit = np.take_along_axis(z, y[..., None], axis=-1)[..., 0]
    others = np.where(is_true, -np.inf, z)
    return true_logit, others


def logit_scaled_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Logit-scaled confidence φ = z_y − logsumexp_{j≠y} z_j (Carlini et al. 2022, logit scaling).

    Equal to log(p_y / (1 − p_y)) for p = softmax(z), but computed from the logits with a stable
    logsumexp, so it stays finite and exact when p_y rounds to 1 in floating point. ``logits`` is
    ``[..., C]``; ``labels`` (integers in ``0..C−1``) has the leading shape ``[...]`` or broadcasts
    to it (e.g. one label per canary, ``[K, 1]`` against logits ``[K, M, C]``). Returns ``[...]``.
    """
    true_logit, others = _split_true_class(logits, labels)
    return true_logit - logsumexp(others, axis=-1)


def hinge_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Hinge confidence z_y − max_{j≠y} z_j (the hinge alternative to logit scaling).

    Shapes as in :func:`logit_scaled_confidence`.
    """
    true_logit, others = _split_true_class(logits, labels)
    return true_logit - np.max(others, axis=-1)
