"""The ``instantiation:`` section of params.yaml (Nasr et al. 2021, :data:`dpaudit.references.NASR_2021`).

Split by the stage that reads it:

- ``train``: the game (trials per world, target ε grid at δ, q, T, C, calibration accountant), the
  threat models to run (A–F of Table I) and every crafter's knobs (shadow count, crafting steps and
  step size, canary sizes 2n, warm-up fraction, the malicious dataset's size and trial count).
- ``datasets.<ds>``: hidden widths (MLP, or conv filters for mnist/cifar10), learning rate and, where
  set, this audit's own |D|; only ``train@<ds>-instantiation`` reads its own entry.
- ``attack``: the Monte Carlo of Distinguisher 3 on the ideal subsampled Gaussian (trials per world,
  the FPRs of the PLD cross-check).
- ``bounds``: the joint confidence, the assumption-free sweep's threshold selection and the ε of the
  Fig. 9 analogue.

Choices the paper leaves open (``../shared/specs/instantiation.md``): n = 16 shadow models, T_c = 30
normalised gradient-ascent steps of size 0.1 (in units of the feature range), 2n ∈ {2, 20, 80}, t_o =
max(1, ⌈0.1·T⌉), a malicious dataset of 100 random inputs. Beyond the paper: E's canary goes first to
inert coordinates (first-layer weights of features that are 0 in all of D), where the data cannot
answer it and its per-step law is exactly the mechanism family's (``canary_placement: update`` is the
paper's smallest-update rule). The spec's 2n = 200 exceeds digits' 96 inert weights; 80 fits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from dpaudit.config import dataset_entry, from_mapping, require, section
from dpaudit.experiments.instantiation.design.registry import ORDER, REGISTRY
from dpaudit.experiments.params import LevelParams, TrainingKnobs

if TYPE_CHECKING:
    from dpaudit.data.custom import DatasetSize

#: The keys of Table I's threat models (:mod:`.design.registry`), weakest first.
THREAT_MODELS: tuple[str, ...] = ORDER
#: Their params.yaml spelling, checked item by item (``Literal`` over the registry's keys).
ThreatModel = Literal[ORDER]  # type: ignore[valid-type]
Accountant = Literal["rdp", "pld"]
#: Pool rows that must remain when ``train_size`` grows D (A's fresh records, Crafter 2's shadows).
MIN_POOL_ROWS = 100


@dataclass(frozen=True)
class TrainParams(TrainingKnobs):
    """What shapes the trained models and the crafted inputs (shared by all datasets)."""

    seed: int = 0
    trials_per_world: int = 100
    target_epsilons: tuple[float, ...] = (2.0,)
    delta: float = 1e-5
    sampling_rate: float = 0.1
    steps: int = 100
    clip_norm: float = 1.0
    calibration_accountant: Accountant = "rdp"
    threat_models: tuple[ThreatModel, ...] = THREAT_MODELS
    fresh_record: bool = True  # A: a fresh population record per trial (False: one fixed record)
    shadow_models: int = 16  # B/C/D: Crafter 2's shadow models
    craft_steps: int = 30  # T_c
    craft_step_size: float = 0.1  # per step, in units of each feature's range
    adaptive_steps: int = 3  # D: gradient steps on x inside every training step (Crafter 3)
    adaptive_start: str = "query"  # D: Crafter 3's x starts at the query x_q ("query") or at 0 ("zero")
    adaptive_step_size: float = 1.0
    adaptive_virtual_clip: bool = True  # D: Crafter 3's virtual step clipped to C (False: the paper's)
    virtual_learning_rate: float | None = None  # D: the virtual step's rate (None: the real one, η/(q|D|))
    canary_sizes: tuple[int, ...] = (2, 20, 80)  # E: 2n (80 fits digits' 96 inert weights)
    canary_placement: Literal["inert", "update"] = "inert"  # E: inert coordinates first, or Crafter 4's
    warmup_fraction: float = 0.1  # t_o = max(1, ceil(warmup_fraction * T))
    malicious_size: int = 100  # F: |D| of Crafter 5's random dataset
    malicious_trials_per_world: int = 500  # F through the real trainer
    malicious_canary_size: int = 2  # F: 2n of its canary
    chunk_size: int | None = None

    NULL_MEANS: ClassVar[Mapping[str, str]] = {"chunk_size": "the trainer chooses"}

    def __post_init__(self) -> None:
        super().__post_init__()  # delta, sampling_rate, clip_norm, chunk_size
        require(self.trials_per_world >= 10, "trials_per_world", self.trials_per_world, "must be >= 10")
        require(
            len(self.target_epsilons) >= 1 and all(e > 0 for e in self.target_epsilons),
            "target_epsilons",
            list(self.target_epsilons),
            "must list at least one ε > 0",
        )
        require(2 <= self.steps <= 100_000, "steps", self.steps, "must lie in 2..100000")
        require(
            len(self.threat_models) >= 1 and len(set(self.threat_models)) == len(self.threat_models),
            "threat_models",
            list(self.threat_models),
            "must list distinct threat models of A..F",
        )
        require(self.shadow_models >= 1, "shadow_models", self.shadow_models, "must be >= 1")
        require(self.craft_steps >= 1, "craft_steps", self.craft_steps, "must be >= 1")
        require(self.craft_step_size > 0, "craft_step_size", self.craft_step_size, "must be > 0")
        require(self.adaptive_steps >= 1, "adaptive_steps", self.adaptive_steps, "must be >= 1")
        require(
            self.adaptive_start in ("query", "zero"), "adaptive_start", self.adaptive_start,
            "must be 'query' or 'zero'",
        )  # fmt: skip
        require(
            isinstance(self.adaptive_virtual_clip, bool), "adaptive_virtual_clip", self.adaptive_virtual_clip,
            "must be true (clip the virtual step to C) or false (the paper's unclipped step)",
        )  # fmt: skip
        require(self.adaptive_step_size > 0, "adaptive_step_size", self.adaptive_step_size, "must be > 0")
        require(
            self.virtual_learning_rate is None or self.virtual_learning_rate > 0,
            "virtual_learning_rate",
            self.virtual_learning_rate,
            "must be null or > 0",
        )
        require(
            len(self.canary_sizes) >= 1 and all(s >= 2 and s % 2 == 0 for s in self.canary_sizes),
            "canary_sizes",
            list(self.canary_sizes),
            "must list even canary sizes 2n >= 2 (Crafter 4 sets n coordinates to +C and n to −C)",
        )
        require(0 < self.warmup_fraction < 1, "warmup_fraction", self.warmup_fraction, "must lie in (0, 1)")
        require(self.malicious_size >= 1, "malicious_size", self.malicious_size, "must be >= 1")
        require(
            self.malicious_trials_per_world >= 10,
            "malicious_trials_per_world",
            self.malicious_trials_per_world,
            "must be >= 10",
        )
        require(
            self.malicious_canary_size >= 2 and self.malicious_canary_size % 2 == 0,
            "malicious_canary_size",
            self.malicious_canary_size,
            "must be an even size 2n >= 2 (Crafter 4 sets n coordinates to +C and n to −C)",
        )

    @property
    def warmup_steps(self) -> int:
        """t_o = max(1, ⌈warmup_fraction·T⌉) (Crafter 4's warm-up), at most T − 1."""
        return min(self.steps - 1, max(1, math.ceil(self.warmup_fraction * self.steps - 1e-9)))


@dataclass(frozen=True)
class DatasetSettings:
    """Per dataset: layer widths (MLP) or conv filters (mnist/cifar10 CNN), the learning rate, and |D|.

    ``train_size`` null keeps the prepared D (``data.prepare.<ds>.train_size``, shared with the other
    audits); a number resizes D for this audit only: the prepared D's first rows, or all of them plus
    pool rows drawn with ``train.seed`` (the pool keeps the rest, for A's fresh records and the shadows).
    """

    hidden: tuple[int, ...] | None = None
    learning_rate: float = 0.5
    train_size: int | None = None

    def __post_init__(self) -> None:
        require(
            self.train_size is None or self.train_size >= 2,
            "train_size",
            self.train_size,
            "must be null or an integer >= 2",
        )
        require(
            self.hidden is None or (len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden)),
            "hidden",
            None if self.hidden is None else list(self.hidden),
            "must be null or list positive widths",
        )
        require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")


@dataclass(frozen=True)
class AttackParams:
    """Distinguisher 3's Monte Carlo on the ideal subsampled Gaussian (threat model F's idealisation)."""

    simulation_trials_per_world: int = 100_000
    simulation_fprs: tuple[float, ...] = (0.001, 0.01, 0.1)

    def __post_init__(self) -> None:
        require(
            self.simulation_trials_per_world >= 1000,
            "simulation_trials_per_world",
            self.simulation_trials_per_world,
            "must be >= 1000",
        )
        require(
            all(0 < f < 1 for f in self.simulation_fprs),
            "simulation_fprs",
            list(self.simulation_fprs),
            "must lie in (0, 1)",
        )


@dataclass(frozen=True)
class BoundsParams(LevelParams):
    """Joint confidence of every bound, the sweep's threshold selection, the Fig. 9 ε."""

    selection: Literal["split", "bonferroni"] = "bonferroni"
    figure_epsilon: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.figure_epsilon > 0, "figure_epsilon", self.figure_epsilon, "must be > 0")


@dataclass(frozen=True)
class InstantiationConfig:
    """The whole ``instantiation:`` section."""

    datasets: dict[str, DatasetSettings] = field(default_factory=dict)
    train: TrainParams = field(default_factory=TrainParams)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def dataset(self, name: str) -> DatasetSettings:
        return dataset_entry(self.datasets, "instantiation", name)


def config_from_params(params: Mapping[str, Any]) -> InstantiationConfig:
    """Validate ``params['instantiation']`` (unknown keys refused by their full path)."""
    return from_mapping(InstantiationConfig, section(params, "instantiation"), "instantiation")


def check_limits(config: InstantiationConfig, dataset: str, size: DatasetSize) -> None:
    """Before any work: what only the dataset can refuse (each error names the key and the limit).

    ``datasets.<ds>.train_size`` must leave :data:`MIN_POOL_ROWS` pool rows of D ∪ U (A's fresh
    records and Crafter 2's shadows draw from them), and every canary size 2n (E's and F's) must fit
    the model's parameter count, since Crafter 4 sets 2n distinct coordinates.
    """
    from dpaudit.training.modelling import build_model

    settings = config.dataset(dataset)
    where = f"instantiation.datasets.{dataset}"
    most = size.train + size.pool - MIN_POOL_ROWS
    require(
        settings.train_size is None or settings.train_size <= most,
        f"{where}.train_size",
        settings.train_size,
        f"must be at most {most}: {dataset} has |D| = {size.train} and {size.pool} pool rows, and "
        f"{MIN_POOL_ROWS} pool rows must remain for fresh records and shadow models",
    )
    model = build_model(dataset, size.input_shape, size.num_classes, settings.hidden)
    tp = config.train
    size_keys = {REGISTRY[name].canary_size_key for name in tp.threat_models}
    too_big = [s for s in tp.canary_sizes if s > model.num_params]
    require(
        not too_big or "canary_sizes" not in size_keys,
        "instantiation.train.canary_sizes",
        list(tp.canary_sizes),
        f"every size must be at most the model's parameter count, {model.num_params} on {dataset} "
        f"(Crafter 4 sets 2n distinct coordinates); {too_big} do not fit",
    )
    require(
        tp.malicious_canary_size <= model.num_params or "malicious_canary_size" not in size_keys,
        "instantiation.train.malicious_canary_size",
        tp.malicious_canary_size,
        f"must be at most the model's parameter count, {model.num_params} on {dataset}",
    )
