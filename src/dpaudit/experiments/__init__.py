"""Audit experiments: each module turns prepared data into trained models, attacks and bounds.

An experiment module exposes ``config_from_params(params) -> config`` (validates its
``params.yaml`` section up front) and four stage functions, each writing only into the output
location it is given (the stage script makes that write atomic):

- ``run_train(config, audit, out_dir)``
- ``run_losses(config, audit, out_path)``
- ``run_attack(config, audit, out_dir)``
- ``run_bounds(config, audit, metrics_path, plots_dir, section_path)``

``audit`` is an :class:`Audit`: which dataset, and where the upstream stage outputs live.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

EXPERIMENTS = ("identifiability", "membership")


@dataclass(frozen=True)
class Audit:
    """One dataset × experiment pair and the paths of its pipeline artefacts."""

    dataset: str
    experiment: str
    root: Path = Path(".")

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.experiment}"

    @property
    def prepared_path(self) -> Path:
        return self.root / "data" / "prepared" / f"{self.dataset}.npz"

    @property
    def sensitivity_path(self) -> Path:
        return self.root / "data" / "sensitivity" / f"{self.dataset}.json"

    @property
    def train_dir(self) -> Path:
        return self.root / "data" / "train" / self.dataset / self.experiment

    @property
    def losses_path(self) -> Path:
        return self.root / "data" / "losses" / self.dataset / f"{self.experiment}.npz"

    @property
    def attack_dir(self) -> Path:
        return self.root / "data" / "attacks" / self.dataset / self.experiment

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics" / f"{self.name}.json"

    @property
    def plots_dir(self) -> Path:
        return self.root / "plots" / self.name

    @property
    def section_path(self) -> Path:
        return self.root / "data" / "bounds" / self.name / "section.json"


def experiment_module(name: str) -> ModuleType:
    """Import ``dpaudit.experiments.<name>``; an unknown name is a clear error."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return importlib.import_module(f"dpaudit.experiments.{name}")
