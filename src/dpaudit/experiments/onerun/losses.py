"""Losses stage of the one-run audit: the final model's test accuracy (utility) and, for input
canaries, each canary's loss under its wrong label (what the black-box score reads). Model widths and
the input width come from the train manifest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.onerun.config import OneRunConfig
from dpaudit.experiments.onerun.design import RUN_FILE
from dpaudit.io import open_npz, write_npz
from dpaudit.layout import Audit
from dpaudit.training.modelling import neural_logits

#: Evaluation rows used for test accuracy.
MAX_EVAL_ROWS = 5000


def losses(config: OneRunConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """``test_accuracy`` (scalar) and, for input canaries, ``canary_loss`` [m]."""
    from dpaudit.training import models

    prepared = PreparedData.load(audit.prepared_path)
    facts = manifest.facts
    model = models.mlp(prepared.name, int(facts["input_dim"]), prepared.num_classes, facts["hidden"])
    with open_npz(audit.train_dir / RUN_FILE) as f:
        params = [f[f"param_{i}"][None] for i in range(len(model.param_shapes))]
        canary = (f["canary_X"], f["canary_y"]) if "canary_X" in f.files else None
    X_eval, y_eval = prepared.split("eval")
    X_eval = X_eval.reshape(len(X_eval), -1)[:MAX_EVAL_ROWS].astype(np.float32)
    X_eval = np.hstack(
        [X_eval, np.zeros((len(X_eval), int(facts["input_dim"]) - X_eval.shape[1]), np.float32)]
    )
    probs = model.predict_proba(params, X_eval)
    out: dict[str, np.ndarray] = {
        "test_accuracy": np.float64((probs[0].argmax(axis=1) == y_eval[:MAX_EVAL_ROWS]).mean())
    }
    if canary is not None:
        logits = neural_logits(model, params, canary[0].astype(np.float32))[0].astype(np.float64)
        picked = np.take_along_axis(logits, np.asarray(canary[1], np.int64)[:, None], axis=1)[:, 0]
        out["canary_loss"] = logsumexp(logits, axis=1) - picked  # cross-entropy, without saturation
    write_npz(out_path, out)
