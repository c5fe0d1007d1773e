"""Canaries audit: sample-level evaluation of defences with canaries and LiRA (Aerni et al.).

Aerni et al. (:data:`dpaudit.references.AERNI`) show that membership numbers averaged over a
population hide the records that leak, and evaluate each defence by how reliably a strong attacker
(LiRA, Carlini et al. 2022, "Membership inference attacks from first principles", arXiv 2112.03570)
identifies the most vulnerable records (canaries) at low FPR. Modules: :mod:`.config`,
:mod:`.design` (audit set, membership design, defences), :mod:`.train`, :mod:`.losses`,
:mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments import register
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.canaries.config import CanariesConfig, config_from_params
from dpaudit.layout import Audit
from dpaudit.report.spec import ReportSection

__all__ = ["EXPERIMENT", "CanariesConfig", "CanariesExperiment"]


class CanariesExperiment:
    """The canaries audit as an :class:`~dpaudit.experiments.base.Experiment`.

    Stage modules are imported when a stage runs, so that validating params does not load TensorFlow.
    """

    name = "canaries"

    def config_from_params(self, params: Mapping[str, Any]) -> CanariesConfig:
        return config_from_params(params)

    def train(self, config: CanariesConfig, audit: Audit, out_dir: Path) -> TrainManifest:
        from dpaudit.experiments.canaries.train import train

        return train(config, audit, out_dir)

    def losses(self, config: CanariesConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
        from dpaudit.experiments.canaries.losses import losses

        losses(config, audit, manifest, out_path)

    def attack(self, config: CanariesConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
        from dpaudit.experiments.canaries.attack import attack

        attack(config, audit, manifest, out_dir)

    def bounds(self, config: CanariesConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
        from dpaudit.experiments.canaries.bounds import bounds

        return bounds(config, audit, manifest)

    def section(
        self, config: CanariesConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection:
        from dpaudit.experiments.canaries.report import section

        return section(config, audit, manifest, result)


EXPERIMENT = register(CanariesExperiment())
