"""Losses stage of the instantiation audit: the per-trial losses the distinguishers read.

Distinguisher 1 (Nasr et al. 2021 §IV-A/B, :data:`dpaudit.references.NASR_2021`) reads the final
model's loss on the target; Distinguisher 2 (§IV-C/D) the loss at every θ_i. The train stage recorded
them (never the weights of thousands of models); this stage gathers them per cell with the test
accuracy, so that the attack stage reads one file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.instantiation.config import InstantiationConfig
from dpaudit.experiments.instantiation.design import manifest_cells
from dpaudit.io import open_npz, write_npz
from dpaudit.layout import Audit


def losses(config: InstantiationConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """``<cell>__final_loss`` / ``__loss_path`` where the threat model sees losses, and accuracies."""
    arrays: dict[str, np.ndarray] = {}
    for cell in manifest_cells(manifest):
        with open_npz(audit.train_dir / f"{cell.file}.npz") as f:
            arrays[f"{cell.file}__test_accuracy"] = f["test_accuracy"]
            if "final_loss" in f.files:
                arrays[f"{cell.file}__final_loss"] = f["final_loss"]
            if "loss_path" in f.files:
                arrays[f"{cell.file}__loss_path"] = f["loss_path"]
    write_npz(out_path, arrays)
