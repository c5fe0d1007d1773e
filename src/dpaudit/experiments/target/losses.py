"""Losses stage of the target audit: per-candidate losses and confidences of the target and the shadows.

For every candidate (the target's members, then its non-members) the stage records the target's
cross-entropy loss (Yeom et al.'s attack), its logit loss −log(p_y / (1 − p_y)) (Negoescu et al.'s
Epsilon*, footnote 1, computed stably from the logits) and the logit-scaled confidences
φ = z_y − logsumexp_{j≠y} z_j of the target and of every shadow (Carlini et al. 2022, LiRA). The
target's accuracy on its non-members is its utility on held-out data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.experiments.target.design import Candidates, load_weights, mapped_model
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.training.modelling import neural_logits
from dpaudit.training.outputs import logit_scaled_confidence, losses_from_logits


def losses(config: TargetConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """Write ``loss``, ``logit_loss``, ``confidence`` (target), ``shadow_confidence`` ``[K, M]``,
    ``is_member`` and ``accuracy`` to ``out_path``."""
    prepared = PreparedData.load(audit.prepared_path)
    model = mapped_model(audit.train_dir, prepared, manifest.facts.get("hidden"))
    target_params, shadow_params = load_weights(audit.train_dir)
    candidates = Candidates.of(prepared)
    X, y = prepared.X[candidates.rows], prepared.y[candidates.rows]
    target_logits = neural_logits(model, target_params, X)[0]  # [K, C]
    shadow_logits = neural_logits(model, shadow_params, X)  # [M, K, C]
    loss, _ = losses_from_logits(target_logits, y)
    confidence = logit_scaled_confidence(target_logits, y)
    shadow_confidence = logit_scaled_confidence(np.transpose(shadow_logits, (1, 0, 2)), y[:, None])
    held_out = ~candidates.is_member
    accuracy = float(np.mean(np.argmax(target_logits[held_out], axis=1) == y[held_out]))
    write_npz(
        out_path,
        {
            "loss": np.asarray(loss, np.float64),
            "logit_loss": -np.asarray(confidence, np.float64),
            "confidence": np.asarray(confidence, np.float64),
            "shadow_confidence": np.asarray(shadow_confidence, np.float64),
            "is_member": candidates.is_member,
            "accuracy": np.array(accuracy),
        },
    )
