"""The ``identifiability:`` section of params.yaml, split by the stage that reads it.

- ``train``: everything that changes the trained models (Bernau et al. §6 defaults,
  :data:`dpaudit.references.BERNAU`): the ρβ grid, sensitivities, neighbourhoods, trials per world,
  k, C, δ, seed and the Fig. 4 candidate runs.
- ``datasets.<ds>``: per-dataset model widths and optional replacements of ``train.learning_rate``
  and ``train.trials``; only ``train@<ds>-identifiability`` reads its own entry.
- ``attack``: the DI adversary (Algorithm 1) and Yeom et al.'s rule have no knobs; the section is
  kept (empty) so that every experiment has the same four sub-sections for ``dvc.yaml``.
- ``bounds``: the joint confidence of every ε lower bound of the scores auditor
  (:func:`dpaudit.bounds.auditor.audit_scores`) and of Adv's interval.

Defaults live here, in the dataclasses; ``params.yaml`` repeats them for the user to see, and a
test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from dpaudit.config import dataset_entry, from_mapping, require, section
from dpaudit.experiments.params import LevelParams, TrainingKnobs
from dpaudit.training.modelling import ModelChoice

Sensitivity = Literal["global", "local"]
Neighbours = Literal["bounded", "unbounded"]

#: ``trials`` counts trials PER WORLD: every setting trains exactly ``trials`` models on D and
#: ``trials`` on D′ (balanced worlds in a seeded random order, :func:`dpaudit.data.worlds.draw_worlds`),
#: so the auditor's per-world error rates have fixed denominators. The bounds stage's estimators
#: spend a share of each world's trials on choosing a threshold (the split sweep half, the GDP
#: estimator 5 %) and count the rest; fewer than this many per world give intervals too wide to
#: mean anything.
MIN_TRIALS_PER_WORLD = 20


@dataclass(frozen=True)
class DatasetSettings:
    """Per-dataset settings: hidden layer sizes (MLP) or conv filters (mnist/cifar10 CNN), and
    optional replacements of ``train.learning_rate`` and ``train.trials`` (per world) for this dataset."""

    hidden: list[int]
    learning_rate: float | None = None
    trials: int | None = None
    model: ModelChoice | None = None  # {layers: [...]} or {keras: path}: replaces hidden (modelling.py)

    def __post_init__(self) -> None:
        require(
            len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden),
            "hidden",
            self.hidden,
            "must list at least one positive layer size",
        )
        require(
            self.learning_rate is None or self.learning_rate > 0,
            "learning_rate",
            self.learning_rate,
            "must be null or a positive number",
        )
        require(
            self.trials is None or self.trials >= MIN_TRIALS_PER_WORLD,
            "trials",
            self.trials,
            f"must be null or at least {MIN_TRIALS_PER_WORLD} trials per world (the estimators of the "
            "ε lower bound choose a threshold on some trials of each world and count the rest)",
        )


@dataclass(frozen=True)
class TrainParams(TrainingKnobs):
    """What shapes the trained models (identical for every dataset).

    ``trials`` is the number of trials per world: each setting trains ``2 * trials`` models,
    exactly half of them on D (Nasr et al. 2023's audits count per-world error rates,
    :data:`dpaudit.references.NASR_2023`).
    """

    rho_beta: list[float] = field(default_factory=lambda: [0.52, 0.75, 0.9, 0.99])
    sensitivities: list[Sensitivity] = field(default_factory=lambda: ["global", "local"])  # type: ignore[arg-type]
    neighbours: list[Neighbours] = field(default_factory=lambda: ["bounded", "unbounded"])  # type: ignore[arg-type]
    trials: int = 500
    epochs: int = 30
    learning_rate: float = 0.005
    clip_norm: float = 3.0
    delta: float | None = None
    seed: int = 0
    reference_rho_beta: float = 0.9
    candidate_trials: int = 20
    chunk_size: int | None = None

    NULL_MEANS: ClassVar[Mapping[str, str]] = {"delta": "1/|D|, Bernau §6", "chunk_size": "trainer chooses"}

    def __post_init__(self) -> None:
        super().__post_init__()  # learning_rate, clip_norm, delta, chunk_size
        require(len(self.rho_beta) >= 1, "rho_beta", self.rho_beta, "must list at least one value")
        for rb in self.rho_beta:
            require(0.5 < rb < 1.0, "rho_beta", self.rho_beta, "every value must lie in (0.5, 1)")
        require(len(set(self.rho_beta)) == len(self.rho_beta), "rho_beta", self.rho_beta, "has duplicates")
        require(
            len(self.sensitivities) >= 1 and len(set(self.sensitivities)) == len(self.sensitivities),
            "sensitivities",
            self.sensitivities,
            "must list global and/or local once each",
        )
        require(
            len(self.neighbours) >= 1 and len(set(self.neighbours)) == len(self.neighbours),
            "neighbours",
            self.neighbours,
            "must list bounded and/or unbounded once each",
        )
        require(
            self.trials >= MIN_TRIALS_PER_WORLD,
            "trials",
            self.trials,
            f"must be at least {MIN_TRIALS_PER_WORLD} trials per world: the estimators of the ε lower "
            "bound choose a threshold on some trials of each world and count the rest",
        )
        require(1 <= self.epochs <= 1_000_000, "epochs", self.epochs, "must lie in [1, 10^6]")
        require(
            0.5 < self.reference_rho_beta < 1,
            "reference_rho_beta",
            self.reference_rho_beta,
            "must lie in (0.5, 1)",
        )
        require(self.candidate_trials >= 0, "candidate_trials", self.candidate_trials, "must be >= 0")


@dataclass(frozen=True)
class AttackParams:
    """The DI adversary (Bernau Algorithm 1) and the Yeom MI rule: no settings."""


@dataclass(frozen=True)
class BoundsParams(LevelParams):
    """Joint confidence of every ε lower bound (and two-sided level of every interval) the scores
    auditor reports (:func:`dpaudit.bounds.auditor.audit_scores`), and of Adv's interval."""


def _default_datasets() -> dict[str, DatasetSettings]:
    from dpaudit.training.models import DEFAULT_HIDDEN

    return {name: DatasetSettings(list(h)) for name, h in DEFAULT_HIDDEN.items()}


@dataclass(frozen=True)
class IdentifiabilityConfig:
    """The whole ``identifiability`` section."""

    train: TrainParams = field(default_factory=TrainParams)
    datasets: dict[str, DatasetSettings] = field(default_factory=_default_datasets)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def dataset(self, name: str) -> DatasetSettings:
        return dataset_entry(self.datasets, "identifiability", name)

    def learning_rate_for(self, dataset: str) -> float:
        own = self.dataset(dataset).learning_rate
        return own if own is not None else self.train.learning_rate

    def trials_for(self, dataset: str) -> int:
        own = self.dataset(dataset).trials
        return own if own is not None else self.train.trials


def config_from_params(params: Mapping[str, Any]) -> IdentifiabilityConfig:
    """Validate and build the ``identifiability`` section (unknown keys are refused by name)."""
    return from_mapping(IdentifiabilityConfig, section(params, "identifiability"), "identifiability")
