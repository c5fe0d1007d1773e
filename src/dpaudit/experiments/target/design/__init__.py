"""Design of the target audit: the target model, the candidates (members + non-members) and the
shadow models' member masks over the pool.

Candidates are the target's members (D, ``train_idx``) followed by its non-members (the evaluation
set, ``eval_idx``). The shadows of offline LiRA (Carlini et al. 2022, offline variant) train on random
``shadow_fraction`` subsets of the pool U \\ D, which holds no candidate, so every candidate is "out"
for every shadow, as the offline attack assumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.io import open_npz

if TYPE_CHECKING:
    from dpaudit.training.models import Model

#: File names inside the train stage's output directory.
WEIGHTS_FILE = "weights.npz"
MODEL_FILE = "target.keras"


@dataclass(frozen=True)
class Candidates:
    """Rows of the prepared data the attacks score, and which of them the target trained on."""

    rows: np.ndarray
    is_member: np.ndarray

    @classmethod
    def of(cls, prepared: PreparedData) -> Candidates:
        rows = np.concatenate([prepared.train_idx, prepared.eval_idx]).astype(np.int64)
        is_member = np.concatenate(
            [np.ones(len(prepared.train_idx), bool), np.zeros(len(prepared.eval_idx), bool)]
        )
        return cls(rows, is_member)


def shadow_masks(pool_size: int, shadows: int, fraction: float, seed: int) -> np.ndarray:
    """Boolean ``[shadows, pool_size]``: each shadow trains on a random ``fraction`` of the pool."""
    rng = np.random.default_rng([seed, 4177])
    take = max(1, round(fraction * pool_size))
    masks = np.zeros((shadows, pool_size), dtype=bool)
    for m in range(shadows):
        masks[m, rng.choice(pool_size, size=take, replace=False)] = True
    return masks


def load_weights(train_dir: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``(target_params, shadow_params)``: lists of ``[1, ...]`` and ``[M, ...]`` arrays."""
    with open_npz(Path(train_dir) / WEIGHTS_FILE) as f:
        n = int(f["n_tensors"])
        return [f[f"target_{i}"] for i in range(n)], [f[f"shadow_{i}"] for i in range(n)]


def mapped_model(train_dir: Path, prepared: PreparedData, hidden: list[int] | None) -> Model:
    """The trials-at-once model of the target's architecture: the Keras file's, or the reference MLP."""
    model_path = Path(train_dir) / MODEL_FILE
    if model_path.is_file():
        from dpaudit.training.keras_import import model_from_keras_file

        return model_from_keras_file(model_path)
    from dpaudit.training.modelling import build_model

    return build_model(prepared.name, prepared.input_shape, prepared.num_classes, hidden)
