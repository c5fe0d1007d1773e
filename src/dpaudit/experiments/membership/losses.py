"""Losses stage of the membership audit: per model, losses on its candidate population, and utility.

Every model's losses cover the whole candidate population, with the model's member mask beside
them (members vary per repeat and so do their counts: inclusion is an independent coin per
candidate, :func:`dpaudit.experiments.membership.design.draw_splits`).

Cross-entropy (Yeom et al.'s loss, :data:`dpaudit.references.YEOM`) and Negoescu et al.'s logit
loss (footnote 1, :data:`dpaudit.references.NEGOESCU`), both from the logits by
:func:`dpaudit.training.outputs.losses_from_logits`; utility (accuracy, AUROC for binary tasks)
on the evaluation split. The strategies, repeats and widths come from the train manifest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.experiments.membership.design import SPLITS, load_splits, manifest_strategies
from dpaudit.experiments.membership.train import load_weights, xgboost_logits
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.logs import progress
from dpaudit.training.modelling import build_model, neural_logits
from dpaudit.training.outputs import losses_from_logits


def _utility(probs: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Accuracy and (binary tasks only, else NaN) AUROC of predicted probabilities."""
    from sklearn.metrics import roc_auc_score

    accuracy = float(np.mean(np.argmax(probs, axis=-1) == labels))
    if probs.shape[-1] != 2 or len(np.unique(labels)) < 2:
        return accuracy, float("nan")
    return accuracy, float(roc_auc_score(labels, probs[:, 1]))


def losses(config: MembershipConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """Per model: CE and logit losses on the population with its member mask; utility on the eval split."""
    from scipy.special import softmax

    prepared = PreparedData.load(audit.prepared_path)
    splits = load_splits(audit.train_dir / SPLITS)
    strategies = manifest_strategies(manifest)
    repeats = int(manifest.sizes["repeats"])
    population = splits.population
    rows = np.concatenate([population, splits.evaluation])
    X_rows, y_rows = prepared.X[rows], prepared.y[rows]
    pop_slice = slice(0, len(population))
    eval_slice = slice(len(population), len(rows))
    y_eval = y_rows[eval_slice]

    logits_of: dict[tuple[str, int], np.ndarray] = {}
    groups = sorted({s.group for s in strategies if s.spec.neural})
    if groups:
        model = build_model(
            prepared.name,
            prepared.input_shape,
            prepared.num_classes,
            manifest.facts["hidden"],
            manifest.facts.get("model"),
        )
        for group in progress(groups, desc=f"losses {audit.name}", unit="group"):
            params, trial_strategy, trial_repeat = load_weights(audit.train_dir / f"weights-{group}.npz")
            logits = neural_logits(model, params, X_rows)
            for t, (name, r) in enumerate(zip(trial_strategy, trial_repeat, strict=True)):
                logits_of[(name, r)] = logits[t]
    for s in strategies:
        if s.spec.neural:
            continue
        for r in range(repeats):  # the one learner that is not the network: XGBoost
            logits_of[(s.name, r)] = xgboost_logits(
                audit.train_dir / f"xgboost-r{r}.ubj", X_rows, prepared.num_classes
            )

    fields: dict[str, list[Any]] = {
        k: []
        for k in (
            "ce",
            "logit",
            "member_mask",
            "accuracy",
            "auroc",
            "train_accuracy",
        )
    }
    model_strategy, model_repeat = [], []
    for si, s in enumerate(strategies):
        for r in range(repeats):
            logits = np.asarray(logits_of[(s.name, r)], dtype=np.float64)
            ce, logit = losses_from_logits(logits, y_rows)
            probs = softmax(logits, axis=-1)
            mask = splits.member_mask[r]
            fields["ce"].append(ce[pop_slice])
            fields["logit"].append(logit[pop_slice])
            fields["member_mask"].append(mask)
            accuracy, auroc = _utility(probs[eval_slice], y_eval)
            fields["accuracy"].append(accuracy)
            fields["auroc"].append(auroc)
            members = np.flatnonzero(mask)
            fields["train_accuracy"].append(_utility(probs[members], y_rows[members])[0])
            model_strategy.append(si)
            model_repeat.append(r)
    dtypes = {"ce": np.float32, "logit": np.float32, "member_mask": bool}
    arrays: dict[str, np.ndarray] = {
        k: np.asarray(v, dtype=dtypes.get(k, np.float64)) for k, v in fields.items()
    }
    arrays.update(
        strategy_names=np.asarray([s.name for s in strategies], dtype=str),
        model_strategy=np.asarray(model_strategy, dtype=np.int64),
        model_repeat=np.asarray(model_repeat, dtype=np.int64),
        population=splits.population,
    )
    write_npz(out_path, arrays)
