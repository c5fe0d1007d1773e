"""Membership audit: DP-SGD at many noise levels vs. loss-threshold membership inference and Epsilon*.

Erlingsson et al. (:data:`dpaudit.references.ERLINGSSON`) train models at fixed noise and compare
accountants' ε upper bounds (naive, advanced, RDP; Table 1) with an attack-based lower bound
(Prop. 3), drawing the "region of privacy" between them (Fig. 2). Negoescu et al.
(:data:`dpaudit.references.NEGOESCU`) score single model instances, DP or not, by Epsilon* (Def. 2)
from member and non-member losses and plot it against utility (Figs. 1–2). Modules:
:mod:`.config`, :mod:`.design` (strategies, splits), :mod:`.train`, :mod:`.losses`,
:mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments import register
from dpaudit.experiments.base import BoundsResult, TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig, config_from_params
from dpaudit.layout import Audit
from dpaudit.report.spec import ReportSection

__all__ = ["EXPERIMENT", "MembershipConfig", "MembershipExperiment"]


class MembershipExperiment:
    """The membership audit as an :class:`~dpaudit.experiments.base.Experiment`.

    Stage modules are imported when a stage runs, so that validating params (the check stage)
    does not load TensorFlow.
    """

    name = "membership"

    def config_from_params(self, params: Mapping[str, Any]) -> MembershipConfig:
        return config_from_params(params)

    def train(self, config: MembershipConfig, audit: Audit, out_dir: Path) -> TrainManifest:
        from dpaudit.experiments.membership.train import train

        return train(config, audit, out_dir)

    def losses(self, config: MembershipConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
        from dpaudit.experiments.membership.losses import losses

        losses(config, audit, manifest, out_path)

    def attack(self, config: MembershipConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
        from dpaudit.experiments.membership.attack import attack

        attack(config, audit, manifest, out_dir)

    def bounds(self, config: MembershipConfig, audit: Audit, manifest: TrainManifest) -> BoundsResult:
        from dpaudit.experiments.membership.bounds import bounds

        return bounds(config, audit, manifest)

    def section(
        self, config: MembershipConfig, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection:
        from dpaudit.experiments.membership.report import section

        return section(config, audit, manifest, result)


EXPERIMENT = register(MembershipExperiment())
