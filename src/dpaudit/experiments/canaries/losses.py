"""Losses stage of the canaries experiment: every model's view of every canary, and test accuracy.

For each trained group (undefended, each DP-SGD setting) and each of its M models: the logits on
every canary query (the canary and, for image data, its four one-pixel shifts: LiRA's query
augmentations, Carlini et al. 2022 §VI, arXiv 2112.03570), turned into the logit-scaled confidence
φ = z_y − logsumexp_{j≠y} z_j and the hinge z_y − max_{j≠y} z_j of the canary's *assigned* label
(:mod:`dpaudit.training.outputs`), plus the predicted label of each query (all a label-only release
shows) and the test accuracy on the prepared evaluation split (Aerni et al. report utility next to
every privacy number, :data:`dpaudit.references.AERNI`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.canaries.config import CanariesConfig
from dpaudit.experiments.canaries.design import DESIGN_FILE, load_audit_set, query_augmentations
from dpaudit.experiments.canaries.train import load_weights, weights_file
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.training.modelling import build_model, neural_logits
from dpaudit.training.outputs import hinge_confidence, logit_scaled_confidence


def losses(config: CanariesConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """Per group: φ (logit-scaled, hinge) and predicted labels ``[K, M, A]``, test accuracy ``[M]``."""
    prepared = PreparedData.load(audit.prepared_path)
    audit_set = load_audit_set(audit.train_dir / DESIGN_FILE)
    model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, manifest.facts["hidden"])
    queries = query_augmentations(audit_set.canary_x, augment=True)  # [K, A, ...]
    k, a = queries.shape[:2]
    flat = queries.reshape((k * a,) + queries.shape[2:])
    X_eval, y_eval = prepared.X[prepared.eval_idx], prepared.y[prepared.eval_idx]
    labels = audit_set.canary_y[:, None, None]  # [K, 1, 1] against [K, M, A]
    arrays: dict[str, np.ndarray] = {}
    groups = sorted({str(d["weights"]) for d in manifest.facts["defences"]})
    for group in groups:
        params = load_weights(audit.train_dir / weights_file(group))
        logits = neural_logits(model, params, np.concatenate([flat, X_eval]))  # [M, K·A + E, C]
        canary = logits[:, : k * a].reshape(len(logits), k, a, -1).transpose(1, 0, 2, 3)  # [K, M, A, C]
        test = logits[:, k * a :]
        arrays[f"{group}__phi_logit"] = logit_scaled_confidence(canary, labels).astype(np.float32)
        arrays[f"{group}__phi_hinge"] = hinge_confidence(canary, labels).astype(np.float32)
        arrays[f"{group}__pred"] = np.argmax(canary, axis=-1).astype(np.int16)
        arrays[f"{group}__accuracy"] = np.mean(np.argmax(test, axis=-1) == y_eval[None], axis=1)
    arrays["groups"] = np.asarray(groups, dtype=str)
    write_npz(out_path, arrays)
