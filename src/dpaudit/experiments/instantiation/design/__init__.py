"""The game of Nasr et al. 2021 §III/§IV (:data:`dpaudit.references.NASR_2021`): cells, worlds, noise, caps.

A *cell* is one threat model (A–F of Table I, :mod:`.registry`) at one target ε. Every cell plays
exactly N trials per world: ``inserted`` is 1 in world D′ (the target record, poison or canary is
present) and 0 in world D; the distinguishers' scores are higher for D′, so the scores auditor's "in"
scores are the inserted trials. The noise for each target ε is calibrated for fixed q and T (RDP, as
the paper). The Clopper–Pearson cap, the largest ε lower bound N trials per world can give (a perfect
test), is a bound: :func:`dpaudit.bounds.empirical.cp_cap`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.instantiation.design.registry import REGISTRY

__all__ = [
    "NAMES",
    "Cell",
    "balanced_inserted",
    "cell_file",
    "epsilon_key",
    "manifest_cells",
]

#: Threat models of Table I with their section of Nasr et al. 2021 (from :mod:`.registry`).
NAMES: dict[str, str] = {key: tm.label for key, tm in REGISTRY.items()}
SIMULATION = "simulation"


def epsilon_key(epsilon: float) -> str:
    """``eps2``, ``eps0.5``: the setting name of a target ε in the manifest and metrics."""
    return f"eps{epsilon:g}"


def cell_file(threat_model: str, epsilon: float) -> str:
    """File stem of one cell's outputs under the train, attack and bounds folders."""
    return f"{threat_model}-{epsilon_key(epsilon)}"


@dataclass(frozen=True)
class Cell:
    """One threat model at one target ε, with the noise multiplier calibrated for it."""

    threat_model: str
    target_epsilon: float
    noise_multiplier: float

    @property
    def file(self) -> str:
        return cell_file(self.threat_model, self.target_epsilon)

    @property
    def setting(self) -> str:
        return epsilon_key(self.target_epsilon)


def manifest_cells(manifest: TrainManifest) -> list[Cell]:
    """Every cell the train stage ran, from the manifest (threat-model order, then ε)."""
    cells = []
    for tm in manifest.facts["threat_models"]:
        for eps in manifest.facts["target_epsilons"]:
            z = float(manifest.mechanisms[epsilon_key(eps)].noise_multiplier or 0.0)
            cells.append(Cell(str(tm), float(eps), z))
    return cells


def balanced_inserted(per_world: int, seed: int | list[int]) -> np.ndarray:
    """Exactly ``per_world`` trials in each world, in a seeded random order (1 = D′, inserted)."""
    bits = np.repeat(np.array([0, 1], dtype=np.int8), per_world)
    return np.random.default_rng(seed).permutation(bits)
