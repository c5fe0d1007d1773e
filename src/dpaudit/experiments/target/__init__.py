"""Target audit: your own trained Keras model, its members and non-members, audited for membership.

The model file (``.keras``, DVC-tracked) and a membership CSV name the audited model and the records
it did and did not train on (``target.datasets.<name>``); ``target-prepare@<name>`` verifies both
against their DVC digests and bundles them with the base dataset's rows. The audit then runs
Yeom et al.'s loss-threshold attack, offline LiRA (Carlini et al. 2022) with shadow models of the
same architecture trained at once on the pool, the scores auditor (TPR at fixed FPR, AUROC, ε lower
bounds) and Epsilon* with its interval (Negoescu et al.). Modules: :mod:`.config`, :mod:`.design.inputs`
(the target-prepare stage), :mod:`.design`, :mod:`.train`, :mod:`.losses`, :mod:`.attack`,
:mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments import register
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.target.config import TargetConfig, check_files, config_from_params
from dpaudit.layout import Audit
from dpaudit.report.spec import ReportSection

__all__ = ["EXPERIMENT", "TargetConfig", "TargetExperiment"]


class TargetExperiment:
    """The target audit as an :class:`~dpaudit.experiments.base.Experiment` (stage modules load lazily)."""

    name = "target"

    def config_from_params(self, params: Mapping[str, Any]) -> TargetConfig:
        return config_from_params(params)

    def check_inputs(self, config: TargetConfig) -> None:
        """The check stage's file checks: DVC digests of the model and membership files, the mapping."""
        check_files(config)

    def train(self, config: TargetConfig, audit: Audit, out_dir: Path) -> TrainManifest:
        from dpaudit.experiments.target.train import train

        return train(config, audit, out_dir)

    def losses(self, config: TargetConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
        from dpaudit.experiments.target.losses import losses

        losses(config, audit, manifest, out_path)

    def attack(self, config: TargetConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
        from dpaudit.experiments.target.attack import attack

        attack(config, audit, manifest, out_dir)

    def bounds(self, config: TargetConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
        from dpaudit.experiments.target.bounds import bounds

        return bounds(config, audit, manifest)

    def section(
        self, config: TargetConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection:
        from dpaudit.experiments.target.report import section

        return section(config, audit, manifest, result)


EXPERIMENT = register(TargetExperiment())
