"""What every cell of the instantiation game shares (Nasr et al. 2021, :data:`dpaudit.references.NASR_2021`):
the :class:`Game` (model, D, population pool, evaluation rows, DP-SGD's knobs) and the helpers that
every crafter uses to read a view off the trained trials (per-trial losses, test accuracy, the
per-step loss observer, flat ↔ per-tensor parameters).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dpaudit.training.dpsgd import DPSGDConfig, Observer, StepState
from dpaudit.training.models import Model

__all__ = ["Game", "per_trial_losses", "point_loss_observer", "test_accuracy"]


@dataclass(frozen=True)
class Game:
    """What every cell shares: the model, D, the population pool, the evaluation rows, DP-SGD's knobs.

    ``lo``/``hi`` are the per-feature input range (the crafters keep inputs inside it).
    """

    model: Model
    X_d: np.ndarray
    y_d: np.ndarray
    X_pool: np.ndarray
    y_pool: np.ndarray
    X_eval: np.ndarray
    y_eval: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sampling_rate: float
    steps: int
    clip_norm: float
    learning_rate: float
    chunk_size: int | None = None

    def config(
        self, noise_multiplier: float, *, steps: int | None = None, learning_rate: float | None = None
    ) -> DPSGDConfig:
        """DP-SGD of this game at noise z (optionally other steps / learning rate)."""
        return DPSGDConfig(
            clip_norm=self.clip_norm,
            noise_multiplier=float(noise_multiplier),
            learning_rate=self.learning_rate if learning_rate is None else float(learning_rate),
            steps=self.steps if steps is None else int(steps),
            sampling_rate=self.sampling_rate,
        )


# ------------------------------------------------------------------------------------------ helpers


def per_trial_losses(model: Model, params: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ℓ(θ_t; x_{t,k}, y_{t,k}) ``[T, K]`` for per-trial inputs ``X [T, K, ...]`` and labels ``[T, K]``."""
    T = len(params[0])
    out = np.empty((T, X.shape[1]), dtype=np.float64)
    step = 2048
    for t0 in range(0, T, step):
        ps = [tf.constant(np.asarray(p[t0 : t0 + step], np.float32)) for p in params]
        logits, _ = model.forward(ps, tf.constant(np.asarray(X[t0 : t0 + step], np.float32)), shared=False)
        out[t0 : t0 + step] = model.example_losses(logits, tf.constant(y[t0 : t0 + step])).numpy()
    return out


def test_accuracy(model: Model, params: Sequence[np.ndarray], X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Accuracy ``[T]`` of every trial's final model on the evaluation rows."""
    probs = model.predict_proba(params, X)
    return np.mean(np.argmax(probs, axis=-1) == np.asarray(y)[None, :], axis=1)


def point_loss_observer(model: Model, x: np.ndarray, y: int) -> Observer:
    """Observer of ℓ(θ_i; x, y) ``[T]`` at every step (the view of Protocols 2–3 on one point, §IV-C),
    computed on that point alone, so that gathered Poisson batches stay cheap."""
    xt = tf.constant(np.asarray(x, np.float32)[None])
    yt = tf.constant([int(y)], tf.int32)

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        logits, _ = model.forward(state.params, xt)
        return {"": model.example_losses(logits, yt)[:, 0]}

    return observe


def _split_flat(model: Model, flat: np.ndarray) -> list[np.ndarray]:
    """A flat ``[..., P]`` parameter vector as one array per parameter tensor ``[..., *shape]``."""
    lead = flat.shape[:-1]
    out, start = [], 0
    for shape in model.param_shapes:
        size = math.prod(shape)
        out.append(np.asarray(flat[..., start : start + size], np.float32).reshape(*lead, *shape))
        start += size
    return out


def _flat(params: Sequence[np.ndarray]) -> np.ndarray:
    """Parameters ``[T, ...]`` per tensor as one ``[T, P]`` array (the observer's flat order)."""
    return np.concatenate([np.asarray(p).reshape(len(p), -1) for p in params], axis=1)
