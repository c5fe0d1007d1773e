"""Train stage of the target audit: load the user's trained Keras model and train the shadow models.

The target's weights are read from its ``.keras`` file (``tf.keras.models.load_model`` in safe mode,
``compile=False``) and mapped onto the trials-at-once families
(:func:`dpaudit.training.keras_import.params_from_keras_weights`); the mapped forward pass equals
Keras' on the same weights. The shadows (offline LiRA, Carlini et al. 2022) have the same
architecture and are trained all at once by :func:`dpaudit.training.dpsgd.train_trials` on random
subsets of the pool, non-private or with DP-SGD as ``target.train`` says. Without a model file (a
plain prepared dataset) the target is a reference model trained on D with the shadows' recipe.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.target.config import TargetConfig, TrainParams
from dpaudit.experiments.target.design import MODEL_FILE, WEIGHTS_FILE, mapped_model, shadow_masks
from dpaudit.experiments.target.design.inputs import load_target_model
from dpaudit.io import write_npz
from dpaudit.layout import Audit
from dpaudit.training.accounting import default_delta

log = logging.getLogger(__name__)


def _train(model: object, X: np.ndarray, y: np.ndarray, masks: np.ndarray, params: TrainParams,
           seed: int) -> list[np.ndarray]:
    from dpaudit.training.dpsgd import DPSGDConfig, train_trials

    cfg = DPSGDConfig(
        clip_norm=params.clip_norm,
        noise_multiplier=params.noise_multiplier,
        learning_rate=params.learning_rate,
        steps=params.steps,
        sampling_rate=params.sampling_rate,
    )
    result = train_trials(model, X, y, masks, cfg, seed=seed, desc="shadow models")  # type: ignore[arg-type]
    return [np.asarray(p) for p in result.params]


def _mechanism(params: TrainParams) -> Mechanism:
    if params.clip_norm is None or params.noise_multiplier == 0:
        return Mechanism.non_private(params.steps, params.sampling_rate)
    return Mechanism.dpsgd(params.noise_multiplier, params.sampling_rate, params.steps, params.clip_norm)


def train(config: TargetConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """Write the target's and the shadows' weights (and the model file) into ``out_dir``."""
    started = time.perf_counter()
    prepared = PreparedData.load(audit.prepared_path)
    params = config.train
    target = load_target_model(audit.prepared_path)
    hidden = None if params.hidden is None else list(params.hidden)
    if target is not None:
        from dpaudit.training.keras_import import load_keras_model, params_from_keras_weights

        (out_dir / MODEL_FILE).write_bytes(target["bytes"])  # type: ignore[arg-type]
        model = mapped_model(out_dir, prepared, hidden)
        keras_model = load_keras_model(out_dir / MODEL_FILE)  # the allow-list check before Keras sees it
        target_params = params_from_keras_weights(keras_model, model, trials=1)
        facts = {k: v for k, v in target.items() if k != "bytes"}
        source = "keras"
    else:
        model = mapped_model(out_dir, prepared, hidden)
        X_D, y_D = prepared.split("train")
        target_params = _train(model, X_D, y_D, np.ones((1, len(X_D)), bool), params, params.seed + 1)
        facts = {}
        source = "reference"
    X_U, y_U = prepared.split("pool")
    masks = shadow_masks(len(X_U), params.shadows, params.shadow_fraction, params.seed)
    shadow_params = _train(model, X_U, y_U, masks, params, params.seed)
    arrays: dict[str, np.ndarray] = {"n_tensors": np.array(len(target_params))}
    for i, (t, s) in enumerate(zip(target_params, shadow_params, strict=True)):
        arrays[f"target_{i}"], arrays[f"shadow_{i}"] = np.asarray(t, np.float32), s
    write_npz(out_dir / WEIGHTS_FILE, arrays)
    members, nonmembers = len(prepared.train_idx), len(prepared.eval_idx)
    delta = config.bounds.delta if config.bounds.delta is not None else default_delta(max(members, 2))
    log.info("%s: target (%s) + %d shadows on %d pool rows", audit.name, source, params.shadows, len(X_U))
    return TrainManifest(
        experiment=audit.experiment,
        dataset=audit.dataset,
        delta=float(delta),
        sizes={"members": members, "nonmembers": nonmembers, "pool": len(X_U), "shadows": params.shadows,
               "shadow_train": int(masks[0].sum())},
        seeds={"seed": params.seed},
        mechanisms={"target": Mechanism.non_private(0, 1.0), "shadows": _mechanism(params)},
        facts={
            "source": source,
            "model": facts,
            "architecture": [type(layer).__name__ for layer in model.layers],
            "input_shape": list(model.input_shape),
            "hidden": hidden,
        },
        seconds=time.perf_counter() - started,
    )
