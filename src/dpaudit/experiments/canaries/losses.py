"""Losses stage of the canaries experiment: every model's view of every canary, and test accuracy.

For each trained group (undefended, each DP-SGD setting) and each of its M models: the logits on
every canary query (the canary and, for image data, its four one-pixel shifts: LiRA's query
augmentations, Carlini et al. 2022 §VI, arXiv 2112.03570), turned into the logit-scaled confidence
φ = z_y − logsumexp_{j≠y} z_j and the hinge z_y − max_{j≠y} z_j of the canary's *assigned* label
(:mod:`dpaudit.training.outputs`), plus the predicted label of each query (all a label-only release
shows) and the test accuracy on the prepared evaluation split (Aerni et al. report utility next to
every privacy number, :data:`dpaudit.references.AERNI`). RMIA (:mod:`dpaudit.attacks.rmia`) also
needs each model's probability of the true label on population records that no model trained on:
the first :data:`POPULATION_RECORDS` rows of the evaluation split. Every number is taken from what
the defence releases: HAMP's outputs are modified at inference (:func:`released_logits`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from dpaudit.data.prepared import PreparedData
from dpaudit.data.worlds import setting_seed
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.canaries.config import CanariesConfig
from dpaudit.experiments.canaries.design import (
    DEFENCE_KINDS,
    DESIGN_FILE,
    load_audit_set,
    query_augmentations,
)
from dpaudit.experiments.canaries.train import load_weights, weights_file
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.training.modelling import build_model, neural_logits
from dpaudit.training.models import Model
from dpaudit.training.outputs import hinge_confidence, logit_scaled_confidence

#: Population records (evaluation rows, never trained on) whose true-label probability RMIA compares with.
POPULATION_RECORDS = 500


def released_logits(
    kind: str, model: Model, params: list[np.ndarray], X: np.ndarray, seed: int
) -> np.ndarray:
    """What a defence releases on ``X``, as logits ``[M, N, C]``: its models' logits, or for HAMP the
    log-probabilities of its modified outputs (random inputs' confidences in the query's class
    ranking, :func:`dpaudit.training.heuristics.hamp_logits`), so every attack sees the release."""
    if kind == "hamp":
        from dpaudit.training.heuristics import hamp_logits

        return hamp_logits(model, params, X, seed)
    return neural_logits(model, params, X)


def losses(config: CanariesConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """Per group: φ (logit-scaled, hinge) and predicted labels ``[K, M, A]``, test accuracy ``[M]`` and
    the true-label probability of the population records ``[M, Z]``."""
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
    kind_of = {str(d["weights"]): str(d["kind"]) for d in manifest.facts["defences"]
               if not DEFENCE_KINDS[str(d["kind"])].label_only}  # fmt: skip
    for group in groups:
        params = load_weights(audit.train_dir / weights_file(group))
        queries_and_eval = np.concatenate([flat, X_eval])
        seed = setting_seed(int(manifest.seeds["design_seed"]), "canaries-released", group)
        logits = released_logits(kind_of[group], model, params, queries_and_eval, seed)  # [M, K·A + E, C]
        canary = logits[:, : k * a].reshape(len(logits), k, a, -1).transpose(1, 0, 2, 3)  # [K, M, A, C]
        test = logits[:, k * a :]
        arrays[f"{group}__phi_logit"] = logit_scaled_confidence(canary, labels).astype(np.float32)
        arrays[f"{group}__phi_hinge"] = hinge_confidence(canary, labels).astype(np.float32)
        arrays[f"{group}__pred"] = np.argmax(canary, axis=-1).astype(np.int16)
        arrays[f"{group}__accuracy"] = np.mean(np.argmax(test, axis=-1) == y_eval[None], axis=1)
        population = test[:, :POPULATION_RECORDS]
        log_p = population - logsumexp(population, axis=-1, keepdims=True)
        picked = np.take_along_axis(log_p, y_eval[None, :POPULATION_RECORDS, None].astype(np.int64), axis=-1)
        arrays[f"{group}__population_prob"] = np.exp(picked[..., 0]).astype(np.float32)
    arrays["groups"] = np.asarray(groups, dtype=str)
    write_npz(out_path, arrays)
