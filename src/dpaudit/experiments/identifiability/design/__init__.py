"""The identifiability game's design (Bernau et al. §5, :data:`dpaudit.references.BERNAU`).

Grid points ρβ × sensitivity {global, local} × neighbours {bounded, unbounded}; ε = ln(ρβ/(1−ρβ))
(Eq. 10); z from ε by the RDP accountant with q = 1 and k steps; δ = 1/|D| unless set. D′ comes
from the dataset-sensitivity search (Def. 6): unbounded D′ = D \\ {x̂}; bounded D′ = D with x̂
replaced by x̂′. The worlds, masks and grid are the shared machinery of
:mod:`dpaudit.data.worlds`. :func:`fig4_candidates` turns the search's top/bottom lists into the
Fig. 4 candidate runs, each record in one list only.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.data.worlds import Population, neighbour_masks, population, settings_grid
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.identifiability.config import Neighbours, Sensitivity, TrainParams
from dpaudit.sensitivity.search import SensitivityResult
from dpaudit.training.accounting import calibrate_noise_multiplier, epsilon_from_rho_beta

#: Files of the train stage's output directory besides one ``<setting>.npz`` per grid point.
POPULATION_FILE = "population.json"
CANDIDATES_FILE = "candidates.npz"


@dataclass(frozen=True)
class Setting:
    """One grid point: target belief bound, sensitivity kind and neighbourhood."""

    rho_beta: float
    sensitivity: Sensitivity
    neighbours: Neighbours

    @property
    def key(self) -> str:
        return f"{self.sensitivity}-{self.neighbours}"

    @property
    def file(self) -> str:
        return f"rb{self.rho_beta:g}_{self.key}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def settings(train: TrainParams) -> list[Setting]:
    """The grid in the order ρβ (slowest), sensitivity, neighbours."""
    grid = settings_grid(
        {"rho_beta": train.rho_beta, "sensitivity": train.sensitivities, "neighbours": train.neighbours}
    )
    return [Setting(**point) for point in grid]


def sensitivity_population(prepared: PreparedData, sens: SensitivityResult) -> Population:
    """D followed by every replacement record a bounded neighbour (chosen or candidate) needs."""
    extra = [int(p.replacement_index) for p in [sens.bounded, *sens.bounded.top, *sens.bounded.bottom]]
    pop = population(prepared.X, prepared.y, prepared.train_idx, extra)
    for idx in [sens.unbounded.index, sens.bounded.index]:
        if idx not in pop.rows or pop.rows[idx] >= pop.n:
            raise ValueError(
                f"{prepared.name}: sensitivity record {idx} is not in D (train_idx); "
                "re-run the sensitivity stage for this prepared data"
            )
    return pop


def neighbour_design(
    pop: Population, sens: SensitivityResult, neighbours: Neighbours
) -> tuple[tuple[int, ...], tuple[float, ...], np.ndarray, np.ndarray]:
    """Tracked rows, their difference weights (μ_D − μ_D′) and the masks of D and D′."""
    if neighbours == "unbounded":
        x = pop.rows[sens.unbounded.index]
        d_mask, d_prime = neighbour_masks(pop, x)
        return (x,), (1.0,), d_mask, d_prime
    x, xp = pop.rows[sens.bounded.index], pop.rows[sens.bounded.replacement_index]
    d_mask, d_prime = neighbour_masks(pop, x, xp)
    return (x, xp), (1.0, -1.0), d_mask, d_prime


def delta_for(train: TrainParams, n: int) -> float:
    """δ = 1/|D| unless set (Bernau §6)."""
    return train.delta if train.delta is not None else 1.0 / n


@functools.lru_cache(maxsize=64)
def noise_multiplier_for(rho_beta: float, delta: float, steps: int) -> tuple[float, float]:
    """(ε, z): ε from ρβ (Eq. 10), z calibrated under RDP with q = 1 and ``steps`` steps."""
    eps = epsilon_from_rho_beta(rho_beta)
    return eps, calibrate_noise_multiplier(eps, delta, 1.0, steps, "rdp")


@dataclass(frozen=True)
class FigCandidate:
    """One Fig. 4 candidate D′: its neighbourhood, list (top/bottom), rank and records (x̂[, x̂′])."""

    neighbours: Neighbours
    end: str
    rank: int
    records: tuple[int, ...]


def fig4_candidates(sens: SensitivityResult) -> list[FigCandidate]:
    """The top/bottom dataset-sensitivity candidates of Bernau Fig. 4, each record in one list only.

    A bounded candidate is a pair (x̂, x̂′), so one record can head a pair of largest and a pair of
    smallest dissimilarity (digits: #1436 in both). Fig. 4 compares the two ends, so a bottom
    candidate that shares a record with any top candidate of its neighbourhood is dropped (the top
    list keeps it: it is the search's answer, Eqs. 18, 20). Ranks are the search's own.
    """
    out: list[FigCandidate] = []
    for nb in ("unbounded", "bounded"):
        choice = sens.unbounded if nb == "unbounded" else sens.bounded
        ends: dict[str, list[tuple[int, ...]]] = {
            end: [
                (c.index,) if nb == "unbounded" else (c.index, c.replacement_index)  # type: ignore[union-attr]
                for c in getattr(choice, end)
            ]
            for end in ("top", "bottom")
        }
        top_records = {g for records in ends["top"] for g in records}
        for end in ("top", "bottom"):
            for rank, records in enumerate(ends[end], start=1):
                if end == "bottom" and top_records.intersection(records):
                    continue
                out.append(FigCandidate(nb, end, rank, records))  # type: ignore[arg-type]
    return out


def manifest_settings(manifest: TrainManifest) -> list[Setting]:
    """The grid the train stage trained, in its order (from the manifest, not from params)."""
    return [Setting(**raw) for raw in manifest.facts["settings"]]
