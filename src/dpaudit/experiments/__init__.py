"""Audit experiments: one package each, found by discovery, registered by :func:`register`.

A new experiment is one package under ``dpaudit/experiments/`` (plus one section in
``params.yaml``) and no edit anywhere else: :func:`discover` imports every sub-package, and a
package registers its :class:`~dpaudit.experiments.base.Experiment` with :func:`register` when it
is imported. :func:`get_experiment` and :func:`registry` are what the stages and the check use.
"""

from __future__ import annotations

import importlib
import pkgutil

from dpaudit.experiments.base import Experiment
from dpaudit.layout import Audit

__all__ = ["Audit", "Experiment", "discover", "get_experiment", "register", "registry"]

_REGISTRY: dict[str, Experiment] = {}
_DISCOVERED: set[str] = set()


def register(experiment: Experiment) -> Experiment:
    """Add ``experiment`` to the registry under its ``name``; a second, different one is an error."""
    if not isinstance(experiment, Experiment):
        raise TypeError(f"{experiment!r} does not implement the Experiment protocol")
    name = experiment.name
    if not name or not name.isidentifier() or "-" in name:
        raise ValueError(f"experiment name {name!r} must be a Python identifier (it is a params section)")
    known = _REGISTRY.get(name)
    same_source = type(known) is type(experiment) and getattr(known, "package", None) == getattr(
        experiment, "package", None
    )  # the same package imported again (e.g. a reload) replaces its entry
    if known is not None and known is not experiment and not same_source:
        raise ValueError(f"two experiments are called {name!r}: {known!r} and {experiment!r}")
    _REGISTRY[name] = experiment
    return experiment


def discover() -> None:
    """Import every sub-package of ``dpaudit.experiments`` (each registers itself on import)."""
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg and info.name not in _DISCOVERED:
            importlib.import_module(f"{__name__}.{info.name}")
            _DISCOVERED.add(info.name)


def registry() -> dict[str, Experiment]:
    """Every registered experiment by name (after discovery)."""
    discover()
    return dict(sorted(_REGISTRY.items()))


def get_experiment(name: str) -> Experiment:
    """The experiment called ``name``; an unknown name is a clear error listing the known ones.

    The package of that name is imported alone, so a stage loads no other experiment's code."""
    if name not in _REGISTRY and any(i.ispkg and i.name == name for i in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{name}")
    if name in _REGISTRY:
        return _REGISTRY[name]
    known = registry()
    if name not in known:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(known)}")
    return known[name]
