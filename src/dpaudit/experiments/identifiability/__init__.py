"""Identifiability audit (Bernau et al. §5–6, :data:`dpaudit.references.BERNAU`): DP-SGD on D or D′,
audited by A_DI,Gau.

For every configuration of the grid ρβ × sensitivity {global, local} × neighbours {bounded,
unbounded}: ε = ln(ρβ/(1−ρβ)) (Eq. 10), z from ε by RDP with q = 1 and k steps, δ = 1/|D| unless
set. Modules: :mod:`.config` (params), :mod:`.design` (grid, D/D′), :mod:`.train`, :mod:`.losses`,
:mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments import register
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig, config_from_params
from dpaudit.layout import Audit
from dpaudit.report.spec import ReportSection

__all__ = ["EXPERIMENT", "IdentifiabilityConfig", "IdentifiabilityExperiment"]


class IdentifiabilityExperiment:
    """The identifiability audit as an :class:`~dpaudit.experiments.base.Experiment`.

    Stage modules are imported when a stage runs, so that validating params (the check stage)
    does not load TensorFlow.
    """

    name = "identifiability"

    def config_from_params(self, params: Mapping[str, Any]) -> IdentifiabilityConfig:
        return config_from_params(params)

    def train(self, config: IdentifiabilityConfig, audit: Audit, out_dir: Path) -> TrainManifest:
        from dpaudit.experiments.identifiability.train import train

        return train(config, audit, out_dir)

    def losses(
        self, config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, out_path: Path
    ) -> None:
        from dpaudit.experiments.identifiability.losses import losses

        losses(config, audit, manifest, out_path)

    def attack(
        self, config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, out_dir: Path
    ) -> None:
        from dpaudit.experiments.identifiability.attack import attack

        attack(config, audit, manifest, out_dir)

    def bounds(self, config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
        from dpaudit.experiments.identifiability.bounds import bounds

        return bounds(config, audit, manifest)

    def section(
        self, config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection:
        from dpaudit.experiments.identifiability.report import section

        return section(config, audit, manifest, result)


EXPERIMENT = register(IdentifiabilityExperiment())
