"""The ``target:`` section of params.yaml: your own trained Keras model as the audit's target.

- ``datasets.<name>``: one audited model, read by ``target-prepare@<name>`` and ``train@<name>-target``:
  ``dataset`` (a built-in dataset of ``data.datasets`` or one of ``data.custom``), ``model`` (a trained
  ``.keras`` file tracked with ``dvc add``) and ``membership`` (a CSV tracked with ``dvc add``, columns
  ``index`` — a row of the dataset's file, 0-based — and ``member`` — 1/0 or true/false: whether the
  model was trained on that row). ``model`` and ``membership`` may be null only outside the DVC
  pipeline: the target is then a *reference* model that dpaudit trains on D with the shadows' recipe
  (used by the experiment contract test).
- ``train``: the shadow models of offline LiRA (Carlini et al. 2022): ``shadows`` models of the
  target's architecture, trained at once on random ``shadow_fraction`` subsets of the pool (rows that
  are neither members nor non-members), non-private (``clip_norm: null``) or DP-SGD.
- ``attack``: the scores auditor's confidence and FPR levels.
- ``bounds``: Epsilon*'s bootstrap size and δ, and ``declared``: the DP training configuration the
  model's owner declares (``sampling_rate`` or ``batch_size`` + ``dataset_size``, ``steps`` or
  ``epochs``, ``noise_multiplier``, ``clip_norm``, ``delta``; all null: nothing declared). With it the
  bounds stage gives every accountant's ε for that DP-SGD (Poisson-sampled Gaussian composed T
  times) beside the per-model evidence. It is the owner's statement, not something this audit checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from dpaudit.config import dataset_entry, from_mapping, require, section
from dpaudit.experiments.params import LevelParams, TrainingKnobs

#: Largest number of DP-SGD steps of the shadow models (epochs / sampling_rate).
MAX_STEPS = 100_000


@dataclass(frozen=True)
class TargetModel:
    """One audited model: the dataset it was trained on, its ``.keras`` file and its membership CSV."""

    dataset: str
    model: str | None = None
    membership: str | None = None

    def __post_init__(self) -> None:
        require(self.model is None or Path(self.model).suffix == ".keras", "model", self.model,
                "must be a .keras file (Keras' model.save('name.keras'))")
        require((self.model is None) == (self.membership is None), "membership", self.membership,
                "model and membership are given together (or both null for a reference target)")
        require(self.membership is None or Path(self.membership).suffix == ".csv", "membership",
                self.membership, "must be a .csv file with columns index and member")


@dataclass(frozen=True)
class TrainParams(TrainingKnobs):
    """Shadow models: how many, on what share of the pool, and how they are trained."""

    shadows: int = 16
    shadow_fraction: float = 0.5
    epochs: float = 20.0
    sampling_rate: float = 0.1
    learning_rate: float = 0.5
    clip_norm: float | None = None
    noise_multiplier: float = 0.0
    hidden: tuple[int, ...] | None = None
    seed: int = 0

    NULL_MEANS: ClassVar[Mapping[str, str]] = {"clip_norm": "non-private shadows"}

    def __post_init__(self) -> None:
        super().__post_init__()  # sampling_rate, learning_rate, clip_norm
        require(self.shadows >= 3, "shadows", self.shadows, "offline LiRA needs >= 3 shadow models")
        require(0 < self.shadow_fraction <= 1, "shadow_fraction", self.shadow_fraction, "must lie in (0, 1]")
        require(self.epochs > 0, "epochs", self.epochs, "must be > 0")
        require(self.epochs / self.sampling_rate <= MAX_STEPS, "epochs", self.epochs,
                f"epochs / sampling_rate must be at most {MAX_STEPS} steps")
        require(self.noise_multiplier >= 0, "noise_multiplier", self.noise_multiplier, "must be >= 0")
        require(self.clip_norm is not None or self.noise_multiplier == 0, "noise_multiplier",
                self.noise_multiplier, "needs clip_norm (DP-SGD noise is relative to the clipping norm)")
        require(self.hidden is None or (len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden)),
                "hidden", self.hidden, "must be null or list layer widths >= 1 (reference target only)")
        require(self.seed >= 0, "seed", self.seed, "must be >= 0")

    @property
    def steps(self) -> int:
        return max(1, round(self.epochs / self.sampling_rate))


@dataclass(frozen=True)
class AttackParams(LevelParams):
    """The scores auditor's joint confidence and the FPR levels of TPR-at-FPR."""

    fpr_levels: tuple[float, ...] = (0.01, 0.05, 0.1)

    def __post_init__(self) -> None:
        super().__post_init__()
        require(bool(self.fpr_levels) and all(0 < f < 1 for f in self.fpr_levels), "fpr_levels",
                list(self.fpr_levels), "must list FPR levels in (0, 1)")


@dataclass(frozen=True)
class DeclaredTraining:
    """The model's DP-SGD configuration as its owner declares it (every key null: none declared).

    q is ``sampling_rate``, or ``batch_size`` / ``dataset_size``; T is ``steps``, or
    round(``epochs`` / q); ``noise_multiplier`` is z; ``clip_norm`` C is recorded (the accountants'
    ε does not depend on it); ``delta`` null means the audit's δ.
    """

    sampling_rate: float | None = None
    batch_size: int | None = None
    dataset_size: int | None = None
    steps: int | None = None
    epochs: float | None = None
    noise_multiplier: float | None = None
    clip_norm: float | None = None
    delta: float | None = None

    def __post_init__(self) -> None:
        if not self.declared:
            return
        require(self.sampling_rate is None or 0 < self.sampling_rate <= 1, "sampling_rate",
                self.sampling_rate, "must lie in (0, 1]")
        require(self.batch_size is None or self.batch_size >= 1, "batch_size", self.batch_size,
                "must be >= 1")
        require(self.dataset_size is None or self.dataset_size >= 1, "dataset_size", self.dataset_size,
                "must be >= 1")
        given_rate = self.sampling_rate is not None
        given_batch = self.batch_size is not None or self.dataset_size is not None
        require(given_rate != given_batch, "sampling_rate", self.sampling_rate,
                "declare either sampling_rate or batch_size with dataset_size (exactly one of the two)")
        require(given_rate or (self.batch_size is not None and self.dataset_size is not None),
                "dataset_size" if self.batch_size is not None else "batch_size",
                self.dataset_size if self.batch_size is not None else self.batch_size,
                "batch_size and dataset_size are declared together")
        require(given_rate or self.batch_size <= self.dataset_size,  # type: ignore[operator]
                "batch_size", self.batch_size, f"must be <= dataset_size ({self.dataset_size})")
        require((self.steps is None) != (self.epochs is None), "steps", self.steps,
                "declare either steps or epochs (exactly one of the two)")
        require(self.steps is None or 1 <= self.steps <= MAX_STEPS, "steps", self.steps,
                f"must be an integer in [1, {MAX_STEPS}]")
        require(self.epochs is None or self.epochs > 0, "epochs", self.epochs, "must be > 0")
        require(self.noise_multiplier is not None and self.noise_multiplier > 0, "noise_multiplier",
                self.noise_multiplier, "must be > 0 (a declared DP configuration needs noise)")
        require(self.clip_norm is None or self.clip_norm > 0, "clip_norm", self.clip_norm,
                "must be null or > 0")
        require(self.delta is None or 0 < self.delta < 1, "delta", self.delta, "must be null or in (0, 1)")
        require(self.total_steps <= MAX_STEPS, "epochs", self.epochs,
                f"epochs / sampling rate must be at most {MAX_STEPS} steps")

    @property
    def declared(self) -> bool:
        """Whether any key was given."""
        return any(getattr(self, f) is not None for f in self.__dataclass_fields__)

    @property
    def q(self) -> float:
        """Poisson sampling rate."""
        if self.sampling_rate is not None:
            return float(self.sampling_rate)
        return float(self.batch_size) / float(self.dataset_size)  # type: ignore[arg-type]

    @property
    def total_steps(self) -> int:
        """T: ``steps``, or ``epochs`` / q rounded (at least 1)."""
        if self.steps is not None:
            return int(self.steps)
        return max(1, round(float(self.epochs) / self.q))  # type: ignore[arg-type]

    def dp_event(self) -> Any:
        """The declared mechanism as a dp_accounting event: Poisson(q)-sampled Gaussian(z), T times."""
        import dp_accounting

        step: Any = dp_accounting.GaussianDpEvent(float(self.noise_multiplier))  # type: ignore[arg-type]
        if self.q < 1.0:
            step = dp_accounting.PoissonSampledDpEvent(sampling_probability=self.q, event=step)
        return dp_accounting.SelfComposedDpEvent(step, self.total_steps)


@dataclass(frozen=True)
class BoundsParams:
    """Epsilon* (Negoescu et al. Def. 2): its bootstrap size and δ (null: 1/(n ln n), n = members);
    ``declared``: the owner's DP training configuration (:class:`DeclaredTraining`)."""

    bootstrap: int = 200
    delta: float | None = None
    declared: DeclaredTraining = field(default_factory=DeclaredTraining)

    def __post_init__(self) -> None:
        require(self.bootstrap >= 10, "bootstrap", self.bootstrap, "must be >= 10")
        require(self.delta is None or 0 < self.delta < 1, "delta", self.delta, "must be null or in (0, 1)")


@dataclass(frozen=True)
class TargetConfig:
    """The whole ``target:`` section."""

    datasets: dict[str, TargetModel] = field(default_factory=dict)
    train: TrainParams = field(default_factory=TrainParams)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def model_for(self, name: str) -> TargetModel:
        return dataset_entry(self.datasets, "target", name)


def config_from_params(params: Mapping[str, Any]) -> TargetConfig:
    """Validate ``params['target']`` (unknown keys refused by name) and each model's base dataset."""
    config = from_mapping(TargetConfig, section(params, "target"), "target")
    data = params.get("data") if isinstance(params.get("data"), Mapping) else {}
    builtin = list(data.get("datasets") or [])
    custom = list(data.get("custom") or {})
    for name, entry in config.datasets.items():
        where = f"target.datasets.{name}"
        require(entry.dataset in builtin + custom, f"{where}.dataset", entry.dataset,
                f"must be listed in data.datasets or declared under data.custom ({builtin + custom})")
        if entry.model is not None:
            require(name not in builtin + custom, where, name,
                    "names the audited model and its prepared data (data/prepared/<name>.npz): choose a "
                    "name that is not a dataset's")
    return config


def check_files(config: TargetConfig) -> None:
    """Before any work: every model and membership file matches its DVC digest, and the model maps
    onto the trainer's families (an unsupported layer is refused with its name and the reason)."""
    from dpaudit.data.custom import verify_against_dvc
    from dpaudit.training.keras_import import model_from_keras_file

    for entry in config.datasets.values():
        if entry.model is None or entry.membership is None:
            continue
        verify_against_dvc(entry.model)
        verify_against_dvc(entry.membership)
        model_from_keras_file(entry.model)
