"""What records each trial's training set holds, and the seeds: worlds D / D′, seeded trials, grids.

In the game of Bernau et al. §3–5 (:data:`dpaudit.references.BERNAU`; also Nasr et al. 2021 §3,
:data:`dpaudit.references.NASR_2021`) a challenger trains on D or on a neighbour D′ and an
adversary guesses which. This module holds the challenger's side, which a train stage runs (so an
attack or bound edit never retrains):

- :class:`Population`: one shared example array for all trials (D first, then the extra records
  that some D′ needs), so that one trainer call serves every world.
- :func:`neighbour_masks`: the membership masks of D and D′ over the population for an
  unbounded (remove x̂) or bounded (replace x̂ by x̂′) neighbourhood, Bernau Def. 1–2.
- :func:`draw_worlds`: the seeded world bit of every trial (uniform, as in Algorithm 1, or
  balanced: exactly half in each world, for experiments that count per-world rates).
- :func:`setting_seed`: a grid setting's seed from its own values; :func:`settings_grid`: the
  Cartesian product of named parameter axes, in a stable order.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "seed_from_text",
    "setting_seed",
    "Neighbours",
    "Population",
    "draw_worlds",
    "neighbour_masks",
    "population",
    "settings_grid",
    "world_masks",
]

Neighbours = Literal["bounded", "unbounded"]

#: World bit of a trial: 1 = trained on D, 0 = trained on D′.
WORLD_D, WORLD_D_PRIME = 1, 0


@dataclass(frozen=True)
class Population:
    """The shared example set of all trials: rows ``0..n-1`` are D, later rows the extra records."""

    X: np.ndarray
    y: np.ndarray
    rows: dict[int, int]  # global (prepared) index -> row
    n: int  # |D|


def setting_seed(seed: int, *setting: object) -> int:
    """A seed for one grid setting from the setting's own values, never from its place in the grid.

    ``setting_seed(0, "identifiability", 0.9, "local", "bounded")`` is the same whichever other
    settings run beside it, so a diff between two runs shows a parameter's effect, not resampling.
    SHA-256 of the values' ``repr`` (stable across processes, unlike ``hash``), cut to 31 bits.
    """
    return seed_from_text(repr((int(seed), *setting)))


def seed_from_text(text: str) -> int:
    """A 31-bit seed from a setting's serialised values: the first 4 bytes of their SHA-256."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") & 0x7FFFFFFF


def population(X: np.ndarray, y: np.ndarray, train_idx: Sequence[int], extra: Sequence[int]) -> Population:
    """D (the prepared ``train_idx``) followed by the ``extra`` global rows not already in D."""
    train = [int(i) for i in train_idx]
    in_train = set(train)
    added: list[int] = []
    for r in extra:
        r = int(r)
        if r not in added and r not in in_train:
            added.append(r)
    order = train + added
    return Population(X[order], y[order], {g: i for i, g in enumerate(order)}, len(train))


def neighbour_masks(pop: Population, removed: int, added: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Masks of D and D′ over the population's rows (Bernau Def. 1–2).

    Unbounded (``added`` is None): D′ = D \\ {x̂}. Bounded: D′ = D with x̂ replaced by x̂′. ``removed``
    and ``added`` are population rows.
    """
    d_mask = np.zeros(len(pop.X), bool)
    d_mask[: pop.n] = True
    d_prime = d_mask.copy()
    d_prime[removed] = False
    if added is not None:
        d_prime[added] = True
    return d_mask, d_prime


def draw_worlds(seed: Sequence[int], trials: int, balanced: bool = False) -> np.ndarray:
    """The world bit of each of ``trials`` trials from a seed sequence (1 = D, 0 = D′).

    Uniform draws are the challenger of Bernau Algorithm 1 (a fair coin per trial); ``balanced``
    gives exactly ⌈T/2⌉ trials in D in a seeded random order.
    """
    rng = np.random.default_rng(list(seed))
    if not balanced:
        return rng.integers(0, 2, trials)
    world = np.zeros(trials, np.int64)
    world[: (trials + 1) // 2] = 1
    return rng.permutation(world)


def world_masks(world: np.ndarray, d_mask: np.ndarray, d_prime: np.ndarray) -> np.ndarray:
    """Per-trial training-set masks ``[T, N]``: D's mask where ``world`` is 1, D′'s elsewhere."""
    return np.where(np.asarray(world)[:, None] == WORLD_D, d_mask[None, :], d_prime[None, :])


def settings_grid(axes: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(axes[n] for n in names))]
