"""Canaries audit: sample-level evaluation of defences with canaries and LiRA (Aerni et al.).

Aerni et al. (:data:`dpaudit.references.AERNI`) show that membership numbers averaged over a
population hide the records that leak, and evaluate each defence by how reliably a strong attacker
(LiRA, Carlini et al. 2022, "Membership inference attacks from first principles", arXiv 2112.03570)
identifies the most vulnerable records (canaries) at low FPR. Modules: :mod:`.config`,
:mod:`.design` (audit set, membership design, defences; :mod:`.design.heuristics` evaluates the
published heuristic defences, :mod:`.design.comparison` sets RMIA beside LiRA), :mod:`.train`,
:mod:`.losses`, :mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.canaries.config import CanariesConfig, config_from_params

__all__ = ["EXPERIMENT", "CanariesConfig"]

EXPERIMENT = register(PackagedExperiment("canaries", __name__, config_from_params))
