"""Design of the membership audit: strategies and member splits (Erlingsson et al. §4–5, Negoescu et al. §4).

:func:`plan_strategies` turns the validated config into concrete *strategies* for one dataset:
DP-SGD at fixed noise multipliers (weak → strong privacy), DP-SGD calibrated to target ε values
(Negoescu §4.1: binary search on the noise multiplier under the accountant), non-DP baselines for
several epoch counts and a deterministic XGBoost baseline. :func:`draw_splits` draws the member /
non-member split of every repeat (independent inclusion of every candidate, for the one-run audit).
Everything here is cheap and deterministic, so the stages and the tests share it. References:
:data:`dpaudit.references.ERLINGSSON`,
:data:`dpaudit.references.NEGOESCU`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.config import ParamsError
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.membership.config import (
    MembershipConfig,
    SplitSizes,
    StrategyKind,
    steps_for_epochs,
)
from dpaudit.io import open_npz
from dpaudit.training.defences import DefenceKind, defence_kinds

__all__ = [
    "SPLITS",
    "STRATEGY_KINDS",
    "Splits",
    "Strategy",
    "draw_splits",
    "load_splits",
    "save_splits",
    "manifest_strategies",
    "plan_strategies",
    "steps_for_epochs",
]

#: The train stage's member splits.
SPLITS = "splits.npz"

#: The kinds of strategy (the ``kind`` of :class:`Strategy`) and how the stages treat each one.
STRATEGY_KINDS = defence_kinds(
    DefenceKind("dp", "DP-SGD at a fixed or calibrated noise multiplier", private=True),
    DefenceKind("nondp", "non-private SGD for a number of epochs"),
    DefenceKind("xgboost", "a deterministic XGBoost baseline", neural=False),
)


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

    @property
    def spec(self) -> DefenceKind:
        """What the stages need to know about this strategy's kind (:data:`STRATEGY_KINDS`)."""
        return STRATEGY_KINDS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Strategy:
        return cls(**raw)


def _number_tag(value: float) -> str:
    """A metrics-key-safe rendering of a number: 0.5 -> '0p5', 10.0 -> '10'."""
    return f"{value:g}".replace(".", "p").replace("+", "")


def plan_strategies(config: MembershipConfig, members: int, delta: float) -> list[Strategy]:
    """All strategies for a dataset with ``members`` training records, noise calibrated at ``delta``.

    Target-ε strategies get their noise multiplier from
    :func:`dpaudit.bounds.calibrate_noise_multiplier` under ``dpsgd.calibration_accountant``.
    """
    from dpaudit.training.accounting import calibrate_noise_multiplier

    dp = config.train.dpsgd
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
    base = config.train.baselines
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
    if config.train.xgboost.enabled:
        strategies.append(Strategy(name="xgboost", kind="xgboost", group="xgboost", label="XGBoost"))
    return strategies


@dataclass(frozen=True)
class Splits:
    """The candidate population, every repeat's member mask over it, and the utility set.

    ``population`` holds global row indices (sorted, unique); ``member_mask[r, i]`` says whether
    ``population[i]`` is a member (trained on) in repeat ``r``. Every other population row is that
    repeat's non-member. Member counts vary between repeats (see :func:`draw_splits`).
    """

    population: np.ndarray  # [P]
    member_mask: np.ndarray  # [R, P] bool
    evaluation: np.ndarray  # [n_eval]
    inclusion_probability: float = 0.5

    @property
    def repeats(self) -> int:
        return int(self.member_mask.shape[0])

    def members(self, repeat: int) -> np.ndarray:
        """Global rows of repeat ``repeat``'s members (sorted)."""
        return self.population[self.member_mask[repeat]]

    def nonmembers(self, repeat: int) -> np.ndarray:
        """Global rows of repeat ``repeat``'s non-members (sorted)."""
        return self.population[~self.member_mask[repeat]]

    @property
    def member_counts(self) -> list[int]:
        return [int(c) for c in self.member_mask.sum(axis=1)]


def draw_splits(
    candidates: np.ndarray, evaluation: np.ndarray, sizes: SplitSizes, repeats: int, seed: int, dataset: str
) -> Splits:
    """A fixed population of ``members + nonmembers`` candidates, each included independently per repeat.

    Members and non-members come from the same candidate rows (the prepared D ∪ pool), so they
    share a distribution, as Erlingsson §5.4 requires for a meaningful attack advantage. In every
    repeat each population row is a member independently with probability
    p = members / (members + nonmembers) — a fair coin when the two sizes are equal, as in every
    default. Independent fair-coin inclusion, decided before training, is what the one-run audit of
    Steinke, Nasr & Jagielski 2023 (:data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`, their Thm. 5.2) needs
    for its bound on the mechanism's ε to hold; a fixed-size random subset would make inclusions
    dependent. The member count of a repeat is therefore Binomial(P, p), not exactly ``members``:
    ``members`` and ``nonmembers`` are expected counts. A draw with fewer than 2 members or
    non-members is redrawn (probability below 2^-(P-2) for P ≥ 8 at p = 1/2).
    Reusing one population keeps all repeats' trials trainable in one call.
    """
    need = sizes.members + sizes.nonmembers
    if need > len(candidates):
        raise ParamsError(
            f"params: 'membership.datasets.{dataset}' asks for {sizes.members} members + {sizes.nonmembers} "
            f"non-members but the prepared data has only {len(candidates)} candidate rows (train + pool)"
        )
    rng = np.random.default_rng([seed, 7001])
    population = np.sort(rng.choice(np.sort(candidates), size=need, replace=False)).astype(np.int64)
    p = sizes.members / need
    masks = []
    for _ in range(repeats):
        mask = rng.random(need) < p
        while mask.sum() < 2 or (~mask).sum() < 2:
            mask = rng.random(need) < p
        masks.append(mask)
    return Splits(
        population=population,
        member_mask=np.stack(masks),
        evaluation=np.asarray(evaluation, dtype=np.int64),
        inclusion_probability=float(p),
    )


def save_splits(path: Path, splits: Splits) -> None:
    """Write the splits the train stage drew (``splits.npz``)."""
    from dpaudit.io import write_npz

    write_npz(
        path,
        {
            "population": splits.population,
            "member_mask": splits.member_mask,
            "evaluation": splits.evaluation,
            "inclusion_probability": np.asarray(splits.inclusion_probability),
        },
    )


def load_splits(path: Path) -> Splits:
    """The population, member masks and evaluation rows the train stage drew."""
    with open_npz(path) as f:
        return Splits(
            population=f["population"],
            member_mask=f["member_mask"].astype(bool),
            evaluation=f["evaluation"],
            inclusion_probability=float(f["inclusion_probability"]),
        )


def manifest_strategies(manifest: TrainManifest) -> list[Strategy]:
    """The strategies the train stage trained, in its order (from the manifest, not from params)."""
    return [Strategy.from_dict(s) for s in manifest.facts["strategies"]]
