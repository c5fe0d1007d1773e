"""The outcome of one conformance check of a user's DP-SGD run (shared by every check module)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CheckResult"]


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome. ``kind``: ``"mismatch"`` (a rejection means the code does not match its
    declaration) or ``"warning"``; ``level``: its false-alarm probability under the declared DP-SGD
    (0.0 for deterministic checks); ``message``: what was seen, what was expected, what it means."""

    name: str
    kind: str
    rejected: bool
    level: float
    p_value: float | None
    statistic: float
    message: str
