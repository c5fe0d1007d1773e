"""The six threat models of Nasr et al. 2021 as one table (:data:`dpaudit.references.NASR_2021`, Table I).

:data:`THREAT_MODELS` reads like the paper's Table I: section, access, modification, dataset,
protocol, crafter and distinguisher, then what the stages need to play and audit a threat model
(its player, whether it needs Crafter 2's poison, whose trials it shares, ...). The train, attack and
bounds stages and the config read these attributes and never branch on a threat model's letter, so
adding a threat model is one row here (and its crafter's ``play_*`` function).

The players import the crafters (TensorFlow) only when called: the config and the report import this
table without pulling in the trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from dpaudit.experiments.instantiation.config import TrainParams
    from dpaudit.experiments.instantiation.design.game import Game

__all__ = [
    "ORDER",
    "REGISTRY",
    "THREAT_MODELS",
    "Play",
    "ThreatModelSpec",
    "strongest",
]


@dataclass(frozen=True)
class Play:
    """What the train stage hands a threat model's player for one cell (one target ε)."""

    game: Game
    noise_multiplier: float
    seed: int
    params: TrainParams
    #: Crafter 2's poison ``(x, y)`` of this ε (None unless some selected threat model ``uses_poison``).
    poison: tuple[np.ndarray, int] | None = None

    def inserted(self, *extra: int, per_world: int | None = None) -> np.ndarray:
        """The cell's balanced worlds (``train.trials_per_world`` unless ``per_world``), seeded by
        ``[seed, 1, *extra]``."""
        from dpaudit.experiments.instantiation.design import balanced_inserted

        count = self.params.trials_per_world if per_world is None else per_world
        return balanced_inserted(count, [self.seed, 1, *extra])

    def require_poison(self) -> tuple[np.ndarray, int]:
        """Crafter 2's poison; the train stage crafts it whenever a selected threat model uses it."""
        if self.poison is None:
            raise RuntimeError("this threat model needs Crafter 2's poison, which was not crafted")
        return self.poison


Player = Callable[[Play], dict[str, np.ndarray]]


@dataclass(frozen=True)
class ThreatModelSpec:
    """One row of Table I and what the stages need to play and audit it."""

    key: str  # the letter used in params.yaml, file names and metrics ("A")
    name: str  # "API access"
    section: str  # "IV-A"
    access: str  # what the trainer reveals (Table I "Access")
    modification: str  # what the adversary inserts (Table I "Modification")
    dataset: str  # whether the adversary writes D (Table I "Dataset")
    protocol: int  # the game's protocol (1–4)
    crafter: int  # Crafter 1–5
    distinguisher: Literal[1, 2, 3]  # Distinguisher 1 (final loss), 2 (loss path), 3 (canary test)
    play: Player  # plays all trials of one cell and returns the view
    uses_poison: bool = False  # needs Crafter 2's poison, crafted once per ε
    shares_trials_with: str | None = None  # plays the trials (and seed) of that threat model
    trains_on_real_data: bool = True  # its test accuracy says something about the audited training
    frozen_model: bool = False  # learning rate 0: every step's release is the mechanism family's
    simulated: bool = False  # the attack stage also simulates its distinguisher on the ideal mechanism
    canary_size_key: str | None = None  # the ``train`` key of its canary sizes 2n

    @property
    def label(self) -> str:
        """``API access (§IV-A)``: the name shown in reports and summaries."""
        return f"{self.name} (§{self.section})"

    @property
    def trials_key(self) -> str:
        """The threat model whose trials (and seed) this one plays: itself, or C → B."""
        return self.shares_trials_with or self.key


# ------------------------------------------------------------------------------------------ players


def _play_api_access(p: Play) -> dict[str, np.ndarray]:
    from dpaudit.experiments.instantiation.design.crafters.record import play_api_access

    return play_api_access(p.game, p.noise_multiplier, p.inserted(), p.seed, fresh=p.params.fresh_record)


def _play_static_poison(p: Play) -> dict[str, np.ndarray]:
    from dpaudit.experiments.instantiation.design.crafters.poison import play_static_poison

    x, y = p.require_poison()
    return play_static_poison(p.game, p.noise_multiplier, p.inserted(), p.seed, x, y)


def _play_adaptive_poison(p: Play) -> dict[str, np.ndarray]:
    from dpaudit.experiments.instantiation.design.crafters.poison import play_adaptive_poison

    x, y = p.require_poison()
    tp = p.params
    return play_adaptive_poison(
        p.game, p.noise_multiplier, p.inserted(), p.seed, x, y,
        steps=tp.adaptive_steps, step_size=tp.adaptive_step_size,
        virtual_learning_rate=tp.virtual_learning_rate, start=tp.adaptive_start,
        virtual_clip=tp.adaptive_virtual_clip,
    )  # fmt: skip


def _play_gradient_canary(p: Play) -> dict[str, np.ndarray]:
    from dpaudit.experiments.instantiation.design.crafters.canary import play_gradient_canary

    tp = p.params
    sizes = np.asarray(tp.canary_sizes)
    inserted = np.concatenate([p.inserted(int(size)) for size in sizes])
    size_of = np.repeat(sizes, 2 * tp.trials_per_world)
    return play_gradient_canary(
        p.game, p.noise_multiplier, inserted, size_of, p.seed, tp.warmup_steps, placement=tp.canary_placement
    )


def _play_malicious_dataset(p: Play) -> dict[str, np.ndarray]:
    from dpaudit.experiments.instantiation.design.crafters.canary import play_malicious_dataset

    tp = p.params
    return play_malicious_dataset(
        p.game, p.noise_multiplier, p.inserted(per_world=tp.malicious_trials_per_world), p.seed,
        dataset_size=tp.malicious_size, canary_size=tp.malicious_canary_size,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ Table I

_R = ThreatModelSpec

#: Table I of Nasr et al. 2021, weakest adversary first (the order :func:`strongest` ranks by). First
#: line of a row: the paper's columns (P, Cr, Di: protocol, crafter and distinguisher numbers);
#: second line: what the stages need beyond them.
THREAT_MODELS: tuple[ThreatModelSpec, ...] = (
    #   key name                   section access                 modification          dataset      P  Cr Di
    _R("A", "API access",          "IV-A", "black-box",           "random sample",      "unmodified", 1, 1, 1,
       _play_api_access),
    _R("B", "static poison",       "IV-B", "final model",         "malicious sample",   "unmodified", 1, 2, 1,
       _play_static_poison, uses_poison=True),
    _R("C", "intermediate models", "IV-C", "intermediate models", "malicious sample",   "unmodified", 2, 2, 2,
       _play_static_poison, uses_poison=True, shares_trials_with="B"),
    _R("D", "adaptive poison",     "IV-D", "intermediate models", "adaptive sample",    "unmodified", 3, 3, 2,
       _play_adaptive_poison, uses_poison=True),
    _R("E", "gradient canary",     "IV-E", "intermediate models", "malicious gradient", "unmodified", 4, 4, 3,
       _play_gradient_canary, canary_size_key="canary_sizes"),
    _R("F", "malicious dataset",   "IV-F", "intermediate models", "malicious gradient", "malicious",  4, 5, 3,
       _play_malicious_dataset, trains_on_real_data=False, frozen_model=True, simulated=True,
       canary_size_key="malicious_canary_size"),
)  # fmt: skip

#: The table by key, in Table I's order.
REGISTRY: dict[str, ThreatModelSpec] = {tm.key: tm for tm in THREAT_MODELS}
#: The keys, weakest first.
ORDER: tuple[str, ...] = tuple(REGISTRY)


def strongest(keys: list[str] | tuple[str, ...]) -> str:
    """The strongest of ``keys`` (the latest in Table I's order)."""
    return max(keys, key=ORDER.index)


def _check() -> None:
    """The table's own consistency, at import: unique keys, shared trials within the table."""
    if len(REGISTRY) != len(THREAT_MODELS):
        raise RuntimeError("threat model keys must be unique")
    for tm in THREAT_MODELS:
        if tm.shares_trials_with is not None and tm.shares_trials_with not in REGISTRY:
            raise RuntimeError(f"{tm.key} shares the trials of unknown threat model {tm.shares_trials_with}")


_check()
