"""The score set: the one thing an attack stage hands to the bounds stage.

Every adversary in dpaudit ends in one score per trial (per canary, per candidate record) and the
challenge bit that says which world the trial came from. A :class:`ScoreSet` holds one group of
them with everything an estimator may rely on and nothing else, in the spirit of TF Privacy's
``AttackInputData`` and privacy-estimates' scores-plus-challenge-bits contract:

- ``scores`` (float64, higher = "in") and ``member`` (bool): **one convention everywhere** —
  ``member`` is True when the record or canary under test was in the training data (world D with
  the differing record, a member, an included canary);
- ``group``: what the set is one of (setting, threat model, canary type, defence, step, attack),
  as ordered ``name → value`` strings; :attr:`ScoreSet.key` spells it in one canonical way;
- ``estimators``: the registered estimators (:mod:`dpaudit.bounds.registry`) to run on the set;
- ``assumes``: what is *guaranteed* about the mechanism that produced the scores, as a tag of
  :data:`ASSUMES` ("none" for scores of unknown origin: family bounds are then reported but never
  counted in a headline);
- ``registered``: the bounds pre-registered for a headline before the scores were seen: None (every
  bound whose assumption ``assumes`` guarantees), a subset by name (e.g. ``("gdp",)``: fewer counted
  bounds keep more of the level each), or ``()`` for evidence that claims nothing (a simulation, a
  repeat other than the pre-registered one);
- ``mechanism``: the audited run's ``DpEvent`` as JSON (:func:`dpaudit.training.manifest`
  ``event_to_json``), when one exists; ``params``: numbers the estimators need (δ, q, T, …);
- ``arrays``: named per-trial arrays some estimators read besides the scores (e.g. per-step canary
  projections); they share the trials' order.

Score sets are written to one ``.npz`` per attack output (:func:`write_score_sets`) with a JSON
index, so that the bounds stage reads them without knowing the experiment.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.io import open_npz, write_npz

#: What may be guaranteed about the mechanism behind a score set (the ``assumes`` tags), and what a
#: bound that uses the tag assumes, in words for the report.
ASSUMES: dict[str, str] = {
    "none": "nothing about the mechanism",
    "gaussian": "a Gaussian trade-off curve (full-batch Gaussian mechanism)",
    "subsampled-gaussian": "the audited DP-SGD run's own Poisson-subsampled Gaussian noise",
    "one-run": "canaries included independently with probability 1/2 in one training run",
}

#: The names a group may use, in the order :attr:`ScoreSet.key` writes them.
GROUP_KEYS = ("setting", "threat_model", "canary_type", "defence", "attack", "step")

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def group_key(**parts: str | None) -> str:
    """A group in its one canonical spelling, ``name=value`` joined by ``/`` in :data:`GROUP_KEYS`'
    order (None parts left out), e.g. ``group_key(setting="eps2", threat_model="F")``."""
    unknown = [k for k in parts if k not in GROUP_KEYS]
    if unknown:
        raise ValueError(f"group names {unknown} unknown; use {GROUP_KEYS}")
    return "/".join(f"{k}={parts[k]}" for k in GROUP_KEYS if parts.get(k) is not None)


def parse_group(key: str) -> dict[str, str]:
    """The ``name → value`` parts of a :func:`group_key` ("" is the whole audit's group)."""
    return dict(part.split("=", 1) for part in key.split("/")) if key else {}
_INDEX = "__index__"


@dataclass(frozen=True)
class ScoreSet:
    """One group's attack scores with their challenge bits (see the module docstring)."""

    group: Mapping[str, str]
    scores: np.ndarray
    member: np.ndarray
    estimators: tuple[str, ...]
    assumes: str = "none"
    mechanism: Mapping[str, Any] | None = None
    params: Mapping[str, float | str] = field(default_factory=dict)
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    registered: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        member = np.asarray(self.member).reshape(-1)
        if member.dtype != bool:
            if not np.isin(member, (0, 1)).all():
                raise ValueError(f"score set {self.key}: member must hold 0/1 or booleans")
            member = member.astype(bool)
        if scores.shape != member.shape:
            raise ValueError(f"score set {self.key}: {scores.size} scores but {member.size} member bits")
        if np.isnan(scores).any():
            raise ValueError(f"score set {self.key}: scores contain NaN")
        unknown = [k for k in self.group if k not in GROUP_KEYS]
        if unknown:
            raise ValueError(f"score set group names {unknown} unknown; use {GROUP_KEYS}")
        if self.assumes not in ASSUMES:
            raise ValueError(
                f"score set {self.key}: assumes={self.assumes!r} is not one of {sorted(ASSUMES)}"
            )
        if not self.estimators:
            raise ValueError(f"score set {self.key}: name at least one estimator")
        for name, array in self.arrays.items():
            if not _NAME.match(name):
                raise ValueError(f"score set {self.key}: array name {name!r} must be lower_snake_case")
            if np.asarray(array).shape[:1] != scores.shape:
                raise ValueError(f"score set {self.key}: array {name!r} has no row per trial")
        object.__setattr__(self, "scores", scores)
        object.__setattr__(self, "member", member)
        object.__setattr__(self, "group", {k: str(self.group[k]) for k in GROUP_KEYS if k in self.group})
        object.__setattr__(self, "estimators", tuple(self.estimators))
        if self.registered is not None:
            object.__setattr__(self, "registered", tuple(self.registered))

    @property
    def key(self) -> str:
        """The group in one canonical spelling, e.g. ``setting=eps2/threat_model=F``."""
        return group_key(**self.group)

    @property
    def in_scores(self) -> np.ndarray:
        return self.scores[self.member]

    @property
    def out_scores(self) -> np.ndarray:
        return self.scores[~self.member]

    def param(self, name: str) -> float:
        """A numeric parameter, with a clear error when the attack stage did not set it."""
        if name not in self.params:
            raise KeyError(f"score set {self.key}: parameter {name!r} missing (have {sorted(self.params)})")
        value = float(self.params[name])
        if math.isnan(value):
            raise ValueError(f"score set {self.key}: parameter {name!r} is NaN")
        return value


def write_score_sets(path: str | Path, sets: Sequence[ScoreSet]) -> None:
    """Write score sets to one ``.npz`` (atomically): arrays ``<i>__scores`` … plus a JSON index."""
    arrays: dict[str, np.ndarray] = {}
    index = []
    for i, s in enumerate(sets):
        arrays[f"{i}__scores"] = s.scores
        arrays[f"{i}__member"] = s.member
        for name, array in s.arrays.items():
            arrays[f"{i}__a__{name}"] = np.asarray(array)
        index.append(
            {
                "group": dict(s.group),
                "estimators": list(s.estimators),
                "assumes": s.assumes,
                "mechanism": s.mechanism,
                "params": dict(s.params),
                "arrays": sorted(s.arrays),
                "registered": None if s.registered is None else list(s.registered),
            }
        )
    arrays[_INDEX] = np.array(json.dumps(index))
    write_npz(path, arrays)


def read_score_sets(path: str | Path) -> list[ScoreSet]:
    """The score sets :func:`write_score_sets` wrote, in order."""
    path = Path(path)
    with open_npz(path) as f:
        if _INDEX not in f.files:
            raise ValueError(f"{path}: not a score-set file (no {_INDEX} entry)")
        index = json.loads(str(f[_INDEX]))
        return [
            ScoreSet(
                group=entry["group"],
                scores=f[f"{i}__scores"],
                member=f[f"{i}__member"],
                estimators=tuple(entry["estimators"]),
                assumes=entry["assumes"],
                mechanism=entry["mechanism"],
                params=entry["params"],
                arrays={name: f[f"{i}__a__{name}"] for name in entry["arrays"]},
                registered=entry["registered"],
            )
            for i, entry in enumerate(index)
        ]


@dataclass(frozen=True)
class StepMoments:
    """Sufficient statistics of one world's per-step observations: count, Σ d and Σ d².

    What an attack that sees every step (threat models E and F) hands on for the per-step family
    bound (:func:`dpaudit.bounds.stepwise.stepwise_family_bound`), in a score set's ``params``."""

    count: int
    total: float
    total_squares: float

    @classmethod
    def of(cls, values: np.ndarray) -> StepMoments:
        """Moments of every entry of ``values`` (any shape, e.g. ``[trials, steps]``)."""
        v = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(v)):
            raise ValueError("step observations must be finite")
        return cls(int(v.size), float(v.sum()), float(np.square(v).sum()))

    def __add__(self, other: StepMoments) -> StepMoments:
        return StepMoments(
            self.count + other.count, self.total + other.total, self.total_squares + other.total_squares
        )

    @property
    def mean(self) -> float:
        return self.total / self.count
