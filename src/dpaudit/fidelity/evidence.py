"""What the fidelity table reads: the results of the audits and of the reproduction profiles.

:class:`Evidence` loads an audit's numbers by group and ``reproductions/<profile>.json`` (written by
``python -m dpaudit.fidelity run``) on demand; a missing file is not an error but a missing row. The
bounds stage writes each audit's numbers twice, to ``results/<audit>.json`` (git) and
``data/bounds/<audit>/metrics.json`` (DVC): the fidelity stage reads the latter, a declared input that
exists for whichever audits params.yaml runs; tests and readers of a clone read the former.
:class:`Observed` is dpaudit's number for one claim, with its estimator, interval and the file and
key it came from, so every verdict names what backs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from dpaudit.fidelity.profile import ProfileResult, read_profile_result
from dpaudit.io import read_json

__all__ = ["INTERVALS", "ROLES", "Evidence", "Observed", "Role"]


Role = Literal["paper", "also", "beyond"]
#: ``paper``: the paper's own estimator in its setting, or the closest the machine allows (the first
#: such row present decides the claim); ``also``: the paper's estimator in another setting (its own
#: verdict, never counted); ``beyond``: another estimator or a modified protocol (never judged).
ROLES: tuple[str, ...] = ("paper", "also", "beyond")
#: What a number's low/high are. Only a confidence interval ("… % CI") may put the paper's number inside.
INTERVALS: tuple[str, ...] = (
    "95 % CI", "≥ 90 % CI (ratio of 95 % limits)", "±1 s.e.", "min–max over seeds", "min–max over models",
)  # fmt: skip


@dataclass(frozen=True)
class Observed:
    """dpaudit's number for one claim, on the same scale as the paper's.

    ``same_estimator`` says whether it was computed with the paper's own estimator and ``role`` how
    the row enters the claim (:data:`ROLES`); ``setting`` is dpaudit's setting in a few words;
    ``source`` the file and key it was read from; ``low``/``high`` its limits and ``interval`` what
    they are (:data:`INTERVALS`); ``needed`` the trial count per world at which the paper's estimator
    would reach the paper's number at the rates dpaudit observed (``math.inf``: at no count), and
    ``trials`` the count per world dpaudit ran.
    """

    value: float
    estimator: str
    same_estimator: bool
    setting: str
    source: str
    low: float | None = None
    high: float | None = None
    interval: str = ""
    needed: float | None = None
    role: Role = "paper"
    trials: int | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"Observed.role must be one of {ROLES}, got {self.role!r}")
        if (self.low is not None or self.high is not None) and self.interval not in INTERVALS:
            raise ValueError(f"{self.source}: limits need a labelled kind, one of {INTERVALS}")

    @property
    def confidence_interval(self) -> bool:
        """True when low/high are a confidence interval: the only kind that can contain the paper's number."""
        return "CI" in self.interval and self.low is not None and self.high is not None


class Evidence:
    """The results under ``root``; ``from_bounds``: read audits from ``data/bounds`` (the stage)."""

    def __init__(self, root: str | Path = ".", *, from_bounds: bool = False) -> None:
        self.root = Path(root)
        self.from_bounds = from_bounds
        self._audit = cache(self._load_audit)
        self._profile = cache(self._load_profile)

    def audit_path(self, audit: str) -> Path:
        if self.from_bounds:
            return self.root / "data" / "bounds" / audit / "metrics.json"
        return self.root / "results" / f"{audit}.json"

    def profile_path(self, profile: str) -> Path:
        return self.root / "reproductions" / f"{profile}.json"

    def _load_audit(self, audit: str) -> dict[str, Any] | None:
        path = self.audit_path(audit)
        return read_json(path) if path.is_file() else None

    def _load_profile(self, profile: str) -> ProfileResult | None:
        path = self.profile_path(profile)
        return read_profile_result(path) if path.is_file() else None

    def audit(self, audit: str) -> dict[str, Any] | None:
        """``results/<audit>.json`` by group, or None when that audit has not run."""
        return self._audit(audit)

    def profile(self, profile: str) -> ProfileResult | None:
        """``reproductions/<profile>.json``, or None when that profile has not run."""
        return self._profile(profile)

    def group(self, audit: str, group: str) -> dict[str, Any] | None:
        data = self.audit(audit)
        return None if data is None else data.get(group)
