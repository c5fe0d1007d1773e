"""Training and prediction for the membership audit: DP-SGD / non-DP trials and XGBoost.

Neural strategies that share steps and sampling rate are trained in one call of the shared
trials-at-once trainer (:mod:`dpaudit.training`), with one trial per (strategy, repeat) and a
per-trial member mask and noise multiplier. XGBoost is trained per repeat with a fixed seed and
no row or column subsampling, so it is deterministic.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.experiments.membership_plan import Strategy, XGBoostParams
from dpaudit.io import atomic_path, write_npz

if TYPE_CHECKING:
    from xgboost import XGBClassifier

    from dpaudit.training.models import Model

log = logging.getLogger(__name__)


def group_seed(seed: int, group: str) -> int:
    """A stable per-group seed (independent of Python's randomised ``hash``)."""
    return (int(seed) * 1_000_003 + zlib.crc32(group.encode())) % (2**31 - 1)


def build_model(
    dataset: str, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] | None
) -> Model:
    """The shared trainer's model for ``dataset`` (MLP, or CNN for mnist / cifar10)."""
    from dpaudit.training.models import model_for_dataset

    return model_for_dataset(dataset, tuple(input_shape), num_classes, hidden=hidden)


def train_group(
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    strategies: Sequence[Strategy],
    seed: int,
) -> list[np.ndarray]:
    """Train one trial per row of ``member_mask`` with the matching strategy; return stacked weights.

    All ``strategies`` must share steps, sampling rate, learning rate and clipping (one group);
    noise multipliers may differ per trial. Non-DP groups run without clipping and noise.
    """
    from dpaudit.training.dpsgd import DPSGDConfig, train_trials

    first = strategies[0]
    for s in strategies:
        same = (s.steps, s.sampling_rate, s.learning_rate, s.clip_norm) == (
            first.steps,
            first.sampling_rate,
            first.learning_rate,
            first.clip_norm,
        )
        if not same:
            raise ValueError(f"strategies {first.name} and {s.name} cannot share a training call")
    noise = np.array([s.noise_multiplier or 0.0 for s in strategies], dtype=np.float64)
    cfg = DPSGDConfig(
        clip_norm=first.clip_norm,
        noise_multiplier=noise,
        learning_rate=float(first.learning_rate or 0.0),
        steps=int(first.steps or 0),
        sampling_rate=float(first.sampling_rate or 1.0),
    )
    result = train_trials(model, X, y, member_mask, cfg, seed=seed)
    return [np.asarray(p) for p in result.params]


def save_weights(
    path: Path, params: Sequence[np.ndarray], trial_strategy: Sequence[str], trial_repeat: Sequence[int]
) -> None:
    """Final weights of a group's trials (``p0``, ``p1``, … stacked on the trial axis), float32."""
    arrays: dict[str, np.ndarray] = {f"p{i}": np.asarray(p, dtype=np.float32) for i, p in enumerate(params)}
    arrays["trial_strategy"] = np.asarray(trial_strategy, dtype=str)
    arrays["trial_repeat"] = np.asarray(trial_repeat, dtype=np.int64)
    write_npz(path, arrays)


def load_weights(path: Path) -> tuple[list[np.ndarray], list[str], list[int]]:
    with np.load(path, allow_pickle=False) as f:
        count = sum(1 for k in f.files if k.startswith("p") and k[1:].isdigit())
        params = [f[f"p{i}"] for i in range(count)]
        return params, [str(s) for s in f["trial_strategy"]], [int(r) for r in f["trial_repeat"]]


def neural_logits(
    model: Model, params: Sequence[np.ndarray], X: np.ndarray, budget_floats: float = 5e7
) -> np.ndarray:
    """Logits ``[T, N, C]`` (float32) of every trial's model on ``X``.

    Rows go through in batches sized so that all trials' activations stay within about
    ``budget_floats`` floats (CNNs on image data would otherwise need gigabytes at once).
    """
    import tensorflow as tf

    tensors = [tf.convert_to_tensor(p, dtype=tf.float32) for p in params]
    trials = int(tensors[0].shape[0])
    batch = max(1, int(budget_floats // max(1, trials * model.activation_size())))
    outs = []
    for start in range(0, len(X), batch):
        logits, _ = model.forward(tensors, tf.convert_to_tensor(X[start : start + batch], dtype=tf.float32))
        outs.append(logits.numpy())
    if not outs:
        return np.zeros((trials, 0, model.num_classes), dtype=np.float32)
    return np.concatenate(outs, axis=1)


def _flat(X: np.ndarray) -> np.ndarray:
    return X.reshape(len(X), -1)


def train_xgboost(
    X: np.ndarray, y: np.ndarray, num_classes: int, params: XGBoostParams, seed: int
) -> XGBClassifier:
    """Fit a deterministic XGBoost classifier (hist trees, no subsampling, one thread)."""
    from xgboost import XGBClassifier

    model = XGBClassifier(
        n_estimators=params.n_estimators,
        max_depth=params.max_depth,
        learning_rate=params.learning_rate,
        subsample=1.0,
        colsample_bytree=1.0,
        tree_method="hist",
        n_jobs=1,
        random_state=seed,
        objective="binary:logistic" if num_classes == 2 else "multi:softprob",
    )
    model.fit(_flat(X), y)
    return model


def save_xgboost(model: XGBClassifier, path: Path) -> None:
    """Save in XGBoost's own format (``.ubj`` binary JSON), atomically."""
    with atomic_path(path) as tmp:
        target = tmp.with_suffix(".ubj")
        model.save_model(target)
        target.replace(tmp)


def xgboost_logits(path: Path, X: np.ndarray, num_classes: int) -> np.ndarray:
    """Softmax-equivalent logits ``[N, C]`` of a saved XGBoost model from its raw margins.

    Binary models output one margin m = logit P(y = 1); the logits ``[0, m]`` give the same
    probabilities under a softmax. Multi-class margins are the softmax logits already.
    """
    from xgboost import XGBClassifier

    model = XGBClassifier()
    model.load_model(path)
    margin = np.asarray(model.predict(_flat(X), output_margin=True), dtype=np.float64)
    if num_classes == 2 and margin.ndim == 1:
        return np.stack([np.zeros_like(margin), margin], axis=1)
    if margin.ndim != 2 or margin.shape[1] != num_classes:
        raise ValueError(f"{path}: model margins have shape {margin.shape}, expected [N, {num_classes}]")
    return margin
