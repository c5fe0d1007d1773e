"""Phase 2b, SELENA: Split-AI soft labels distilled into one released model per target.
In: model, rows X, labels y, membership mask ``[T, N]``, :class:`SelenaConfig`, seed.
Out: the students' final parameters ``[T, ...]`` per tensor (the released models).

Tang, Mahloujifar, Song, Shejwalkar, Nasr, Houmansadr, Mittal, "Mitigating Membership Inference
Attacks by Self-Distillation Through a Novel Ensemble Architecture", USENIX Security 2022
(:data:`REFERENCE`). For every target trial t with member set D_t:

1. Split-AI: K sub-models; each member is excluded from L of them, chosen uniformly at random
   (:func:`exclusion_mask`), and sub-model k trains on the members not excluded from it. All T·K
   sub-models train in one :func:`~dpaudit.training.heuristics.trainer.train_minibatch` call
   (masks ``[T·K, N]``, hard-label cross-entropy).
2. Split-AI's output for a member x is the mean softmax of the L sub-models that did not train on x
   (:func:`split_ai_targets`), so the soft label never reflects x's own membership.
3. Self-distillation: a fresh model per trial trains on D_t with those soft labels as targets (soft
   cross-entropy); only this student is released, and the T students train in one call.

Scale: the paper uses K = 25, L = 10 (each sub-model sees 60 % of D_t). At digits scale the default is
K = 8, L = 3 (62.5 %, about the same fraction) and 16 epochs: in ``benchmarks/tune_heuristics.py`` K = 8,
10, 16 and 25 gave the same test accuracy (0.947–0.951) and loss gap (0.079–0.080) at 16 epochs, and
64 targets on an audit-sized design (~1300 rows, 576 models) trained in 11 s on 2 CPU cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpaudit.config import require
from dpaudit.training.heuristics.trainer import Schedule, cross_entropy, steps_for, train_minibatch
from dpaudit.training.models import Model

__all__ = ["REFERENCE", "SelenaConfig", "SplitAI", "exclusion_mask", "split_ai", "split_ai_targets",
           "train_selena"]  # fmt: skip

REFERENCE = (
    "X. Tang, S. Mahloujifar, L. Song, V. Shejwalkar, M. Nasr, A. Houmansadr, P. Mittal. Mitigating "
    "Membership Inference Attacks by Self-Distillation Through a Novel Ensemble Architecture. USENIX "
    "Security 2022 (Split-AI and Self-Distillation)."
)

#: Seed offset of the students (a fresh model, not a copy of a sub-model's initial weights).
STUDENT_SEED_OFFSET = 1_000_003


@dataclass(frozen=True, kw_only=True)
class SelenaConfig(Schedule):
    """SELENA hyper-parameters: ``submodels`` K, ``excluded`` L (1 ≤ L < K: sub-models that do not train
    on a record), SGD ``learning_rate``, ``epochs`` of each sub-model and ``distill_epochs`` of the
    student (steps = ⌈epochs / q⌉), ``sampling_rate`` q (batch size q·mean |D|). The defaults are the
    digits setting tuned by ``benchmarks/tune_heuristics.py``."""

    submodels: int = 8
    excluded: int = 3
    learning_rate: float = 1.0
    epochs: float = 16.0
    distill_epochs: float = 16.0

    def __post_init__(self) -> None:
        super().__post_init__()  # learning_rate, epochs, sampling_rate
        require(isinstance(self.submodels, int) and self.submodels >= 2, "submodels", self.submodels,
                "must be an integer ≥ 2")  # fmt: skip
        require(isinstance(self.excluded, int) and 1 <= self.excluded < self.submodels, "excluded",
                self.excluded, f"must be an integer in [1, submodels = {self.submodels})")  # fmt: skip
        require(math.isfinite(self.distill_epochs) and self.distill_epochs > 0, "distill_epochs",
                self.distill_epochs, "must be finite and > 0")  # fmt: skip


@dataclass(frozen=True)
class SplitAI:
    """Split-AI of T targets: ``excluded`` ``[T, N, K]`` (sub-model k does not train on row n),
    ``submodel_params`` (per tensor ``[T·K, ...]``, sub-model k of trial t at row t·K + k) and
    ``targets`` ``[T, N, C]`` (each row's mean softmax over its L excluded sub-models)."""

    excluded: np.ndarray
    submodel_params: list[np.ndarray]
    targets: np.ndarray

    def submodel_mask(self, member_mask: np.ndarray) -> np.ndarray:
        """Training masks ``[T·K, N]``: the trial's members not excluded from the sub-model."""
        return _submodel_mask(np.asarray(member_mask, bool), self.excluded)


def _submodel_mask(mask: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    T, N, K = excluded.shape
    return (mask[:, None, :] & ~np.moveaxis(excluded, 2, 1)).reshape(T * K, N)


def exclusion_mask(num_trials: int, num_rows: int, submodels: int, excluded: int, seed: int) -> np.ndarray:
    """``[T, N, K]`` booleans with exactly ``excluded`` (L) of the K entries true per trial and row: the
    sub-models that do not train on the row, drawn uniformly and independently per trial and row."""
    rng = np.random.default_rng([seed, 2022, submodels, excluded])
    order = np.argsort(rng.random((num_trials, num_rows, submodels)), axis=-1)
    out = np.zeros((num_trials, num_rows, submodels), dtype=bool)
    np.put_along_axis(out, order[..., :excluded], True, axis=-1)
    return out


def split_ai_targets(probs: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """Split-AI outputs ``[T, N, C]`` from sub-model softmax outputs ``probs`` ``[T, K, N, C]``: for each
    trial and row the mean over the sub-models with ``excluded[t, n, k]`` (those that never saw row n)."""
    w = np.moveaxis(np.asarray(excluded, np.float32), 2, 1)  # [T, K, N]
    counts = w.sum(axis=1)[..., None]
    if np.any(counts == 0):
        raise ValueError("every row needs at least one excluded sub-model")
    return (np.einsum("tkn,tknc->tnc", w, np.asarray(probs, np.float32)) / counts).astype(np.float32)


def split_ai(
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: SelenaConfig,
    seed: int = 0,
    desc: str = "train selena split-ai",
    *,
    chunk_size: int | None = None,
) -> SplitAI:
    """Train the T·K sub-models in one call and form every row's Split-AI soft label."""
    mask = np.asarray(member_mask, bool)
    T, N = mask.shape
    K = cfg.submodels
    excluded = exclusion_mask(T, N, K, cfg.excluded, seed)
    sub_mask = _submodel_mask(mask, excluded)
    params = train_minibatch(
        model, X, np.asarray(y, np.int32), sub_mask, cross_entropy, learning_rate=cfg.learning_rate,
        steps=steps_for(cfg.epochs, cfg.sampling_rate), sampling_rate=cfg.sampling_rate, seed=seed,
        desc=desc, chunk_size=None if chunk_size is None else chunk_size * K,
    )  # fmt: skip
    X = np.asarray(X, np.float32)
    targets = np.zeros((T, N, model.num_classes), np.float32)
    per = max(1, int(2e7 // max(1, K * N * model.num_classes)))  # targets of this many trials at once
    for t0 in range(0, T, per):
        t1 = min(T, t0 + per)
        probs = model.predict_proba([p[t0 * K : t1 * K] for p in params], X)
        targets[t0:t1] = split_ai_targets(probs.reshape(t1 - t0, K, N, -1), excluded[t0:t1])
    return SplitAI(excluded=excluded, submodel_params=params, targets=targets)


def train_selena(
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: SelenaConfig,
    seed: int = 0,
    desc: str = "train selena",
    *,
    chunk_size: int | None = None,
) -> list[np.ndarray]:
    """Train T SELENA models: Split-AI (T·K sub-models) then one distilled student per trial, trained on
    its members with their Split-AI soft labels. Returns the students' parameters ``[T, ...]``."""
    ensemble = split_ai(model, X, y, member_mask, cfg, seed, f"{desc} split-ai", chunk_size=chunk_size)
    return train_minibatch(
        model, X, ensemble.targets, member_mask, cross_entropy, learning_rate=cfg.learning_rate,
        steps=steps_for(cfg.distill_epochs, cfg.sampling_rate), sampling_rate=cfg.sampling_rate,
        seed=seed + STUDENT_SEED_OFFSET, desc=f"{desc} distill", chunk_size=chunk_size,
    )  # fmt: skip
