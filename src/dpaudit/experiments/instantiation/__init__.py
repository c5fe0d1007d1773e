"""Adversary instantiation (Nasr et al. 2021, :data:`dpaudit.references.NASR_2021`): the six threat
models of Table I, from API access to a malicious dataset, on the same DP-SGD, each with its ε lower
bound beside the accountants' ε.

Modules: :mod:`.config` (params), :mod:`.design` (cells, worlds, CP cap), :mod:`.design.registry`
(Table I: the six threat models as one table), :mod:`.design.crafters` and :mod:`.design.distinguishers`
(what each threat model plays and scores), :mod:`.train`, :mod:`.losses`, :mod:`.attack`,
:mod:`.bounds` (numbers) and :mod:`.report` (the section). Spec: ``../shared/specs/instantiation.md``.
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.instantiation.config import InstantiationConfig, config_from_params

__all__ = ["EXPERIMENT", "InstantiationConfig"]

EXPERIMENT = register(PackagedExperiment("instantiation", __name__, config_from_params))
