"""What the training audit's stages share: the data the user's function gets, how every run's
transcript is stored by the train stage and read back by the bounds stage, and :func:`library`, the one
door to the training audit library (:mod:`dpaudit.training_audit`).

The library is imported by name at run time, so that the per-audit stages of every other experiment
(DVC gives every item of a ``foreach`` the same deps) do not depend on it: its files' md5 goes into this
audit's own record of the check stage instead (:func:`.config.code_record`, the way a target model's
Keras file does), and editing the library reruns this audit's stages alone."""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.io import open_npz, write_npz

#: The training audit library, imported by name (:func:`library`).
LIBRARY = "dpaudit.training_audit"

_STRINGS = {"source", "update_rule"}
_TUPLES = {"residual_names", "stochastic_layers"}

def library(module: str) -> ModuleType:
    """``dpaudit.training_audit.<module>``, imported at run time (see the module docstring)."""
    return importlib.import_module(f"{LIBRARY}.{module}")


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
    Transcript = library("transcript").Transcript

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
