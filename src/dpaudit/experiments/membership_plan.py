"""Configuration and planning of the membership audit (Erlingsson et al. §4–5, Negoescu et al. §4).

:class:`MembershipConfig` is built from the ``membership:`` section of ``params.yaml``. A
:class:`Plan` turns it into concrete *strategies* for one dataset: DP-SGD at fixed noise
multipliers (weak → strong privacy), DP-SGD calibrated to target ε values (Negoescu §4.1: binary
search on the noise multiplier under the accountant), non-DP baselines for several epoch counts
and a deterministic XGBoost baseline. It also draws the member / non-member split of every repeat.
Everything here is cheap and deterministic, so the stages and the tests share it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from dpaudit.config import ParamsError, from_mapping, require, section

Accountant = Literal["rdp", "pld", "naive", "advanced"]
StrategyKind = Literal["dp", "nondp", "xgboost"]


@dataclass(frozen=True)
class SplitSizes:
    """Number of members (training set D) and held-out non-members drawn per repeat."""

    members: int
    nonmembers: int

    def __post_init__(self) -> None:
        require(self.members >= 4, "membership.sizes.*.members", self.members, "need at least 4 members")
        require(
            self.nonmembers >= 4,
            "membership.sizes.*.nonmembers",
            self.nonmembers,
            "need at least 4 non-members",
        )


@dataclass(frozen=True)
class DPSGDParams:
    """Minibatch DP-SGD: each member joins each step's batch with probability q (Poisson sampling)."""

    sampling_rate: float = 0.1
    epochs: float = 10.0
    clip_norm: float = 1.0
    learning_rate: float = 2.0
    noise_multipliers: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 16.0, 64.0)
    target_epsilons: tuple[float, ...] = (1.0, 3.0, 10.0, 100.0)
    calibration_accountant: Accountant = "rdp"

    def __post_init__(self) -> None:
        require(
            0 < self.sampling_rate <= 1,
            "membership.dpsgd.sampling_rate",
            self.sampling_rate,
            "must lie in (0, 1]",
        )
        require(self.epochs > 0, "membership.dpsgd.epochs", self.epochs, "must be > 0")
        require(self.clip_norm > 0, "membership.dpsgd.clip_norm", self.clip_norm, "must be > 0")
        require(self.learning_rate > 0, "membership.dpsgd.learning_rate", self.learning_rate, "must be > 0")
        require(
            all(z > 0 for z in self.noise_multipliers),
            "membership.dpsgd.noise_multipliers",
            list(self.noise_multipliers),
            "every noise multiplier must be > 0",
        )
        require(
            all(e > 0 for e in self.target_epsilons),
            "membership.dpsgd.target_epsilons",
            list(self.target_epsilons),
            "every target epsilon must be > 0",
        )


@dataclass(frozen=True)
class BaselineParams:
    """Non-DP SGD (no clipping, no noise) for several epoch counts: more epochs, more overfitting."""

    epochs: tuple[float, ...] = (2.0, 10.0, 50.0)
    sampling_rate: float = 0.1
    learning_rate: float = 1.0

    def __post_init__(self) -> None:
        require(
            all(e > 0 for e in self.epochs), "membership.baselines.epochs", list(self.epochs), "must be > 0"
        )
        require(
            0 < self.sampling_rate <= 1,
            "membership.baselines.sampling_rate",
            self.sampling_rate,
            "must lie in (0, 1]",
        )
        require(
            self.learning_rate > 0, "membership.baselines.learning_rate", self.learning_rate, "must be > 0"
        )


@dataclass(frozen=True)
class XGBoostParams:
    """Deterministic gradient-boosted trees (Epsilon* applies to them; DP bounds do not)."""

    enabled: bool = True
    n_estimators: int = 100
    max_depth: int = 6
    learning_rate: float = 0.3

    def __post_init__(self) -> None:
        require(self.n_estimators >= 1, "membership.xgboost.n_estimators", self.n_estimators, "must be >= 1")
        require(self.max_depth >= 1, "membership.xgboost.max_depth", self.max_depth, "must be >= 1")
        require(self.learning_rate > 0, "membership.xgboost.learning_rate", self.learning_rate, "must be > 0")


@dataclass(frozen=True)
class AttackParams:
    """Loss-threshold attack settings: the fixed FPR of Erlingsson §4 and the valid threshold selection."""

    fpr: float = 0.05
    confidence: float = 0.95
    selection: Literal["split", "bonferroni"] = "split"

    def __post_init__(self) -> None:
        require(0 < self.fpr < 1, "membership.attack.fpr", self.fpr, "must lie in (0, 1)")
        require(
            0 < self.confidence < 1, "membership.attack.confidence", self.confidence, "must lie in (0, 1)"
        )


@dataclass(frozen=True)
class MembershipConfig:
    """The ``membership:`` section of params.yaml."""

    sizes: dict[str, SplitSizes]
    seed: int = 0
    repeats: int = 5
    delta: float | None = None
    hidden: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dpsgd: DPSGDParams = field(default_factory=DPSGDParams)
    baselines: BaselineParams = field(default_factory=BaselineParams)
    xgboost: XGBoostParams = field(default_factory=XGBoostParams)
    attack: AttackParams = field(default_factory=AttackParams)

    def __post_init__(self) -> None:
        require(self.repeats >= 1, "membership.repeats", self.repeats, "must be >= 1")
        require(
            self.delta is None or 0 < self.delta < 1,
            "membership.delta",
            self.delta,
            "must be null (1/(n ln n)) or lie in (0, 1)",
        )
        for dataset, widths in self.hidden.items():
            require(
                len(widths) >= 1 and all(h >= 1 for h in widths),
                f"membership.hidden.{dataset}",
                list(widths),
                "need at least one layer width, each >= 1",
            )

    def sizes_for(self, dataset: str) -> SplitSizes:
        if dataset not in self.sizes:
            raise ParamsError(
                f"params: missing key 'membership.sizes.{dataset}' (have: {', '.join(sorted(self.sizes))})"
            )
        return self.sizes[dataset]


def config_from_params(params: dict[str, Any]) -> MembershipConfig:
    """Validate ``params['membership']`` and build the typed config.

    Every membership audit listed under ``audits`` must have its dataset in ``membership.sizes``,
    so a missing entry stops the pipeline before any training.
    """
    config = from_mapping(MembershipConfig, section(params, "membership"), "membership")
    audits = params.get("audits") or {}
    for entry in audits.values() if isinstance(audits, dict) else ():
        if isinstance(entry, dict) and entry.get("experiment") == "membership":
            config.sizes_for(str(entry.get("dataset")))
    return config


@dataclass(frozen=True)
class Strategy:
    """One privacy strategy: how every repeat's model is trained.

    ``group`` names the training call the strategy shares with others (same steps and sampling
    rate); ``noise_multiplier`` is the one actually used (calibrated ones included).
    """

    name: str
    kind: StrategyKind
    group: str
    label: str
    noise_multiplier: float | None = None
    target_epsilon: float | None = None
    clip_norm: float | None = None
    sampling_rate: float | None = None
    steps: int | None = None
    epochs: float | None = None
    learning_rate: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Strategy:
        return cls(**raw)


def _number_tag(value: float) -> str:
    """A metrics-key-safe rendering of a number: 0.5 -> '0p5', 10.0 -> '10'."""
    return f"{value:g}".replace(".", "p").replace("+", "")


def steps_for_epochs(sampling_rate: float, epochs: float) -> int:
    """Steps whose expected batches (q·n records each) add up to ``epochs`` passes over the data."""
    return max(1, math.ceil(epochs / sampling_rate - 1e-9))


def plan_strategies(config: MembershipConfig, members: int, delta: float) -> list[Strategy]:
    """All strategies for a dataset with ``members`` training records, noise calibrated at ``delta``.

    Target-ε strategies get their noise multiplier from
    :func:`dpaudit.bounds.calibrate_noise_multiplier` under ``dpsgd.calibration_accountant``.
    """
    from dpaudit.bounds.accountants import calibrate_noise_multiplier

    dp = config.dpsgd
    q, steps = dp.sampling_rate, steps_for_epochs(dp.sampling_rate, dp.epochs)
    common = {
        "kind": "dp",
        "group": "dp",
        "clip_norm": dp.clip_norm,
        "sampling_rate": q,
        "steps": steps,
        "epochs": dp.epochs,
        "learning_rate": dp.learning_rate,
    }
    strategies: list[Strategy] = []
    for z in sorted(set(dp.noise_multipliers)):
        strategies.append(
            Strategy(
                name=f"dp-z{_number_tag(z)}", label=f"DP-SGD z={z:g}", noise_multiplier=float(z), **common
            )
        )
    for eps in sorted(set(dp.target_epsilons)):
        z = calibrate_noise_multiplier(eps, delta, q, steps, accountant=dp.calibration_accountant)
        strategies.append(
            Strategy(
                name=f"dp-eps{_number_tag(eps)}",
                label=f"DP-SGD ε={eps:g} ({dp.calibration_accountant})",
                noise_multiplier=float(z),
                target_epsilon=float(eps),
                **common,
            )
        )
    base = config.baselines
    for epochs in sorted(set(base.epochs)):
        q_b, steps_b = base.sampling_rate, steps_for_epochs(base.sampling_rate, epochs)
        strategies.append(
            Strategy(
                name=f"nondp-{_number_tag(epochs)}ep",
                kind="nondp",
                group=f"nondp-{_number_tag(epochs)}ep",
                label=f"non-DP {epochs:g} epochs",
                sampling_rate=q_b,
                steps=steps_b,
                epochs=float(epochs),
                learning_rate=base.learning_rate,
            )
        )
    if config.xgboost.enabled:
        strategies.append(Strategy(name="xgboost", kind="xgboost", group="xgboost", label="XGBoost"))
    return strategies


@dataclass(frozen=True)
class Splits:
    """Global row indices of every repeat's members and non-members, and of the utility set."""

    members: np.ndarray  # [R, n_members]
    nonmembers: np.ndarray  # [R, n_nonmembers]
    evaluation: np.ndarray  # [n_eval]

    @property
    def population(self) -> np.ndarray:
        """All rows that are a member or non-member in some repeat (sorted)."""
        return np.unique(np.concatenate([self.members.ravel(), self.nonmembers.ravel()]))


def draw_splits(
    candidates: np.ndarray, evaluation: np.ndarray, sizes: SplitSizes, repeats: int, seed: int, dataset: str
) -> Splits:
    """Draw a fixed population of members + non-members once, then split it anew for every repeat.

    Members and non-members come from the same candidate rows (the prepared D ∪ pool), so they
    share a distribution, as Erlingsson §5.4 requires for a meaningful attack advantage. Reusing
    one population keeps all repeats' trials trainable in one call; a fresh random split per
    repeat gives each repeat its own member set.
    """
    need = sizes.members + sizes.nonmembers
    if need > len(candidates):
        raise ParamsError(
            f"params: 'membership.sizes.{dataset}' asks for {sizes.members} members + {sizes.nonmembers} "
            f"non-members but the prepared data has only {len(candidates)} candidate rows (train + pool)"
        )
    rng = np.random.default_rng([seed, 7001])
    population = rng.choice(np.sort(candidates), size=need, replace=False)
    members, nonmembers = [], []
    for _ in range(repeats):
        order = rng.permutation(need)
        members.append(np.sort(population[order[: sizes.members]]))
        nonmembers.append(np.sort(population[order[sizes.members :]]))
    return Splits(
        members=np.stack(members).astype(np.int64),
        nonmembers=np.stack(nonmembers).astype(np.int64),
        evaluation=np.asarray(evaluation, dtype=np.int64),
    )
