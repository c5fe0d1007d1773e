"""The ``prepare`` stage: parsed population → D, the pool U \\ D and an evaluation set, drawn with the seed.

Configuration is the ``data`` section of ``params.yaml`` (:class:`DataConfig`). The split is a pure
function (:func:`draw_split`) of the population size, the two sizes and the seed; :func:`prepare_dataset`
adds the I/O: parse the raw files, draw, write ``data/prepared/<ds>.npz`` atomically.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dpaudit.config import ParamsError, _RangeError, from_mapping, require, section
from dpaudit.data.prepared import PreparedData
from dpaudit.data.registry import DATASET_NAMES, get_dataset
from dpaudit.data.splits import draw_split

if TYPE_CHECKING:
    from dpaudit.data.custom import CustomDatasetSpec

__all__ = [
    "CustomEntry",
    "DataConfig",
    "MnistPrepareConfig",
    "PrepareConfig",
    "PrepareSection",
    "build_prepared",
    "draw_split",
    "prepare_dataset",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrepareConfig:
    """Sizes of the training set D and of the held-out evaluation set (``data.prepare.<ds>``)."""

    train_size: int
    eval_size: int


@dataclass(frozen=True)
class MnistPrepareConfig(PrepareConfig):
    """MNIST adds ``pool``: the official split(s) forming the population (``test`` needs no train images)."""

    pool: Literal["train", "test", "all"] = "test"


@dataclass(frozen=True)
class PrepareSection:
    """``data.prepare``: one entry per registry dataset; an unknown dataset name is an unknown key."""

    adult: PrepareConfig = field(default_factory=lambda: PrepareConfig(train_size=1000, eval_size=5000))
    digits: PrepareConfig = field(default_factory=lambda: PrepareConfig(train_size=100, eval_size=500))
    mnist: MnistPrepareConfig = field(
        default_factory=lambda: MnistPrepareConfig(train_size=100, eval_size=1000, pool="test")
    )
    purchase100: PrepareConfig = field(default_factory=lambda: PrepareConfig(train_size=1000, eval_size=5000))
    cifar10: PrepareConfig = field(default_factory=lambda: PrepareConfig(train_size=1000, eval_size=5000))


@dataclass(frozen=True)
class CustomEntry:
    """One ``data.custom.<name>`` entry: the user's own DVC-tracked file (see :class:`CustomDatasetSpec`).

    ``path`` is a CSV, Parquet or NPZ file tracked with ``dvc add``; ``label`` its label column (NPZ:
    the labels array, ``features`` the feature array); ``categorical`` / ``numeric`` declare column
    types (others are auto-detected); ``train_size`` / ``eval_size`` the sizes of D and of the
    evaluation set; ``measure`` the tabular dissimilarity measure of the sensitivity search;
    ``seed`` the split seed (null: ``data.seed``).
    """

    path: str
    label: str
    train_size: int
    eval_size: int
    measure: str = "manhattan"
    categorical: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    features: str = "features"
    seed: int | None = None


@dataclass(frozen=True)
class DataConfig:
    """The ``data`` section of ``params.yaml``: mirror, seed, enabled datasets, per-dataset sizes.

    ``custom`` declares the user's own datasets by name (default: none). They are *not* listed in
    ``datasets``: each has its own DVC stages (``download-custom@<name>``, ``prepare-custom@<name>``,
    ``sensitivity-custom@<name>``), whose download stage depends on the data file itself, so
    ``dvc add`` of a new version reruns exactly that dataset's stages (README, "Audit your own data
    and model"). Audits may name a built-in dataset of ``datasets`` or a custom one.
    """

    mirror: str | None = None
    seed: int = 0
    datasets: tuple[str, ...] = ("adult", "digits")
    prepare: PrepareSection = field(default_factory=PrepareSection)
    custom: dict[str, CustomEntry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = f"one of {list(DATASET_NAMES)}"
        for i, name in enumerate(self.datasets):
            if name in self.custom:
                require(False, f"data.datasets[{i}]", name,
                        f"is a custom dataset (data.custom.{name}): custom datasets have their own "
                        f"stages (download-custom@{name}, ...) and are not listed in data.datasets; "
                        f"remove it from data.datasets")
            require(name in DATASET_NAMES, f"data.datasets[{i}]", name, f"must be {known}")
        for name in self.custom:
            self.custom_spec(name)  # validates the entry, errors name data.custom.<name>.<key>
        unique = len(set(self.datasets)) == len(self.datasets)
        require(unique, "data.datasets", list(self.datasets), "must not repeat a dataset")
        require(self.seed >= 0, "data.seed", self.seed, "must be >= 0")
        for name in DATASET_NAMES:
            sizes = getattr(self.prepare, name)
            where = f"data.prepare.{name}"
            require(sizes.train_size >= 1, f"{where}.train_size", sizes.train_size, "must be >= 1")
            require(sizes.eval_size >= 0, f"{where}.eval_size", sizes.eval_size, "must be >= 0")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DataConfig:
        """Build and validate from the whole params mapping (reads its ``data`` section)."""
        return from_mapping(cls, section(params, "data"), "data")

    @property
    def all_datasets(self) -> tuple[str, ...]:
        """Every dataset the pipeline prepares: the built-in ``datasets``, then the ``custom`` ones."""
        return (*self.datasets, *self.custom)

    def custom_spec(self, name: str) -> CustomDatasetSpec:
        """The validated :class:`CustomDatasetSpec` of ``data.custom.<name>`` (errors name the key)."""
        where = f"data.custom.{name}"
        if name not in self.custom:
            raise ParamsError(
                f"params: missing key '{where}' (custom datasets: {', '.join(self.custom) or 'none'})"
            )
        from dpaudit.data.custom import CustomDatasetSpec

        entry = self.custom[name]
        try:
            spec = CustomDatasetSpec(name=str(name), seed=self.seed if entry.seed is None else entry.seed,
                                     **{k: v for k, v in asdict(entry).items() if k != "seed"})
        except _RangeError as exc:
            raise _RangeError(f"{where}.{exc.key}", exc.value, exc.expectation) from None
        require(spec.eval_size >= 1, f"{where}.eval_size", spec.eval_size,
                "must be >= 1: every audit measures utility (test accuracy, AUROC) on the evaluation set")
        return spec

    def check_custom_files(self) -> None:
        """Check every custom dataset's file before any work: it matches its ``.dvc`` digest and
        loads (label column present, not empty, two classes or more, numeric columns numeric).
        Raises :class:`~dpaudit.data.custom.CustomDataError` naming the file and the problem."""
        from dpaudit.data.custom import load_custom, verify_against_dvc

        for name in self.custom:
            spec = self.custom_spec(name)
            verify_against_dvc(spec.path)
            features, labels = load_custom(spec)
            rows = len(features)
            require(spec.train_size + spec.eval_size < rows, f"data.custom.{name}.train_size",
                    spec.train_size,
                    f"train_size + eval_size = {spec.train_size} + {spec.eval_size} must leave pool rows "
                    f"of the {rows} in {spec.path}")

    def prepare_for(self, name: str) -> PrepareConfig:
        """The ``data.prepare.<name>`` entry; an unknown dataset is a :class:`ParamsError`."""
        require(name in DATASET_NAMES, "dataset", name, f"must be one of {list(DATASET_NAMES)}")
        return getattr(self.prepare, name)

    def pool_for(self, name: str) -> str | None:
        """The population pool of a pooled dataset (mnist), ``None`` for the others."""
        return getattr(self.prepare_for(name), "pool", None)


def build_prepared(name: str, raw_dir: str | Path, config: DataConfig) -> PreparedData:
    """Parse ``raw_dir`` (the download stage's output) and draw the split; no files are written."""
    spec = get_dataset(name)
    sizes = config.prepare_for(name)
    pool = spec.check_pool(config.pool_for(name))
    raw_dir = Path(raw_dir)
    if spec.files and not raw_dir.is_dir():
        raise FileNotFoundError(f"{raw_dir} does not exist: run `dvc repro download@{name}` first")
    parsed = spec.parse(raw_dir, pool)
    train, rest, evaluation = draw_split(
        len(parsed.X), sizes.train_size, sizes.eval_size, config.seed, where=f"data.prepare.{name}"
    )
    if len(rest) == 0:
        log.warning("%s: train_size + eval_size use the whole population; the pool U \\ D is empty", name)
    return PreparedData(
        name=name,
        kind=parsed.kind,
        X=parsed.X.astype(np.float32, copy=False),
        y=parsed.y.astype(np.int64, copy=False),
        num_classes=parsed.num_classes,
        feature_names=parsed.feature_names,
        train_idx=train,
        pool_idx=rest,
        eval_idx=evaluation,
    )


def prepare_dataset(name: str, raw_dir: str | Path, config: DataConfig, out_path: str | Path) -> PreparedData:
    """The prepare stage: parse, split with ``config.seed`` and write ``out_path`` (``.npz``) atomically."""
    prepared = build_prepared(name, raw_dir, config)
    prepared.save(out_path)
    log.info(
        "%s: %d rows, input %s, %d classes; |D| = %d, |pool| = %d, |eval| = %d → %s",
        name,
        len(prepared.X),
        prepared.input_shape,
        prepared.num_classes,
        len(prepared.train_idx),
        len(prepared.pool_idx),
        len(prepared.eval_idx),
        out_path,
    )
    return prepared
