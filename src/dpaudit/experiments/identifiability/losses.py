"""Losses stage of the identifiability audit.

Per setting and trial: the cross-entropy of the tracked records, the mean training loss and the
test accuracy (inputs of Yeom et al.'s MI rule, :data:`dpaudit.references.YEOM`, and of the
utility column). The model widths and the settings come from the train manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import POPULATION_FILE, manifest_settings
from dpaudit.io import open_npz, read_json, write_npz
from dpaudit.layout import Audit
from dpaudit.training.modelling import build_model, neural_logits
from dpaudit.training.outputs import losses_from_logits


def _load_params(f: Any) -> list[np.ndarray]:
    out = []
    while f"param_{len(out)}" in f:
        out.append(f[f"param_{len(out)}"])
    return out


def losses(config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """Per setting and trial: loss of the tracked records, mean training loss, test accuracy."""
    prepared = PreparedData.load(audit.prepared_path)
    model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, manifest.facts["hidden"],
                        manifest.facts.get("model"))
    pop_info = read_json(audit.train_dir / POPULATION_FILE)
    order = sorted(pop_info["rows"].items(), key=lambda kv: kv[1])
    X, y = prepared.X[[int(g) for g, _ in order]], prepared.y[[int(g) for g, _ in order]]
    Xe, ye = prepared.split("eval")
    out: dict[str, np.ndarray] = {}
    for st in manifest_settings(manifest):
        with open_npz(audit.train_dir / f"{st.file}.npz") as f:
            params, rows, mask = _load_params(f), f["tracked_rows"], f["member_mask"]
        ce, _ = losses_from_logits(neural_logits(model, params, X), y)  # [T, N]
        out[f"{st.file}__record_loss"] = ce[:, rows]
        out[f"{st.file}__train_loss"] = (ce * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1)
        probs = model.predict_proba(params, Xe)
        out[f"{st.file}__test_accuracy"] = (probs.argmax(axis=2) == ye[None, :]).mean(axis=1)
    write_npz(out_path, out)
