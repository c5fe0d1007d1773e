"""The ``membership:`` section of params.yaml, split by the stage that reads it.

- ``train``: seed, repeats, δ, the DP-SGD strategies, the non-DP baselines and XGBoost
  (Erlingsson et al. §4–5, :data:`dpaudit.references.ERLINGSSON`; Negoescu et al. §4,
  :data:`dpaudit.references.NEGOESCU`).
- ``datasets.<ds>``: members and non-members per repeat and optional layer widths; only
  ``train@<ds>-membership`` reads its own entry.
- ``attack``: the loss-threshold attack's fixed FPR, the joint confidence, the threshold selection
  of the per-model test and Epsilon*'s bootstrap size.
- ``bounds``: which calibrated strategy is the audit's headline.

Defaults live here, in the dataclasses; ``params.yaml`` repeats them and a test checks that the two
agree. Step counts are bounded by :data:`MAX_STEPS` so that a tiny sampling rate or a huge epoch
count is refused before any work rather than running for days.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from dpaudit.config import dataset_entry, from_mapping, require, section
from dpaudit.experiments.params import TrainingKnobs, check_confidence
from dpaudit.training.modelling import ModelChoice

if TYPE_CHECKING:
    from dpaudit.data.custom import DatasetSize

Accountant = Literal["rdp", "pld", "naive", "advanced"]
StrategyKind = Literal["dp", "nondp", "xgboost"]

#: Largest number of DP-SGD steps a strategy may ask for (epochs / sampling_rate). 10^6 steps of
#: the smallest model already take hours on 2 cores; the accountants' cost also grows with T.
MAX_STEPS = 1_000_000


def steps_for_epochs(sampling_rate: float, epochs: float) -> int:
    """Steps whose expected batches (q·n records each) add up to ``epochs`` passes over the data."""
    return max(1, math.ceil(epochs / sampling_rate - 1e-9))


def _require_steps(sampling_rate: float, epochs: float, key: str) -> None:
    steps = epochs / sampling_rate
    require(
        steps <= MAX_STEPS,
        key,
        {"epochs": epochs, "sampling_rate": sampling_rate},
        f"epochs / sampling_rate = {steps:.3g} steps; at most {MAX_STEPS} steps are allowed",
    )


@dataclass(frozen=True)
class DatasetSettings:
    """Members (training set D) and held-out non-members per repeat; optional layer widths."""

    members: int
    nonmembers: int
    hidden: tuple[int, ...] | None = None
    model: ModelChoice | None = None  # {layers: [...]} or {keras: path}: replaces hidden (modelling.py)

    def __post_init__(self) -> None:
        require(self.members >= 4, "members", self.members, "need at least 4 members")
        require(self.nonmembers >= 4, "nonmembers", self.nonmembers, "need at least 4 non-members")
        require(
            self.hidden is None or (len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden)),
            "hidden",
            None if self.hidden is None else list(self.hidden),
            "must be null or list at least one layer width, each >= 1",
        )


# Kept under its old name: the sizes of one repeat's split.
SplitSizes = DatasetSettings


@dataclass(frozen=True)
class DPSGDParams(TrainingKnobs):
    """Minibatch DP-SGD: each member joins each step's batch with probability q (Poisson sampling)."""

    sampling_rate: float = 0.1
    epochs: float = 10.0
    clip_norm: float = 1.0
    learning_rate: float = 2.0
    noise_multipliers: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 16.0, 64.0)
    target_epsilons: tuple[float, ...] = (1.0, 3.0, 10.0, 100.0)
    calibration_accountant: Accountant = "rdp"

    def __post_init__(self) -> None:
        super().__post_init__()  # sampling_rate, clip_norm, learning_rate
        require(self.epochs > 0, "epochs", self.epochs, "must be > 0")
        _require_steps(self.sampling_rate, self.epochs, "sampling_rate")
        require(
            all(z > 0 for z in self.noise_multipliers),
            "noise_multipliers",
            list(self.noise_multipliers),
            "every noise multiplier must be > 0",
        )
        require(
            all(e > 0 for e in self.target_epsilons),
            "target_epsilons",
            list(self.target_epsilons),
            "every target epsilon must be > 0",
        )


@dataclass(frozen=True)
class BaselineParams(TrainingKnobs):
    """Non-DP SGD (no clipping, no noise) for several epoch counts: more epochs, more overfitting."""

    epochs: tuple[float, ...] = (2.0, 10.0, 50.0, 200.0)
    sampling_rate: float = 0.1
    learning_rate: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()  # sampling_rate, learning_rate
        require(all(e > 0 for e in self.epochs), "epochs", list(self.epochs), "must be > 0")
        for e in self.epochs:
            _require_steps(self.sampling_rate, e, "sampling_rate")


@dataclass(frozen=True)
class XGBoostParams:
    """Deterministic gradient-boosted trees (Epsilon* applies to them; DP bounds do not).

    Not a :class:`~dpaudit.experiments.params.TrainingKnobs`: its ``learning_rate`` is XGBoost's
    shrinkage of each tree, not an SGD step size."""

    enabled: bool = True
    n_estimators: int = 100
    max_depth: int = 6
    learning_rate: float = 0.3

    def __post_init__(self) -> None:
        require(self.n_estimators >= 1, "n_estimators", self.n_estimators, "must be >= 1")
        require(self.max_depth >= 1, "max_depth", self.max_depth, "must be >= 1")
        require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")


@dataclass(frozen=True)
class TrainParams(TrainingKnobs):
    """What shapes the trained models (identical for every dataset)."""

    seed: int = 0
    repeats: int = 5
    delta: float | None = None
    dpsgd: DPSGDParams = field(default_factory=DPSGDParams)
    baselines: BaselineParams = field(default_factory=BaselineParams)
    xgboost: XGBoostParams = field(default_factory=XGBoostParams)

    NULL_MEANS: ClassVar[Mapping[str, str]] = {"delta": "1/(n ln n)"}

    def __post_init__(self) -> None:
        super().__post_init__()  # delta
        require(self.repeats >= 1, "repeats", self.repeats, "must be >= 1")


@dataclass(frozen=True)
class AttackParams:
    """Attack settings: the fixed FPR of Erlingsson §4, the joint confidence of every bound and the
    level of every interval, the threshold selection of the per-model test, and the bootstrap size
    of Epsilon*'s bootstrap spread (Negoescu et al.; its null level uses 100 label permutations)."""

    fpr: float = 0.05
    confidence: float = 0.95
    selection: Literal["split", "bonferroni"] = "split"
    epsilon_star_bootstrap: int = 50

    def __post_init__(self) -> None:
        require(0 < self.fpr < 1, "fpr", self.fpr, "must lie in (0, 1)")
        check_confidence(self.confidence)
        require(
            self.epsilon_star_bootstrap >= 10,
            "epsilon_star_bootstrap",
            self.epsilon_star_bootstrap,
            "must be >= 10 (resamples of Epsilon*'s bootstrap spread)",
        )


@dataclass(frozen=True)
class BoundsParams:
    """The headline of the audit: the calibrated strategy whose target ε is closest to this (log scale)."""

    headline_target_epsilon: float = 10.0

    def __post_init__(self) -> None:
        require(
            self.headline_target_epsilon > 0,
            "headline_target_epsilon",
            self.headline_target_epsilon,
            "must be > 0",
        )


@dataclass(frozen=True)
class MembershipConfig:
    """The whole ``membership:`` section."""

    datasets: dict[str, DatasetSettings]
    train: TrainParams = field(default_factory=TrainParams)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def sizes_for(self, dataset: str) -> DatasetSettings:
        return dataset_entry(self.datasets, "membership", dataset)

    def hidden_for(self, dataset: str) -> tuple[int, ...] | None:
        return self.sizes_for(dataset).hidden


def config_from_params(params: Mapping[str, Any]) -> MembershipConfig:
    """Validate ``params['membership']`` and build the typed config (unknown keys refused by name)."""
    return from_mapping(MembershipConfig, section(params, "membership"), "membership")


def check_limits(config: MembershipConfig, dataset: str, size: DatasetSize) -> None:
    """Before any work: members and non-members are drawn from the candidate rows (D ∪ pool, the
    evaluation split is held out), so their sum must fit them; the error names the key and the limit."""
    settings = config.sizes_for(dataset)
    rows = size.train + size.pool
    key = "members" if settings.members >= settings.nonmembers else "nonmembers"
    require(
        settings.members + settings.nonmembers <= rows,
        f"membership.datasets.{dataset}.{key}",
        getattr(settings, key),
        f"members + nonmembers = {settings.members} + {settings.nonmembers} must be at most {rows}, the "
        f"candidate rows of {dataset} (|D| = {size.train} plus {size.pool} pool rows)",
    )
