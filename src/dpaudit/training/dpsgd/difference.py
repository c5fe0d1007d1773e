"""Observer of the noisy update's projection on the neighbours' difference (one step, per trial).
In: a :class:`~dpaudit.training.dpsgd.observers.StepState` with the tracked difference Δ and noise ξ.
Out: ``dot`` ⟨ξ, Δ⟩, ``dd`` ‖Δ‖² and ``sigma`` σ per trial and step (three scalars, no gradients).

Δ = μ_D − μ_D′ is the trainer's tracked difference of the clipped batch gradients of two
neighbouring datasets. These three scalars are all the differential-identifiability adversary of
Bernau et al. (Algorithm 1, Lemma 1) needs: :mod:`dpaudit.attacks.di` turns them into its
likelihood ratios. They are recorded while training, so the observer belongs to the trainer and an
edit of the attack's math never retrains.
"""

from __future__ import annotations

import tensorflow as tf

from dpaudit.training.dpsgd.observers import Observer, StepState

__all__ = ["di_observer"]


def di_observer() -> Observer:
    """Trainer observer recording per trial and step: ``dot`` ⟨ξ, Δ⟩, ``dd`` ‖Δ‖² and ``sigma``."""

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        dot = None
        dd = None
        for xi, d in zip(state.noise, state.difference, strict=True):
            axes = list(range(1, len(d.shape)))
            a = tf.reduce_sum(xi * d, axis=axes)
            b = tf.reduce_sum(tf.square(d), axis=axes)
            dot = a if dot is None else dot + a
            dd = b if dd is None else dd + b
        return {"dot": dot, "dd": dd, "sigma": state.sigma}

    return observe
