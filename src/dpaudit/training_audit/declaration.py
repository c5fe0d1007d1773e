"""What the user's training code claims to be: DP-SGD with (σ, C, q or B, N, T) and the ε it promises.

A declaration is the yardstick of an audit of someone's DP code. It is taken from the user's own
statement (the numbers their privacy claim was computed from), never read from the optimizer they
built: a wrong noise multiplier in the code is exactly the kind of bug the audit must see.

``sampling`` says how the loader is declared to form batches: ``"poisson"`` (every record joins
each step independently with probability q = B/N, what DP-SGD's accountants assume) or
``"shuffle"`` (each epoch is a random permutation cut into batches of B, what most Keras code and TF
Privacy's tutorials do). The claim is always computed for Poisson sampling at q, the usual practice;
an audit of a ``shuffle`` run says that the claim is not proven for that sampling (a warning, not a
violation).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

__all__ = ["SAMPLINGS", "DeclaredDPSGD"]

SAMPLINGS = ("poisson", "shuffle")
ACCOUNTANTS = ("pld", "rdp")


@dataclass(frozen=True)
class DeclaredDPSGD:
    """The DP-SGD a training script declares: noise multiplier σ, clip norm C, batch size B
    (the expected size under Poisson sampling), dataset size N, steps T (or epochs: T = epochs·⌈N/B⌉),
    δ, and the claimed ε (``epsilon``; ``None``: the ``accountant``'s ε of the declared mechanism)."""

    noise_multiplier: float
    clip_norm: float
    batch_size: int
    dataset_size: int
    epochs: int | None = None
    steps: int | None = None
    delta: float = 1e-5
    sampling: str = "poisson"
    epsilon: float | None = None
    accountant: str = "pld"

    def __post_init__(self) -> None:
        def bad(key: str, value: object, why: str) -> ValueError:
            return ValueError(f"DeclaredDPSGD.{key}={value!r}: {why}")

        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier > 0):
            raise bad("noise_multiplier", self.noise_multiplier, "must be a finite number > 0")
        if not (math.isfinite(self.clip_norm) and self.clip_norm > 0):
            raise bad("clip_norm", self.clip_norm, "must be a finite number > 0")
        if int(self.dataset_size) != self.dataset_size or self.dataset_size < 1:
            raise bad("dataset_size", self.dataset_size, "must be a whole number >= 1")
        if int(self.batch_size) != self.batch_size or not 1 <= self.batch_size <= self.dataset_size:
            raise bad(
                "batch_size",
                self.batch_size,
                f"must be a whole number in [1, dataset_size={self.dataset_size}]",
            )
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("DeclaredDPSGD: give exactly one of epochs and steps")
        for key in ("epochs", "steps"):
            value = getattr(self, key)
            if value is not None and (int(value) != value or value < 1):
                raise bad(key, value, "must be a whole number >= 1")
        if not 0.0 < self.delta < 1.0:
            raise bad("delta", self.delta, "must lie in (0, 1)")
        if self.sampling not in SAMPLINGS:
            raise bad("sampling", self.sampling, f"must be one of {SAMPLINGS}")
        if self.accountant not in ACCOUNTANTS:
            raise bad("accountant", self.accountant, f"must be one of {ACCOUNTANTS}")
        if self.epsilon is not None and not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise bad("epsilon", self.epsilon, "must be a finite number > 0 (or None: the accountant's)")

    @property
    def sampling_rate(self) -> float:
        """q = B / N: each record's probability of joining a step."""
        return self.batch_size / self.dataset_size

    @property
    def steps_per_epoch(self) -> int:
        """⌈N / B⌉: the batches of one pass over the data (the last one may be smaller)."""
        return math.ceil(self.dataset_size / self.batch_size)

    @property
    def total_steps(self) -> int:
        """T: ``steps``, or ``epochs`` · ⌈N / B⌉."""
        return int(self.steps) if self.steps is not None else int(self.epochs) * self.steps_per_epoch

    @functools.cached_property
    def claimed_epsilon(self) -> float:
        """The ε the training claims at ``delta``: ``epsilon``, or the accountant's ε for Poisson-sampled
        Gaussian DP-SGD with (σ, q, T) (dp_accounting, through :mod:`dpaudit.training.accounting`;
        computed once per declaration)."""
        if self.epsilon is not None:
            return float(self.epsilon)
        from dpaudit.training.accounting import compute_epsilon

        return compute_epsilon(
            self.noise_multiplier, self.sampling_rate, self.total_steps, self.delta, self.accountant
        )

    def describe(self) -> str:
        """One line: the mechanism and the claim."""
        return (
            f"DP-SGD σ={self.noise_multiplier:g}, C={self.clip_norm:g}, {self.sampling} batches of "
            f"{self.batch_size} from N={self.dataset_size} (q={self.sampling_rate:.4g}), "
            f"T={self.total_steps} "
            f"steps: claims ε={self.claimed_epsilon:.3g} at δ={self.delta:g}"
        )
