"""The ``training_audit:`` section of params.yaml: the user's own DP training, audited in the pipeline.

- ``train``: ``function`` (``"<module>:<function>"``, importable from the repository root) taking
  ``(dataset, audit, **options)``; ``options``, the user's own keyword arguments (e.g. a bug switch);
  ``declared``, the DP-SGD the claim was computed from (:class:`dpaudit.training_audit.DeclaredDPSGD`);
  the audit's ``canaries``, ``runs`` (pooled by :func:`dpaudit.training_audit.runs.audit_runs`),
  ``runner`` (local | ray) and ``seed``.
- ``datasets.<ds>``: ``train_size`` (null: the prepared |D|; a number: |D| then pool rows, this audit's
  own training set), read only by that dataset's train stage.
- ``attack``: no settings. ``bounds``: the verdict's joint ``confidence``.

Everything that can be refused without training is refused by the check stage, naming the key:
the function's module and name, its signature against ``options``, the declaration against the data.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.config import ParamsError, dataset_entry, from_mapping, require, section
from dpaudit.experiments.params import LevelParams

if TYPE_CHECKING:
    from dpaudit.data.custom import DatasetSize

Runner = Literal["local", "ray"]
Sampling = Literal["poisson", "shuffle"]
KEY = "training_audit"
#: The fewest canaries an audit may use.
MIN_CANARIES = 10


@dataclass(frozen=True)
class Declared:
    """The declared DP-SGD: σ, C, B, N (null: this audit's training set size), epochs or steps, δ,
    sampling, and the claimed ε (null: the PLD accountant's ε of the declaration)."""

    noise_multiplier: float = 1.61
    clip_norm: float = 1.0
    batch_size: int = 64
    dataset_size: int | None = None
    epochs: int | None = 10
    steps: int | None = None
    delta: float = 1e-5
    sampling: Sampling = "shuffle"
    epsilon: float | None = None

    def __post_init__(self) -> None:
        require(
            math.isfinite(self.noise_multiplier) and self.noise_multiplier > 0,
            "noise_multiplier",
            self.noise_multiplier,
            "must be a finite number > 0",
        )
        require(
            math.isfinite(self.clip_norm) and self.clip_norm > 0, "clip_norm", self.clip_norm, "must be > 0"
        )
        require(self.batch_size >= 1, "batch_size", self.batch_size, "must be >= 1")
        require(
            self.dataset_size is None or self.dataset_size >= 1,
            "dataset_size",
            self.dataset_size,
            "must be >= 1",
        )
        require(
            (self.epochs is None) != (self.steps is None),
            "epochs",
            self.epochs,
            "give exactly one of 'epochs' and 'steps' (the other null)",
        )
        require(self.epochs is None or self.epochs >= 1, "epochs", self.epochs, "must be >= 1")
        require(self.steps is None or self.steps >= 1, "steps", self.steps, "must be >= 1")
        require(0 < self.delta < 1, "delta", self.delta, "must lie in (0, 1)")
        require(
            self.epsilon is None or (math.isfinite(self.epsilon) and self.epsilon > 0),
            "epsilon",
            self.epsilon,
            "must be a finite number > 0 (null: the PLD accountant's ε)",
        )


@dataclass(frozen=True)
class TrainParams:
    """The user's training function, its options, the declaration and the audit's own settings."""

    function: str = "examples.dp_training.digits_keras:train"
    options: dict[str, Any] = field(default_factory=lambda: {"bug": "none"})
    declared: Declared = field(default_factory=Declared)
    canaries: int = 500
    runs: int = 1
    runner: Runner = "local"
    seed: int = 0

    def __post_init__(self) -> None:
        module, _, name = self.function.partition(":")
        require(
            bool(module) and name.isidentifier(),
            "function",
            self.function,
            "must read '<module>:<function>' (e.g. 'examples.dp_training.digits_keras:train')",
        )
        require(self.canaries >= MIN_CANARIES, "canaries", self.canaries, f"must be at least {MIN_CANARIES}")
        require(self.runs >= 1, "runs", self.runs, "must be >= 1")
        require(self.runs <= 1000, "runs", self.runs, "must be at most 1000")


@dataclass(frozen=True)
class DatasetSettings:
    """``train_size``: this audit's |D| (null: the prepared training set; more: D then pool rows)."""

    train_size: int | None = None

    def __post_init__(self) -> None:
        require(
            self.train_size is None or self.train_size >= 1, "train_size", self.train_size, "must be >= 1"
        )


@dataclass(frozen=True)
class AttackParams:
    """No settings: the canaries' scores are the transcript's likelihood-ratio scores."""


@dataclass(frozen=True)
class BoundsParams(LevelParams):
    """``confidence``: the joint level of the verdict (the bound and every check together)."""


def _default_datasets() -> dict[str, DatasetSettings]:
    return {"digits": DatasetSettings(1000), "adult": DatasetSettings(None)}


@dataclass(frozen=True)
class TrainingAuditConfig:
    """The whole ``training_audit`` section."""

    train: TrainParams = field(default_factory=TrainParams)
    datasets: dict[str, DatasetSettings] = field(default_factory=_default_datasets)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def dataset(self, name: str) -> DatasetSettings:
        return dataset_entry(self.datasets, KEY, name)


def config_from_params(params: Mapping[str, Any]) -> TrainingAuditConfig:
    """Validate and build the ``training_audit`` section (unknown keys refused by name)."""
    return from_mapping(TrainingAuditConfig, section(params, KEY), KEY)


def load_function(spec: str, key: str = f"{KEY}.train.function") -> Callable[..., Any]:
    """The user's function named ``"<module>:<function>"`` (the module imported from sys.path, which the
    stages and the check stage extend by the working directory); errors name ``key``."""
    import sys

    root = str(Path.cwd())
    if root not in sys.path:
        sys.path.insert(0, root)
    module_name, _, name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ParamsError(f"params: {key}: cannot import module {module_name!r} ({exc})") from exc
    function = getattr(module, name, None)
    if not callable(function):
        raise ParamsError(f"params: {key}: module {module_name!r} has no function {name!r}")
    return function


def check_signature(function: Callable[..., Any], options: Mapping[str, Any]) -> None:
    """Refuse a function that cannot be called as ``function(dataset, audit, **options)``, naming the
    key: too few positional parameters, or an option it does not take."""
    try:
        sig = inspect.signature(function)
    except (TypeError, ValueError) as exc:  # builtins without a signature
        raise ParamsError(f"params: {KEY}.train.function: cannot read its signature ({exc})") from exc
    try:
        sig.bind(object(), object(), **options)
    except TypeError as exc:
        params = list(sig.parameters)
        unknown = [
            k
            for k in options
            if k not in sig.parameters and not any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        ]
        if unknown:
            raise ParamsError(
                f"params: {KEY}.train.options.{unknown[0]}: the function takes no option {unknown[0]!r} "
                f"(its parameters: {', '.join(params)})"
            ) from exc
        raise ParamsError(
            f"params: {KEY}.train.function: must take (dataset, audit, **options); "
            f"its signature is {sig} ({exc})"
        ) from exc


def audit_size(config: TrainingAuditConfig, dataset: str, prepared_train: int) -> int:
    """N: this audit's training set size (``datasets.<ds>.train_size`` or the prepared |D|)."""
    size = config.dataset(dataset).train_size
    return prepared_train if size is None else int(size)


def check_declaration(declared: Declared, size: int, where: str = f"{KEY}.train.declared") -> None:
    """The declaration against the data: B ≤ N, a given N equal to the training set size."""
    require(
        declared.dataset_size is None or declared.dataset_size == size,
        f"{where}.dataset_size",
        declared.dataset_size,
        f"must equal the audit's training set size {size} (or be null)",
    )
    require(
        declared.batch_size <= size,
        f"{where}.batch_size",
        declared.batch_size,
        f"must be at most the training set size N = {size}",
    )


def check_limits(config: TrainingAuditConfig, dataset: str, size: DatasetSize) -> None:
    """Before any training: the function and its options, ``train_size`` against the dataset, and the
    declaration against the training set."""
    tp = config.train
    check_signature(load_function(tp.function), tp.options)
    settings = config.dataset(dataset)
    available = size.train + size.pool
    require(
        settings.train_size is None or settings.train_size <= available,
        f"{KEY}.datasets.{dataset}.train_size",
        settings.train_size,
        f"must be at most |D| + pool = {available} for {dataset}",
    )
    check_declaration(tp.declared, audit_size(config, dataset, size.train))


def code_record(config: TrainingAuditConfig, root: Path) -> dict[str, Any]:
    """For the check stage's record of this audit (its train stage depends on it): the md5 of the user's
    function's module file (when it lies under ``root``) and of every file of the training audit
    library that the train stage runs, so that editing either reruns this audit alone."""
    import hashlib
    import sys

    from dpaudit.experiments.training_audit.design import LIBRARY, library

    def md5(path: Path) -> str:
        return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()

    record: dict[str, Any] = {"function": config.train.function, "function_source": None}
    base = root / Path(*config.train.function.partition(":")[0].split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            record["function_source"] = {"path": path.relative_to(root).as_posix(), "md5": md5(path)}
            break
    library("runs")  # the library's whole closure, as the train stage imports it
    files = sorted(
        Path(module.__file__)
        for name, module in list(sys.modules.items())
        if name.startswith(("dpaudit.training_audit", "dpaudit.bounds")) and getattr(module, "__file__", None)
    )
    src = Path(sys.modules["dpaudit"].__file__).parent.parent
    record["library"] = {path.relative_to(src).as_posix(): md5(path) for path in files}
    record["library_root"] = LIBRARY
    return record


def declared_dpsgd(declared: Declared, size: int) -> Any:
    """The library's :class:`~dpaudit.training_audit.DeclaredDPSGD` for training set size ``size``."""
    from dpaudit.experiments.training_audit.design import library

    return library("declaration").DeclaredDPSGD(
        noise_multiplier=declared.noise_multiplier,
        clip_norm=declared.clip_norm,
        batch_size=declared.batch_size,
        dataset_size=size,
        epochs=declared.epochs,
        steps=declared.steps,
        delta=declared.delta,
        sampling=declared.sampling,
        epsilon=declared.epsilon,
    )
