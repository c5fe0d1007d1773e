"""The experiment contract: the :class:`Experiment` protocol, the train manifest and the bounds result.

A pipeline audit is one dataset × one experiment. Every experiment runs the same five stages
(train → losses → attack → bounds → report section), each writing only into the location the stage
runner gives it. What flows between stages is explicit:

- ``train`` returns a :class:`TrainManifest`, the facts of training (steps, q, z, C, δ, sizes,
  seeds and the mechanism of every trained setting as a dp_accounting ``DpEvent``). The runner writes
  it next to the weights; later stages get it back from :func:`read_manifest` and never read
  training facts from ``params.yaml`` again (DESIGN.md, "Training facts flow forward").
- ``bounds`` returns a :class:`BoundsResult`: numbers only (metrics), plot tables, and the summary
  rows the report draws; ``section`` turns it into the report's text, tables and figures. Keeping
  the text in its own module means editing it reruns at most ``bounds`` and ``report``.

Mechanisms are data (DESIGN.md, "Mechanisms are data"): :func:`event_to_json` /
:func:`event_from_json` store a dp_accounting event (an attrs class) as plain JSON and rebuild it,
and :func:`dpaudit.bounds.accountants.epsilons_for_event` gives every accountant's ε for it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pandas as pd

from dpaudit.io import read_json, write_json
from dpaudit.layout import TRAIN_MANIFEST_NAME, Audit

if TYPE_CHECKING:  # the bounds stage's results: not imported before it, so editing them never retrains
    from dpaudit.results import ReportSection, SummaryRow
    from dpaudit.table import ResultsTable

__all__ = [
    "BoundsResult",
    "Experiment",
    "Mechanism",
    "TrainManifest",
    "event_from_json",
    "event_to_json",
    "finite_number",
    "read_manifest",
    "write_manifest",
]

MANIFEST_VERSION = 1


def event_to_json(event: Any) -> dict[str, Any]:
    """A dp_accounting ``DpEvent`` as JSON: ``{"type": <class name>, <field>: <value or event>, …}``.

    dp_accounting events are attrs classes whose fields are numbers, strings or other events (or
    lists of events, for ``ComposedDpEvent``); each is written under its field name.
    """
    import attr

    def value(v: Any) -> Any:
        if attr.has(type(v)):
            return event_to_json(v)
        if isinstance(v, list | tuple):
            return [value(x) for x in v]
        return v

    out: dict[str, Any] = {"type": type(event).__name__}
    for f in attr.fields(type(event)):
        out[f.name] = value(getattr(event, f.name))
    return out


def event_from_json(raw: Mapping[str, Any]) -> Any:
    """Rebuild the dp_accounting event that :func:`event_to_json` wrote."""
    import dp_accounting

    def value(v: Any) -> Any:
        if isinstance(v, Mapping) and "type" in v:
            return event_from_json(v)
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    name = str(raw["type"])
    cls = getattr(dp_accounting, name, None)
    if cls is None or not name.endswith("DpEvent"):
        raise ValueError(f"unknown dp_accounting event type {name!r}")
    return cls(**{k: value(v) for k, v in raw.items() if k != "type"})


@dataclass(frozen=True)
class Mechanism:
    """One trained setting's privacy mechanism: DP-SGD with these facts, as a ``DpEvent``.

    ``noise_multiplier`` z scales the Gaussian noise to the clipping norm C (Abadi et al. Alg. 1;
    :data:`dpaudit.references.ABADI`); ``sampling_rate`` q is the Poisson sampling probability (1
    for full batch); ``steps`` is the number of noisy steps T. ``event`` is the serialised
    dp_accounting event; a non-private baseline has ``NonPrivateDpEvent`` and no z.
    """

    steps: int
    sampling_rate: float
    noise_multiplier: float | None
    clip_norm: float | None
    event: dict[str, Any]

    def dp_event(self) -> Any:
        return event_from_json(self.event)

    @classmethod
    def dpsgd(cls, noise_multiplier: float, sampling_rate: float, steps: int, clip_norm: float) -> Mechanism:
        """DP-SGD: ``steps`` compositions of a Poisson-sampled (q < 1) Gaussian with multiplier z.

        The event is the one TF Privacy's ``compute_dp_sgd_privacy_statement`` accounts for (Abadi
        et al. §3.1, moments accountant; :data:`dpaudit.references.ABADI`).
        """
        import dp_accounting

        step: Any = dp_accounting.GaussianDpEvent(float(noise_multiplier))
        if sampling_rate < 1.0:
            step = dp_accounting.PoissonSampledDpEvent(sampling_probability=float(sampling_rate), event=step)
        event = dp_accounting.SelfComposedDpEvent(step, int(steps))
        return cls(
            int(steps), float(sampling_rate), float(noise_multiplier), float(clip_norm), event_to_json(event)
        )

    @classmethod
    def non_private(cls, steps: int, sampling_rate: float) -> Mechanism:
        """A baseline trained without clipping or noise: ``NonPrivateDpEvent`` (every ε is ∞)."""
        import dp_accounting

        return cls(
            int(steps), float(sampling_rate), None, None, event_to_json(dp_accounting.NonPrivateDpEvent())
        )


@dataclass(frozen=True)
class TrainManifest:
    """What the train stage did, for every later stage: the only source of training facts.

    ``mechanisms`` maps a setting name (an experiment's own key, e.g. ``rb0.9_local-bounded`` or
    ``dp-z1``) to its :class:`Mechanism`; ``delta`` is the δ every accountant uses; ``sizes`` and
    ``seeds`` name counts and random seeds; ``facts`` holds experiment-specific training facts
    (e.g. model widths, the settings grid) as JSON values; ``seconds`` is the training time.
    """

    experiment: str
    dataset: str
    delta: float
    sizes: dict[str, int]
    seeds: dict[str, int]
    mechanisms: dict[str, Mechanism]
    facts: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    version: int = MANIFEST_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TrainManifest:
        data = dict(raw)
        if int(data.get("version", 0)) != MANIFEST_VERSION:
            raise ValueError(
                f"train manifest version {data.get('version')!r} is not {MANIFEST_VERSION}: "
                "rerun the train stage"
            )
        data["mechanisms"] = {k: Mechanism(**v) for k, v in data["mechanisms"].items()}
        return cls(**data)


def write_manifest(out_dir: Path, manifest: TrainManifest) -> Path:
    """Write ``manifest.json`` into a train stage's output directory."""
    path = Path(out_dir) / TRAIN_MANIFEST_NAME
    write_json(path, manifest.to_json())
    return path


def read_manifest(audit: Audit) -> TrainManifest:
    """The manifest the audit's train stage wrote (``data/train/<ds>/<exp>/manifest.json``)."""
    return TrainManifest.from_json(read_json(audit.manifest_path))




def finite_number(x: float) -> float:
    """A finite JSON number (±inf → ±1e308) so every metrics leaf stays a number; NaN is an error."""
    x = float(x)
    if math.isnan(x):
        raise ValueError("NaN metric")
    return max(-1e308, min(1e308, x))


@dataclass
class BoundsResult:
    """What an experiment's ``bounds`` computes: numbers, plot tables and summary rows.

    ``metrics`` is a nested mapping whose every leaf is a finite number (it becomes
    ``metrics/<audit>.json``); ``plots`` maps a CSV file name under ``plots/<audit>/`` to its table;
    ``summary`` holds the per-setting rows of the report's summary; ``context`` carries anything
    else the section needs (JSON-like values only); ``csv_float_format`` is pandas' ``float_format``
    for the plot CSVs (None: the pipeline's ``PLOT_FLOATS``). ``table`` is the audit's part of the
    results table (:mod:`dpaudit.table`), written to ``results/<audit>.csv``; ``metrics`` and ``summary`` are
    selections from it.
    """

    metrics: dict[str, Any]
    plots: dict[str, pd.DataFrame]
    summary: list[SummaryRow]
    context: dict[str, Any] = field(default_factory=dict)
    csv_float_format: str | None = None
    table: ResultsTable | None = None


@runtime_checkable
class Experiment(Protocol):
    """An audit experiment: its config and its five stage functions.

    Each function writes only into the location it is given (the runner makes writes atomic).
    ``config_from_params`` validates the experiment's whole ``params.yaml`` section and refuses
    unknown keys by name. Stages receive the validated config and the manifest; training facts come
    from the manifest only.
    """

    name: str

    def config_from_params(self, params: Mapping[str, Any]) -> Any: ...

    def train(self, config: Any, audit: Audit, out_dir: Path) -> TrainManifest: ...

    def losses(self, config: Any, audit: Audit, manifest: TrainManifest, out_path: Path) -> None: ...

    def attack(self, config: Any, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None: ...

    def bounds(self, config: Any, audit: Audit, manifest: TrainManifest) -> BoundsResult: ...

    def section(
        self, config: Any, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection: ...


class PackagedExperiment:
    """An :class:`Experiment` laid out as one package with one module per stage: ``train`` is
    ``<package>.train.train``, ``losses`` is ``<package>.losses.losses``, … and ``section`` is
    ``<package>.report.section``. Stage modules are imported when their stage runs, so that the
    check stage validates params without loading TensorFlow. ``check_inputs`` (optional) is the
    check stage's test of the experiment's own input files."""

    def __init__(
        self,
        name: str,
        package: str,
        config_from_params: Callable[[Mapping[str, Any]], Any],
        check_inputs: Callable[[Any], None] | None = None,
    ) -> None:
        self.name = name
        self.package = package
        self.config_from_params = config_from_params
        self.check_inputs = check_inputs

    def __repr__(self) -> str:
        return f"PackagedExperiment({self.name!r}, {self.package!r})"

    def _stage(self, module: str, function: str) -> Callable[..., Any]:
        return getattr(importlib.import_module(f"{self.package}.{module}"), function)

    def train(self, config: Any, audit: Audit, out_dir: Path) -> TrainManifest:
        return self._stage("train", "train")(config, audit, out_dir)

    def losses(self, config: Any, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
        self._stage("losses", "losses")(config, audit, manifest, out_path)

    def attack(self, config: Any, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
        self._stage("attack", "attack")(config, audit, manifest, out_dir)

    def bounds(self, config: Any, audit: Audit, manifest: TrainManifest) -> BoundsResult:
        return self._stage("bounds", "bounds")(config, audit, manifest)

    def section(
        self, config: Any, audit: Audit, manifest: TrainManifest, result: BoundsResult
    ) -> ReportSection:
        return self._stage("report", "section")(config, audit, manifest, result)
