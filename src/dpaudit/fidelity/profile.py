"""One reproduction profile and the file it writes.

A profile is a function of a seed that runs a paper's protocol and returns a
:class:`ProfileResult`: named :class:`Measured` numbers, each with its estimator, its kind (a bound,
an estimate, a rate) and, where it has one, its interval. The result is written to
``reproductions/<profile>.json`` at the precision its statistics support (four significant
digits: no profile's interval is narrower than 10⁻⁴ of its value), so a rerun on another CPU changes
the file only where a number really moved.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dpaudit.io import read_json, write_json

__all__ = ["KINDS", "Measured", "Profile", "ProfileResult", "read_profile_result", "write_profile_result"]

Kind = Literal["bound", "estimate", "rate", "count", "difference", "flag"]
KINDS: tuple[str, ...] = ("bound", "estimate", "rate", "count", "difference", "flag")

SIGNIFICANT_DIGITS = 4


def _rounded(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value) or value == 0.0:
        return value
    digits = SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(value)))
    return round(value, digits)


@dataclass(frozen=True)
class Measured:
    """One number a profile measured, labelled with what produced it.

    ``kind`` says how to read it: ``bound`` (a lower confidence bound holding at ``level``),
    ``estimate`` (a point value, never a bound), ``rate`` (a TPR or accuracy with its interval),
    ``count``, ``difference`` (e.g. D − C with ``low``/``high`` at ± its standard error) or ``flag``
    (1.0 true, 0.0 false). ``n`` is the sample size behind it (trials per world, seeds, models).
    """

    value: float
    estimator: str
    kind: Kind
    low: float | None = None
    high: float | None = None
    level: float | None = None
    n: int | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Measured.kind must be one of {KINDS}, got {self.kind!r}")

    def rounded(self) -> Measured:
        return Measured(
            value=_rounded(self.value),  # type: ignore[arg-type]
            estimator=self.estimator,
            kind=self.kind,
            low=_rounded(self.low),
            high=_rounded(self.high),
            level=self.level,
            n=self.n,
            note=self.note,
        )


@dataclass(frozen=True)
class ProfileResult:
    """What one profile run found: its setting, how it differs from the paper's, and its numbers."""

    profile: str
    paper: str
    setting: str
    differs: str
    numbers: Mapping[str, Measured]
    seed: int = 0
    command: str = ""
    findings: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "paper": self.paper,
            "setting": self.setting,
            "differs": self.differs,
            "seed": self.seed,
            "command": self.command or f"python -m dpaudit.fidelity run {self.profile}",
            "findings": list(self.findings),
            "numbers": {key: _without_empty(asdict(m.rounded())) for key, m in self.numbers.items()},
        }


def _without_empty(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if v is not None and v != ""}


@dataclass(frozen=True)
class Profile:
    """A named, runnable reproduction of one paper's protocol.

    ``run(seed)`` does the work (it may take minutes: ``minutes`` says about how many on two cores)
    and returns the :class:`ProfileResult` that :func:`write_profile_result` records.
    """

    name: str
    paper: str
    description: str
    minutes: float
    run: Callable[[int], ProfileResult]


def write_profile_result(directory: str | Path, result: ProfileResult) -> Path:
    """Write ``<directory>/<profile>.json`` atomically and return its path."""
    path = Path(directory) / f"{result.profile}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, result.to_dict())
    return path


def read_profile_result(path: str | Path) -> ProfileResult:
    """Read a profile's file back, with an error naming the file and key that is wrong."""
    data = read_json(path)
    try:
        numbers = {key: Measured(**record) for key, record in data["numbers"].items()}
        return ProfileResult(
            profile=data["profile"],
            paper=data["paper"],
            setting=data["setting"],
            differs=data["differs"],
            numbers=numbers,
            seed=int(data.get("seed", 0)),
            command=data.get("command", ""),
            findings=tuple(data.get("findings", ())),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a fidelity profile result ({exc})") from exc
