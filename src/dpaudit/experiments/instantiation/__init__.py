"""Adversary instantiation (Nasr et al. 2021, :data:`dpaudit.references.NASR_2021`): the six threat
models of Table I, from API access to a malicious dataset, on the same DP-SGD, each with its ε lower
bound beside the accountants' ε.

Modules: :mod:`.config` (params), :mod:`.design` (cells, worlds, CP cap), :mod:`.design.threat_models`
(crafters and distinguishers A–F), :mod:`.train`, :mod:`.losses`, :mod:`.attack`, :mod:`.bounds`
(numbers) and :mod:`.report` (the section). Spec: ``../shared/specs/instantiation.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments import register
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.instantiation.config import InstantiationConfig, config_from_params
from dpaudit.layout import Audit
from dpaudit.report.spec import ReportSection

__all__ = ["EXPERIMENT", "InstantiationConfig", "InstantiationExperiment"]


class InstantiationExperiment:
    """The instantiation audit as an :class:`~dpaudit.experiments.base.Experiment` (stage modules
    are imported when a stage runs, so that the check stage does not load TensorFlow)."""

    name = "instantiation"

    def config_from_params(self, params: Mapping[str, Any]) -> InstantiationConfig:
        return config_from_params(params)

    def train(self, config: InstantiationConfig, audit: Audit, out_dir: Path) -> TrainManifest:
        from dpaudit.experiments.instantiation.train import train

        return train(config, audit, out_dir)

    def losses(
        self, config: InstantiationConfig, audit: Audit, manifest: TrainManifest, out_path: Path
    ) -> None:
        from dpaudit.experiments.instantiation.losses import losses

        losses(config, audit, manifest, out_path)

    def attack(
        self, config: InstantiationConfig, audit: Audit, manifest: TrainManifest, out_dir: Path
    ) -> None:
        from dpaudit.experiments.instantiation.attack import attack

        attack(config, audit, manifest, out_dir)

    def bounds(self, config: InstantiationConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
        from dpaudit.experiments.instantiation.bounds import bounds

        return bounds(config, audit, manifest)

    def section(
        self, config: InstantiationConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection:
        from dpaudit.experiments.instantiation.report import section

        return section(config, audit, manifest, result)


EXPERIMENT = register(InstantiationExperiment())
