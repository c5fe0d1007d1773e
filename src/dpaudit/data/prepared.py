"""The prepared-dataset schema shared by every stage after ``prepare``.

``data/prepared/<ds>.npz`` holds one population: features ``X`` (float32; ``[n, d]`` for
tabular data, ``[n, h, w, c]`` for images), integer labels ``y``, and three disjoint index sets
drawn with the params seed: the training set D (``train_idx``), the rest of the population pool
U \\ D (``pool_idx``) and a held-out evaluation set (``eval_idx``). Indices point into ``X``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from dpaudit.io import open_npz, write_npz

Kind = Literal["tabular", "image"]


@dataclass(frozen=True)
class PreparedData:
    """Features, labels and the D / U \\ D / evaluation split of one dataset."""

    name: str
    kind: Kind
    X: np.ndarray
    y: np.ndarray
    num_classes: int
    feature_names: tuple[str, ...]
    train_idx: np.ndarray
    pool_idx: np.ndarray
    eval_idx: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.X)
        if len(self.y) != n:
            raise ValueError(f"{self.name}: X has {n} rows but y has {len(self.y)}")
        if self.kind == "image" and self.X.ndim != 4:
            raise ValueError(f"{self.name}: image data must be [n, h, w, c], got shape {self.X.shape}")
        if self.kind == "tabular" and self.X.ndim != 2:
            raise ValueError(f"{self.name}: tabular data must be [n, d], got shape {self.X.shape}")
        parts = [self.train_idx, self.pool_idx, self.eval_idx]
        joined = np.concatenate(parts)
        if len(np.unique(joined)) != len(joined):
            raise ValueError(f"{self.name}: train, pool and eval indices overlap")
        if len(joined) and (joined.min() < 0 or joined.max() >= n):
            raise ValueError(f"{self.name}: an index lies outside 0..{n - 1}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.X.shape[1:])

    def split(self, which: Literal["train", "pool", "eval"]) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(X, y)`` of the training set D, the pool U \\ D or the evaluation set."""
        idx = {"train": self.train_idx, "pool": self.pool_idx, "eval": self.eval_idx}[which]
        return self.X[idx], self.y[idx]

    def save(self, path: str | Path) -> None:
        write_npz(
            path,
            {
                "name": np.array(self.name),
                "kind": np.array(self.kind),
                "X": self.X.astype(np.float32, copy=False),
                "y": self.y.astype(np.int64, copy=False),
                "num_classes": np.array(self.num_classes, dtype=np.int64),
                "feature_names": np.array(self.feature_names, dtype=str),
                "train_idx": self.train_idx.astype(np.int64, copy=False),
                "pool_idx": self.pool_idx.astype(np.int64, copy=False),
                "eval_idx": self.eval_idx.astype(np.int64, copy=False),
            },
        )

    @classmethod
    def load(cls, path: str | Path) -> PreparedData:
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: run `dvc repro prepare@{path.stem}` first")
        with open_npz(path) as f:
            return cls(
                name=str(f["name"]),
                kind=str(f["kind"]),  # type: ignore[arg-type]
                X=f["X"],
                y=f["y"],
                num_classes=int(f["num_classes"]),
                feature_names=tuple(str(s) for s in f["feature_names"]),
                train_idx=f["train_idx"],
                pool_idx=f["pool_idx"],
                eval_idx=f["eval_idx"],
            )
