"""Observers and injectors: the hooks run inside the compiled step, and the state they read.
In: a :class:`StepState` (one step's tensors with a leading trial axis) per step.
Out: per-trial records (observers, stacked over steps by the trainer) or injected gradients."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf


@dataclass
class StepState:
    """What an observer or injector may read in one step (tensors have a leading trial axis T).

    ``params`` are θ_i before the update; ``losses`` [T, N] per-example losses at θ_i;
    ``batch_mask`` [T, N] (1 = in this step's batch); ``clip_factors`` [T, N];
    ``tracked_grads`` clipped per-example gradients of the tracked rows, per parameter
    [T, R, ...]; ``tracked_norms`` their unclipped norms [T, R]; ``difference`` Δ per parameter
    [T, ...] (zeros if no difference is set); ``sensitivity`` [T] (LS_i or the global one);
    ``sigma`` [T]; ``noise`` the standard-normal draws ξ per parameter (the added noise is σ·ξ);
    ``clipped_sum`` per parameter (with the injections); ``trial_data`` per-trial constants given
    to ``train_trials``; ``privatized_sum`` the noisy sum Σ clip(g) + injections + σ·ξ per
    parameter (what Protocol 4 of Nasr et al. reveals); ``injected_weights`` [T] and
    ``injector_weights`` [T]: how much of the :class:`InjectedGradient` and of the
    :data:`Injector` output entered this step (0 where the gate, the start step or the Poisson
    draw kept it out).

    With gathered Poisson batches, ``losses`` and ``clip_factors`` over all N rows are computed
    only if an observer reads them (one extra forward and backward pass). An injector runs before
    the noise phase: it sees ``noise`` and ``privatized_sum`` empty and ``clipped_sum`` without
    its own contribution.

    With ``released`` coordinates (``train_trials(released=...)``, learning rate 0), ``clipped_sum``,
    ``noise`` and ``privatized_sum`` each hold one tensor ``[T, K]``: the K released flat
    coordinates in the order given, and ``released`` names them.
    """

    step: tf.Tensor
    params: list[tf.Tensor]
    losses: tf.Tensor
    batch_mask: tf.Tensor
    clip_factors: tf.Tensor
    tracked_grads: list[tf.Tensor]
    tracked_norms: tf.Tensor
    difference: list[tf.Tensor]
    sensitivity: tf.Tensor
    sigma: tf.Tensor
    noise: list[tf.Tensor]
    clipped_sum: list[tf.Tensor]
    trial_data: dict[str, tf.Tensor] = field(default_factory=dict)
    privatized_sum: list[tf.Tensor] = field(default_factory=list)
    injected_weights: tf.Tensor | None = None
    injector_weights: tf.Tensor | None = None
    released: tuple[int, ...] | None = None

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if isinstance(value, _Lazy):  # computed on first read, inside the same trace
            value = value.get()
            object.__setattr__(self, name, value)
        return value


class _Lazy:
    """A StepState field computed only when read (e.g. all-row losses under gathered batches)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self._value: Any = None
        self._done = False

    def get(self) -> Any:
        """The value, computed once."""
        if not self._done:
            self._value, self._done = self.fn(), True
        return self._value


Observer = Callable[[StepState], Mapping[str, tf.Tensor]]
Injector = Callable[[StepState], Sequence[tf.Tensor]]
"""A per-step hook run inside the compiled step: state → one tensor ``[T, *shape]`` per parameter.
The trainer clips each trial's output to C, multiplies it by the injector gate and, under Poisson
sampling, by a Bernoulli(q) draw per trial and step, and adds it to the clipped sum."""


def loss_observer(rows: Sequence[int]) -> Observer:
    """Observer recording the losses ``[T, len(rows)]`` of given example rows every step (e.g. a
    canary's loss, Nasr et al. §IV)."""
    idx = tf.constant(list(rows), dtype=tf.int32)

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        return {"": tf.gather(state.losses, idx, axis=1)}

    return observe


def privatized_sum_observer(coordinates: Sequence[int]) -> Observer:
    """Observer recording the privatized (noisy) sum g̃ = Σ clip(g) + injections + σ·ξ ``[T, K]`` at
    K flat coordinates of the parameter vector (parameters flattened in order and concatenated),
    every step — the view of Nasr et al.'s Protocol 4 at the canary coordinates (§IV-E/F), without
    keeping weight or gradient histories."""
    coords = tuple(int(c) for c in coordinates)
    if any(c < 0 for c in coords):
        raise ValueError("coordinates must be non-negative flat indices")

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        if state.released is not None:  # one [T, K] tensor at the released coordinates
            missing = [c for c in coords if c not in state.released]
            if missing:
                raise ValueError(
                    f"coordinates {missing} are not among the released ones {list(state.released)}"
                )
            positions = [state.released.index(c) for c in coords]
            return {"": tf.gather(state.privatized_sum[0], tf.constant(positions, tf.int32), axis=1)}
        sizes = [math.prod(p.shape[1:]) for p in state.privatized_sum]
        offsets = np.cumsum([0, *sizes])
        if coords and max(coords) >= offsets[-1]:
            raise ValueError(f"coordinate {max(coords)} is out of range ({offsets[-1]} parameters)")
        parts, order = [], []
        for i, g in enumerate(state.privatized_sum):
            local = [c - offsets[i] for c in coords if offsets[i] <= c < offsets[i + 1]]
            if local:
                flat = tf.reshape(g, [tf.shape(g)[0], -1])
                parts.append(tf.gather(flat, tf.constant(local, tf.int32), axis=1))
                order.extend(c for c in coords if offsets[i] <= c < offsets[i + 1])
        if not parts:
            return {"": tf.zeros([tf.shape(state.sigma)[0], 0])}
        values = tf.concat(parts, axis=1)
        perm = [order.index(c) for c in coords]  # back to the requested order
        return {"": tf.gather(values, tf.constant(perm, tf.int32), axis=1)}

    return observe
