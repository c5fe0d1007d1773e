"""Parameter pieces that several experiments share, validated in one place.

Every experiment reads its own ``<experiment>.train`` / ``.bounds`` section of params.yaml, with its
own defaults, but the knobs below mean the same thing wherever they appear, so one check (and one
message, naming the full key through :func:`dpaudit.config.from_mapping`) covers them all:

- :class:`TrainingKnobs` (mixin of a ``train`` dataclass): ``delta`` ∈ (0, 1) of the audited
  (ε, δ)-DP claim; DP-SGD's Poisson ``sampling_rate`` q ∈ (0, 1], clipping norm ``clip_norm`` C > 0 and
  ``learning_rate`` η > 0; the trainer's ``chunk_size`` (trials per compiled chunk) ≥ 1. A knob that
  an experiment lets be ``null`` says what null means in :attr:`TrainingKnobs.NULL_MEANS`.
- :class:`LevelParams` (base of a ``bounds``/``attack`` dataclass) or :func:`check_confidence`:
  ``confidence`` ∈ (0, 1), the joint level of every ε lower bound the stage reports.

Kept apart on purpose, because the same name means different things: ``epochs`` (whole passes of
the identifiability trainer, an integer ≤ 10⁶; elsewhere a real number of expected passes at rate q,
bounded by the number of steps it implies), ``steps`` (instantiation needs T ≥ 2 for its warm-up,
onerun allows T = 1), ``seed`` (each experiment derives its own streams from it) and the declared
training of :mod:`.target` (what a third party claims, not what dpaudit runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from dpaudit.config import require

__all__ = ["TRAINING_KNOBS", "LevelParams", "TrainingKnobs", "check_confidence", "check_training_knobs"]

#: The shared knobs: key → (condition on a non-null value, expectation in the error message).
TRAINING_KNOBS: Mapping[str, tuple[Callable[[Any], bool], str]] = {
    "delta": (lambda v: 0 < v < 1, "lie in (0, 1)"),
    "sampling_rate": (lambda v: 0 < v <= 1, "lie in (0, 1]"),
    "clip_norm": (lambda v: v > 0, "be > 0"),
    "learning_rate": (lambda v: v > 0, "be > 0"),
    "chunk_size": (lambda v: v >= 1, "be >= 1"),
}


def check_training_knobs(params: object, null_means: Mapping[str, str]) -> None:
    """Check every shared knob that ``params`` has; ``null_means`` names the knobs that may be null
    and what null stands for (the message says it)."""
    for key, (holds, expectation) in TRAINING_KNOBS.items():
        if not hasattr(params, key):
            continue
        value = getattr(params, key)
        if key in null_means:
            require(
                value is None or holds(value),
                key,
                value,
                f"must be null ({null_means[key]}) or {expectation}",
            )
        else:
            require(value is not None and holds(value), key, value, f"must {expectation}")


class TrainingKnobs:
    """Mixin of a ``train`` dataclass: checks its shared knobs (:data:`TRAINING_KNOBS`) before the
    subclass's own ``__post_init__`` checks (which call ``super().__post_init__()`` first)."""

    #: Knobs this experiment lets be null, and what null means there.
    NULL_MEANS: ClassVar[Mapping[str, str]] = {}

    def __post_init__(self) -> None:
        check_training_knobs(self, self.NULL_MEANS)


@dataclass(frozen=True)
class LevelParams:
    """Base of a ``bounds`` (or ``attack``) dataclass: the joint ``confidence`` of every reported ε
    lower bound (and the two-sided level of every interval)."""

    confidence: float = 0.95

    def __post_init__(self) -> None:
        check_confidence(self.confidence)


def check_confidence(confidence: float) -> None:
    """``confidence`` ∈ (0, 1); for dataclasses that keep their own field order (membership's
    ``attack``, whose first field is the FPR)."""
    require(0 < confidence < 1, "confidence", confidence, "must lie in (0, 1)")
