"""The ``onerun:`` section of params.yaml (Steinke, Nasr & Jagielski 2023,
:data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`), split by the stage that reads it.

- ``train``: the DECLARED DP-SGD configuration (claimed ε at δ, or the noise multiplier z; q, T, C;
  the accountant that turns one into the other), the canaries (m, gradient or input canaries, the raw
  norm of a gradient canary) and ``break``: ``none`` audits the declared pipeline, ``noise_div10``
  trains with z/10 while the claim stays that of the declared configuration, ``unclipped_layer``
  leaves the layer that holds the gradient canaries unclipped. The seed of every draw is a stable
  hash of the setting's own values (:func:`dpaudit.experiments.onerun.design.setting_seed`).
- ``datasets.<ds>``: MLP hidden widths and learning rate; only ``train@<ds>-onerun`` reads its entry.
- ``attack``: the scores have no knobs (movement along the canary; minus the canary's loss).
- ``bounds``: the joint confidence of the headline, the analyses it maximises over, the canary counts
  of the ε_LB-against-m curve and the Monte Carlo size of each analysis' ceiling.

Defaults live here; ``params.yaml`` repeats them, and a test checks that the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.config import dataset_entry, from_mapping, require, section
from dpaudit.experiments.params import LevelParams, TrainingKnobs

if TYPE_CHECKING:
    from dpaudit.data.custom import DatasetSize

CanaryKind = Literal["gradient", "input"]
Break = Literal["none", "noise_div10", "unclipped_layer"]
Analysis = Literal["steinke", "fdp_gaussian"]
Accountant = Literal["rdp", "pld"]

#: The fewest canaries an audit may use: fewer give no bound worth stating (and the curve's smallest
#: point needs at least this many as well).
MIN_CANARIES = 10
#: ``break`` is a Python keyword, so the dataclass field is ``break_``; params and errors say ``break``
#: (the field's ``metadata["key"]``, read by :func:`dpaudit.config.from_mapping`).
BREAK_KEY = "break"


@dataclass(frozen=True)
class TrainParams(TrainingKnobs):
    """The declared DP-SGD configuration, the canaries and the deliberate break (if any).

    Exactly one of ``epsilon`` (the claimed ε at ``delta``; z is calibrated for it under
    ``calibration_accountant``) and ``noise_multiplier`` (z declared directly; the claim is its ε
    under that accountant) is set. ``sampling_rate`` 1.0 is full-batch DP-SGD.
    """

    seed: int = 0
    canaries: int = 1000
    canary_kind: CanaryKind = "gradient"
    break_: Break = field(default="none", metadata={"key": BREAK_KEY})
    epsilon: float | None = 4.0
    noise_multiplier: float | None = None
    delta: float = 1e-5
    sampling_rate: float = 1.0
    steps: int = 30
    clip_norm: float = 1.0
    canary_norm: float = 10.0
    calibration_accountant: Accountant = "pld"

    def __post_init__(self) -> None:
        super().__post_init__()  # delta, sampling_rate, clip_norm
        require(self.canaries >= MIN_CANARIES, "canaries", self.canaries, f"must be at least {MIN_CANARIES}")
        require(self.canaries <= 1_000_000, "canaries", self.canaries, "must be at most 10^6")
        require(
            (self.epsilon is None) != (self.noise_multiplier is None),
            "epsilon",
            self.epsilon,
            "give exactly one of 'epsilon' (the claimed ε; z is calibrated) and 'noise_multiplier'",
        )
        require(
            self.epsilon is None or 0 < self.epsilon <= 100, "epsilon", self.epsilon, "must lie in (0, 100]"
        )
        require(
            self.noise_multiplier is None or 0.05 <= self.noise_multiplier <= 1e4,
            "noise_multiplier",
            self.noise_multiplier,
            "must lie in [0.05, 10^4] (an audit of DP-SGD needs noise)",
        )
        require(1 <= self.steps <= 100_000, "steps", self.steps, "must lie in [1, 10^5]")
        require(
            self.canary_norm >= 1,
            "canary_norm",
            self.canary_norm,
            "must be >= 1 (a gradient canary's raw norm in units of C; a correct pipeline clips it to C)",
        )
        require(
            not (self.break_ == "unclipped_layer" and self.canary_kind != "gradient"),
            BREAK_KEY,
            self.break_,
            "unclipped_layer needs canary_kind 'gradient' (the canaries' own clip step is what it breaks)",
        )
        require(
            not (self.break_ == "unclipped_layer" and self.canary_norm <= 1),
            "canary_norm",
            self.canary_norm,
            "must exceed 1 with break 'unclipped_layer' (an unclipped canary of norm C changes nothing)",
        )


@dataclass(frozen=True)
class DatasetSettings:
    """Per-dataset MLP hidden widths (on the flattened features) and learning rate."""

    hidden: list[int] = field(default_factory=lambda: [6, 6])
    learning_rate: float = 0.5

    def __post_init__(self) -> None:
        require(
            len(self.hidden) >= 1 and all(h >= 1 for h in self.hidden),
            "hidden",
            self.hidden,
            "must list at least one positive layer size",
        )
        require(self.learning_rate > 0, "learning_rate", self.learning_rate, "must be positive")


@dataclass(frozen=True)
class AttackParams:
    """The scores have no settings: movement along each gradient canary's direction, or minus each
    input canary's loss."""


@dataclass(frozen=True)
class BoundsParams(LevelParams):
    """``confidence``: JOINT level of the headline ε_LB, which maximises over ``analyses`` (each runs at
    1 − (1 − confidence)/len(analyses), Bonferroni). ``curve_canaries``: canary counts of the
    ε_LB-against-m curve (the first m' canaries; each at most ``train.canaries``). ``ceiling_repeats``: Monte
    Carlo repeats of each analysis' ceiling on the ideal Gaussian canary game."""

    analyses: list[Analysis] = field(default_factory=lambda: ["steinke", "fdp_gaussian"])  # type: ignore[arg-type]
    curve_canaries: list[int] = field(default_factory=lambda: [100, 250, 500, 1000])
    ceiling_repeats: int = 50

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            len(self.analyses) >= 1 and len(set(self.analyses)) == len(self.analyses),
            "analyses",
            self.analyses,
            "must list steinke and/or fdp_gaussian once each",
        )
        require(
            all(m >= MIN_CANARIES for m in self.curve_canaries)
            and len(set(self.curve_canaries)) == len(self.curve_canaries),
            "curve_canaries",
            self.curve_canaries,
            f"must be distinct counts, each at least {MIN_CANARIES}",
        )
        require(
            1 <= self.ceiling_repeats <= 10_000,
            "ceiling_repeats",
            self.ceiling_repeats,
            "must lie in [1, 10^4]",
        )


def _default_datasets() -> dict[str, DatasetSettings]:
    return {"adult": DatasetSettings([6, 6], 0.5), "digits": DatasetSettings([32], 0.5)}


@dataclass(frozen=True)
class OneRunConfig:
    """The whole ``onerun`` section."""

    train: TrainParams = field(default_factory=TrainParams)
    datasets: dict[str, DatasetSettings] = field(default_factory=_default_datasets)
    attack: AttackParams = field(default_factory=AttackParams)
    bounds: BoundsParams = field(default_factory=BoundsParams)

    def __post_init__(self) -> None:
        m = self.train.canaries
        require(
            all(count <= m for count in self.bounds.curve_canaries),
            "bounds.curve_canaries",
            self.bounds.curve_canaries,
            f"each count must be at most train.canaries = {m} (the curve takes the first m' canaries)",
        )

    def dataset(self, name: str) -> DatasetSettings:
        return dataset_entry(self.datasets, "onerun", name)


def config_from_params(params: Mapping[str, Any]) -> OneRunConfig:
    """Validate and build the ``onerun`` section (unknown keys are refused by name).

    ``train.break`` is read into the field ``break_`` (``break`` is a Python keyword); errors name it
    ``onerun.train.break``.
    """
    return from_mapping(OneRunConfig, section(params, "onerun"), "onerun")


def check_limits(config: OneRunConfig, dataset: str, size: DatasetSize) -> None:
    """Before any work: input canaries are pool records with a wrong label, so ``train.canaries`` must
    fit the pool (the rows outside D and the evaluation split); the error names the key and the limit."""
    tp = config.train
    require(
        tp.canary_kind != "input" or tp.canaries <= size.pool,
        "onerun.train.canaries",
        tp.canaries,
        f"input canaries are pool records and {dataset} has {size.pool} pool rows (canary_kind: input)",
    )
