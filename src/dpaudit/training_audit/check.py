"""The outcome of one conformance check of a user's DP-SGD run (shared by every check module).

Every check ends in one of four statuses, and a verdict reports each under its own heading: a check
that did not run is never counted as passed (it could not have seen the bugs it exists to catch;
:data:`CATCHES` names them, so a verdict can say what stayed unseen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "CATCHES",
    "NOT_APPLICABLE",
    "PASSED",
    "REJECTED",
    "SKIPPED",
    "STATUSES",
    "TAP",
    "CheckResult",
    "unseen",
]

PASSED, REJECTED, SKIPPED, NOT_APPLICABLE = "passed", "rejected", "skipped", "not applicable"
STATUSES = (PASSED, REJECTED, SKIPPED, NOT_APPLICABLE)
#: The check that the gradient handed to ``apply_gradients`` is the released update (the tap's assumption).
TAP = "tap_consistency"

#: The bug classes each check exists to catch: what stays unseen when it is skipped.
CATCHES: dict[str, str] = {
    "steps": "extra epochs or steps",
    "records_per_epoch": "records fed more than once per pass over the data (duplicates, oversampling)",
    "batch_size_mean": "a sampling rate other than the declared q",
    "fixed_size_batches": "fixed-size batches under a Poisson accountant",
    "repeated_batches": "batches fixed once and replayed",
    "noise_present": "steps without noise",
    "noise_floor": "noise skipped or shrunk on some steps",
    "noise_reuse": "the same noise reused at several steps",
    "signal_to_noise_high": "noise below σC or clipping above C (throughout or in part of training)",
    "signal_to_noise_low": "clipping of the batch instead of each example, microbatches of several records",
    "clipped_sum_residual": "layers left unclipped, per-layer or partial clipping, clipping of the batch, "
    "another clip norm, noise missing from some parameters",
    "tap_consistency": "noise or changes inside the optimizer that the gradient passed to apply_gradients "
    "does not show",
}


def unseen(name: str) -> str:
    """What a skipped check ``name`` leaves unseen (its bug classes)."""
    return CATCHES.get(name, "the bugs this check exists to catch")


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. ``kind``: ``"mismatch"`` (a rejection means the code does not match its
    declaration) or ``"warning"``; ``rejected``: whether it fired; ``level``: its false-alarm
    probability under the declared DP-SGD (0.0 for deterministic checks); ``message``: what was seen,
    what was expected, what it means. ``status`` (default from ``rejected``): one of :data:`STATUSES`;
    a ``"skipped"`` or ``"not applicable"`` check never fires and its ``message`` says why."""

    name: str
    kind: str
    rejected: bool
    level: float
    p_value: float | None
    statistic: float
    message: str
    status: str = ""

    def __post_init__(self) -> None:
        status = self.status or (REJECTED if self.rejected else PASSED)
        if status not in STATUSES:
            raise ValueError(f"CheckResult.status={self.status!r}: must be one of {STATUSES}")
        if (status == REJECTED) != bool(self.rejected):
            raise ValueError(
                f"CheckResult {self.name!r}: rejected={self.rejected!r} contradicts status {status!r}"
            )
        object.__setattr__(self, "status", status)

    @property
    def ran(self) -> bool:
        """Whether the check looked at the run (passed or rejected)."""
        return self.status in (PASSED, REJECTED)

    @classmethod
    def skipped(cls, name: str, kind: str, reason: str) -> CheckResult:
        """A check that applies to this run but could not run; ``reason`` says why."""
        return cls(name, kind, False, 0.0, None, math.nan, f"skipped: {reason}", SKIPPED)

    @classmethod
    def not_applicable(cls, name: str, kind: str, reason: str) -> CheckResult:
        """A check that has nothing to test under this declaration; ``reason`` says why."""
        return cls(name, kind, False, 0.0, None, math.nan, f"not applicable: {reason}", NOT_APPLICABLE)
