"""The estimator registry: estimators registered by name with a decorator.

An estimator (register-by-decorator, as Opacus registers its per-layer gradient samplers) receives
one :class:`~dpaudit.scores.ScoreSet`, the level each of its *counted* bounds must hold at and the
audit's confidence, and returns :class:`~dpaudit.table.ResultRow` s. ``counted(set)`` says first
how many counted bounds it will emit, so that :func:`dpaudit.bounds.audit.audit_score_sets` can
split the level once over everything a headline maximises over. Estimators live in
:mod:`dpaudit.bounds.estimators` (one module each); :mod:`dpaudit.bounds.audit` imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow

RowsFn = Callable[[ScoreSet, float, float], list[ResultRow]]
CountFn = Callable[[ScoreSet], int]


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: ``rows(set, counted_level, confidence)`` and ``counted(set)``, the
    number of counted bounds it will emit for ``set`` (the split of the level needs it first)."""

    name: str
    rows: RowsFn
    counted: CountFn


ESTIMATORS: dict[str, Estimator] = {}


def estimator(name: str, counted: CountFn) -> Callable[[RowsFn], RowsFn]:
    """Register ``fn(set, counted_level, confidence) -> rows`` under ``name``."""

    def register(fn: RowsFn) -> RowsFn:
        if name in ESTIMATORS:
            raise ValueError(f"estimator {name!r} registered twice")
        ESTIMATORS[name] = Estimator(name, fn, counted)
        return fn

    return register


def pre_registered(s: ScoreSet, allowed: Sequence[str], known: Sequence[str]) -> list[str]:
    """The bounds of ``s`` an estimator counts: of ``allowed`` (its bounds whose assumption ``s``
    guarantees), those ``s.registered`` names, or all of them when it names none. ``known`` is every
    bound the estimator emits: registering one of those that is not allowed is an error, since its
    assumption is not guaranteed for these scores; names of other estimators' bounds are ignored."""
    if s.registered is None:
        return list(allowed)
    refused = [name for name in s.registered if name in known and name not in allowed]
    if refused:
        raise ValueError(
            f"score set {s.key}: registered bounds {refused} rest on an assumption the set does not "
            f"guarantee (assumes={s.assumes!r}); allowed: {list(allowed)}"
        )
    return [name for name in allowed if name in s.registered]


def get_estimator(name: str) -> Estimator:
    if name not in ESTIMATORS:
        raise KeyError(f"unknown estimator {name!r}; registered: {sorted(ESTIMATORS)}")
    return ESTIMATORS[name]
