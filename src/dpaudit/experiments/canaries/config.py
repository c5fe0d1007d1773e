"""The ``canaries:`` section of params.yaml, split by the stage that reads it.

Sample-level evaluation of Aerni et al. (:data:`dpaudit.references.AERNI`) with LiRA (Carlini et
al. 2022, "Membership inference attacks from first principles", arXiv 2112.03570):

- ``train``: the M models of every defence (seed, δ, Poisson rate q, epochs, learning rates, the
  DP-SGD clipping norm and noise multipliers, the utility-first noise multiplier).
- ``datasets.<ds>``: the audit set (how many canaries of each type, the number of always-in
  records, layer widths, the out-of-distribution kind, the duplicate count); only
  ``train@<ds>-canaries`` reads its own entry.
- ``attack``: LiRA's confidence (logit-scaled or hinge), variance (per-sample or global) and query
  augmentations.
- ``bounds``: the auditor's joint confidence and the FPR levels of the TPR table.

Defaults live here, in the dataclasses; ``params.yaml`` repeats them and a test checks that the two
agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.config import dataset_entry, from_mapping, require, section
from dpaudit.experiments.params import LevelParams, TrainingKnobs

if TYPE_CHECKING:
    from dpaudit.data.custom import DatasetSize

#: Canary types, in the order of the audit set (Aerni et al. §4: mislabeled, blank, OOD, duplicates),
#: ``mislabeled_duplicates`` (a mislabeled record repeated: the canary that survives a distillation
#: defence which hides each record from the teachers that label it) and ``clean``, unmodified random
#: records: the population-style view.
CANARY_TYPES = ("mislabeled", "blank", "ood", "duplicates", "mislabeled_duplicates", "clean")
#: The published heuristic defences the canaries audit can train (:mod:`dpaudit.training.heuristics`).
HEURISTIC_NAMES = ("relaxloss", "selena", "hamp")
OodKind = Literal["noise", "inverted"]
Confidence = Literal["logit", "hinge"]
Variance = Literal["per_sample", "global"]

#: Largest number of steps (epochs / q) a defence may ask for.
MAX_STEPS = 100_000


@dataclass(frozen=True)
class CanaryCounts:
    """How many canaries of each type: K is their sum (default 200; Aerni et al. use 500)."""

    mislabeled: int = 50
    blank: int = 20
    ood: int = 20
    duplicates: int = 20
    mislabeled_duplicates: int = 20
    clean: int = 70

    def __post_init__(self) -> None:
        for name in CANARY_TYPES:
            value = getattr(self, name)
            require(value >= 0, name, value, "must be >= 0")
        require(self.clean >= 1, "clean", self.clean, "need clean canaries for the population-style view")
        require(self.total >= 2, "total", self.total, "need at least 2 canaries")

    @property
    def total(self) -> int:
        return sum(int(getattr(self, name)) for name in CANARY_TYPES)

    def as_dict(self) -> dict[str, int]:
        return {name: int(getattr(self, name)) for name in CANARY_TYPES}


@dataclass(frozen=True)
class DatasetSettings:
    """The audit set of one dataset.

    ``base`` records (drawn from D ∪ U) are in every model; the canaries come from the rest of the
    pool; test accuracy is measured on the prepared evaluation split. ``ood``: ``noise`` = uniform
    noise inputs with random labels, ``inverted`` = 1 − x with the record's true label.
    ``duplicate_copies``: how many times each ``duplicates`` canary (a clean record) and each
    ``mislabeled_duplicates`` canary is repeated.
    """

    base: int = 1000
    canaries: CanaryCounts = field(default_factory=CanaryCounts)
    hidden: tuple[int, ...] | None = None
    ood: OodKind = "noise"
    duplicate_copies: int = 4

    def __post_init__(self) -> None:
        require(self.base >= 10, "base", self.base, "need at least 10 always-in records")
        require(
            self.hidden is None or (len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden)),
            "hidden",
            None if self.hidden is None else list(self.hidden),
            "must be null or list at least one layer width, each >= 1",
        )
        require(self.duplicate_copies >= 2, "duplicate_copies", self.duplicate_copies, "must be >= 2")


@dataclass(frozen=True)
class RelaxLossParams:
    """RelaxLoss (Chen et al., ICLR 2022): the target loss ``alpha`` the training loss is held at,
    the learning rate and the epochs (at the audit's sampling rate)."""

    alpha: float = 0.6
    learning_rate: float = 0.5
    epochs: float = 60.0

    def __post_init__(self) -> None:
        require(self.alpha > 0, "alpha", self.alpha, "must be > 0")
        require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")
        # Training ends in the phase of its last epoch; an odd count ends in gradient ascent.
        require(
            self.epochs > 0 and float(self.epochs).is_integer() and int(self.epochs) % 2 == 0,
            "epochs",
            self.epochs,
            "must be an even whole number (RelaxLoss alternates ascent and flattening epochs)",
        )


@dataclass(frozen=True)
class SelenaParams:
    """SELENA (Tang et al., USENIX Security 2022): K ``submodels``, each record hidden from
    ``excluded`` = L of them (Split-AI), then a student distilled on the Split-AI labels."""

    submodels: int = 8
    excluded: int = 3
    learning_rate: float = 1.0
    epochs: float = 16.0
    distill_epochs: float = 16.0

    def __post_init__(self) -> None:
        require(self.submodels >= 2, "submodels", self.submodels, "must be >= 2")
        require(
            1 <= self.excluded < self.submodels, "excluded", self.excluded, "must lie in 1 .. submodels - 1"
        )
        require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")
        require(self.epochs > 0, "epochs", self.epochs, "must be > 0")
        require(self.distill_epochs > 0, "distill_epochs", self.distill_epochs, "must be > 0")


@dataclass(frozen=True)
class HampParams:
    """HAMP (Chen & Pattabiraman, NDSS 2024): soft labels of entropy ``entropy_threshold`` · log C,
    an entropy regulariser of strength ``alpha``, the learning rate and the epochs; the released
    outputs are replaced by those of random inputs in the query's class ranking."""

    entropy_threshold: float = 0.9
    alpha: float = 0.01
    learning_rate: float = 1.0
    epochs: float = 40.0

    def __post_init__(self) -> None:
        require(
            0 < self.entropy_threshold < 1, "entropy_threshold", self.entropy_threshold, "must lie in (0, 1)"
        )
        require(self.alpha >= 0, "alpha", self.alpha, "must be >= 0")
        require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be > 0")
        require(self.epochs > 0, "epochs", self.epochs, "must be > 0")


@dataclass(frozen=True)
class TrainParams(TrainingKnobs):
    """The M models of every defence, each canary in exactly M/2 of them (Aerni et al. §3).

    Undefended models train without clipping or noise at ``learning_rate``; DP-SGD models
    (Abadi et al.) clip to ``clip_norm`` and add noise ``noise_multipliers`` × C, plus one
    utility-first setting (``utility_first_noise``, ε far above 1000), at ``dp_learning_rate``.
    ``heuristics``: the published heuristic defences trained beside them, with their settings
    (``relaxloss``, ``selena``, ``hamp``; tuned to the utility target in ``benchmarks/tune_heuristics.py``).
    """

    seed: int = 0
    models: int = 64
    delta: float = 1e-5
    sampling_rate: float = 0.1
    epochs: float = 30.0
    learning_rate: float = 1.0
    dp_learning_rate: float = 2.0
    clip_norm: float = 1.0
    noise_multipliers: tuple[float, ...] = (0.5, 2.0)
    utility_first_noise: float | None = 0.1
    heuristics: tuple[str, ...] = HEURISTIC_NAMES
    relaxloss: RelaxLossParams = field(default_factory=RelaxLossParams)
    selena: SelenaParams = field(default_factory=SelenaParams)
    hamp: HampParams = field(default_factory=HampParams)

    def __post_init__(self) -> None:
        super().__post_init__()  # delta, sampling_rate, learning_rate, clip_norm
        require(
            set(self.heuristics) <= set(HEURISTIC_NAMES)
            and len(set(self.heuristics)) == len(self.heuristics),
            "heuristics",
            list(self.heuristics),
            f"must list distinct names among {list(HEURISTIC_NAMES)}",
        )
        require(self.models >= 8 and self.models % 2 == 0, "models", self.models, "must be even and >= 8")
        require(self.epochs > 0, "epochs", self.epochs, "must be > 0")
        require(
            self.epochs / self.sampling_rate <= MAX_STEPS,
            "epochs",
            self.epochs,
            f"epochs / sampling_rate must be at most {MAX_STEPS} steps",
        )
        require(self.dp_learning_rate > 0, "dp_learning_rate", self.dp_learning_rate, "must be > 0")
        require(
            all(z > 0 for z in self.noise_multipliers),
            "noise_multipliers",
            list(self.noise_multipliers),
            "every noise multiplier must be > 0",
        )
        require(
            self.utility_first_noise is None or self.utility_first_noise > 0,
            "utility_first_noise",
            self.utility_first_noise,
            "must be null or > 0",
        )


@dataclass(frozen=True)
class AttackParams:
    """LiRA (Carlini et al. 2022, Algorithm 1) and the label-only attack on the heuristic.

    ``confidence``: which confidence the headline LiRA uses (both are always computed);
    ``variance``: per-sample (per canary) or global σ; ``augment``: average over query
    augmentations (the input and its four one-pixel shifts, image data only).
    """

    confidence: Confidence = "logit"
    variance: Variance = "per_sample"
    augment: bool = False


@dataclass(frozen=True)
class BoundsParams(LevelParams):
    """The scores auditor's joint confidence and the FPR levels of the TPR table."""

    fpr_levels: tuple[float, ...] = (0.001, 0.01, 0.05)

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            len(self.fpr_levels) >= 1 and all(0 < f < 1 for f in self.fpr_levels),
            "fpr_levels",
            list(self.fpr_levels),
            "must list levels in (0, 1)",
        )


@dataclass(frozen=True)
class CanariesConfig:
    """The whole ``canaries:`` section."""

    datasets: dict[str, DatasetSettings]
    train: TrainParams = field(default_factory=TrainParams)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def settings_for(self, dataset: str) -> DatasetSettings:
        return dataset_entry(self.datasets, "canaries", dataset)


def config_from_params(params: Mapping[str, Any]) -> CanariesConfig:
    """Validate ``params['canaries']`` and build the typed config (unknown keys refused by name)."""
    return from_mapping(CanariesConfig, section(params, "canaries"), "canaries")


def check_limits(config: CanariesConfig, dataset: str, size: DatasetSize) -> None:
    """Before any work: ``base`` always-in records plus the K canaries must fit the rows of D ∪ U (the
    evaluation split is held out for test accuracy); the error names the key and the limit."""
    settings = config.settings_for(dataset)
    where = f"canaries.datasets.{dataset}"
    rows = size.train + size.pool
    total = settings.canaries.total
    require(
        settings.base + total <= rows,
        f"{where}.base" if settings.base > rows - 1 else f"{where}.canaries",
        settings.base if settings.base > rows - 1 else settings.canaries.as_dict(),
        f"base + canaries = {settings.base} + {total} = {settings.base + total} records must be at most "
        f"{rows}, the rows of {dataset} outside its evaluation split",
    )
