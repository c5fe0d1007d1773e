"""What the training audit's stages share: the data the user's function gets, and how every run's
transcript is stored by the train stage and read back by the bounds stage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.io import open_npz, write_npz

_STRINGS = {"source", "update_rule"}
_TUPLES = {"residual_names", "stochastic_layers"}

#: The stored transcripts of every run.
RUNS_FILE = "runs.npz"


@dataclass(frozen=True)
class TrainingData:
    """What the user's function gets as ``dataset``: the training records ``x`` [N, …] and ``y`` [N],
    the evaluation split, the number of classes and the dataset's name."""

    name: str
    x: np.ndarray
    y: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray
    num_classes: int


def training_data(prepared: PreparedData, train_size: int) -> TrainingData:
    """The first ``train_size`` rows of D followed by pool rows (``train_size`` ≤ |D| + pool)."""
    rows = np.concatenate([prepared.train_idx, prepared.pool_idx])[:train_size]
    x_eval, y_eval = prepared.split("eval")
    return TrainingData(
        prepared.name, prepared.X[rows], prepared.y[rows], x_eval, y_eval, int(prepared.num_classes)
    )


def save_runs(path: Path, runs: list[tuple[Any, np.ndarray]]) -> None:
    """Every run's transcript fields (``r<i>_<field>``) and inclusion bits (``r<i>_included``)."""
    arrays: dict[str, np.ndarray] = {"runs": np.int64(len(runs))}
    for i, (transcript, included) in enumerate(runs):
        for f in dataclasses.fields(transcript):
            value = getattr(transcript, f.name)
            if value is None:
                continue
            arrays[f"r{i}_{f.name}"] = np.asarray(value)
        arrays[f"r{i}_included"] = np.asarray(included, bool)
    write_npz(path, arrays)


def load_runs(path: Any) -> tuple[list[Any], list[np.ndarray]]:
    """The transcripts and inclusion bits that :func:`.train.save_runs` stored."""
    from dpaudit.training_audit.transcript import Transcript

    transcripts, included = [], []
    with open_npz(path) as f:
        for i in range(int(f["runs"])):
            kwargs: dict[str, Any] = {}
            for fld in dataclasses.fields(Transcript):
                key = f"r{i}_{fld.name}"
                if key not in f.files:
                    continue
                value = f[key]
                if fld.name in _STRINGS:
                    kwargs[fld.name] = str(value)
                elif fld.name in _TUPLES:
                    kwargs[fld.name] = tuple(str(v) for v in value)
                else:
                    kwargs[fld.name] = value
            transcripts.append(Transcript(**kwargs))
            included.append(np.asarray(f[f"r{i}_included"], bool))
    return transcripts, included
