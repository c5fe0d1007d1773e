"""Identifiability audit (Bernau et al. §5–6, :data:`dpaudit.references.BERNAU`): DP-SGD on D or D′,
audited by A_DI,Gau.

For every configuration of the grid ρβ × sensitivity {global, local} × neighbours {bounded,
unbounded}: ε = ln(ρβ/(1−ρβ)) (Eq. 10), z from ε by RDP with q = 1 and k steps, δ = 1/|D| unless
set. Modules: :mod:`.config` (params), :mod:`.design` (grid, D/D′), :mod:`.train`, :mod:`.losses`,
:mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig, config_from_params

__all__ = ["EXPERIMENT", "IdentifiabilityConfig"]

EXPERIMENT = register(PackagedExperiment("identifiability", __name__, config_from_params))
