"""Train stage of the membership audit: DP-SGD / non-DP trials and XGBoost (Erlingsson et al. §4–5).

Neural strategies that share steps and sampling rate are trained in one call of the shared
trials-at-once trainer (:mod:`dpaudit.training`), with one trial per (strategy, repeat) and a
per-trial member mask and noise multiplier. XGBoost is trained per repeat with a fixed seed and
no row or column subsampling, so it is deterministic.
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig, XGBoostParams
from dpaudit.experiments.membership.design import (
    SPLITS,
    Strategy,
    draw_splits,
    plan_strategies,
    save_splits,
)
from dpaudit.io import atomic_path, open_npz, write_npz
from dpaudit.layout import Audit
from dpaudit.logs import progress
from dpaudit.training.modelling import build_model

if TYPE_CHECKING:
    from xgboost import XGBClassifier

    from dpaudit.training.models import Model

log = logging.getLogger(__name__)


def group_seed(seed: int, group: str) -> int:
    """A stable per-group seed (independent of Python's randomised ``hash``)."""
    return (int(seed) * 1_000_003 + zlib.crc32(group.encode())) % (2**31 - 1)


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
    from dpaudit.training.dpsgd import DPSGDConfig
    from dpaudit.training.shards import run_trials

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
    result = run_trials(model, X, y, member_mask, cfg, seed=seed)
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
    with open_npz(path) as f:
        count = sum(1 for k in f.files if k.startswith("p") and k[1:].isdigit())
        params = [f[f"p{i}"] for i in range(count)]
        return params, [str(s) for s in f["trial_strategy"]], [int(r) for r in f["trial_repeat"]]


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


def train(config: MembershipConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """Train every strategy × repeat; write weights, XGBoost models and splits; return the manifest."""
    from dpaudit.training.accounting import default_delta

    started = time.perf_counter()
    tp = config.train
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = PreparedData.load(audit.prepared_path)
    sizes = config.sizes_for(audit.dataset)
    candidates = np.concatenate([prepared.train_idx, prepared.pool_idx])
    splits = draw_splits(candidates, prepared.eval_idx, sizes, tp.repeats, tp.seed, audit.dataset)
    delta = tp.delta if tp.delta is not None else default_delta(sizes.members)
    strategies = plan_strategies(config, sizes.members, delta)
    population = splits.population
    member_mask = splits.member_mask  # [R, P]: independent inclusion per candidate and repeat
    X_pop, y_pop = prepared.X[population], prepared.y[population]
    hidden = config.hidden_for(audit.dataset)
    choice = config.sizes_for(audit.dataset).model
    model = build_model(
        prepared.name,
        prepared.input_shape,
        prepared.num_classes,
        hidden,
        choice,
        where=f"membership.datasets.{audit.dataset}.model",
    )
    groups: dict[str, list[Strategy]] = {}
    for s in strategies:
        if s.spec.neural:
            groups.setdefault(s.group, []).append(s)
    for group, members_of_group in progress(groups.items(), desc=f"train {audit.name}", unit="group"):
        trial_strategies = [s for s in members_of_group for _ in range(tp.repeats)]
        trial_repeats = [r for _ in members_of_group for r in range(tp.repeats)]
        group_started = time.perf_counter()
        params = train_group(
            model, X_pop, y_pop, member_mask[trial_repeats], trial_strategies, seed=group_seed(tp.seed, group)
        )
        log.info("%s: trained %d trials of group %s in %.1fs", audit.name, len(trial_strategies), group,
                 time.perf_counter() - group_started)  # fmt: skip
        save_weights(
            out_dir / f"weights-{group}.npz", params, [s.name for s in trial_strategies], trial_repeats
        )
    if tp.xgboost.enabled:
        for r in range(tp.repeats):
            rows = splits.members(r)
            booster = train_xgboost(
                prepared.X[rows], prepared.y[rows], prepared.num_classes, tp.xgboost, seed=tp.seed + r
            )
            save_xgboost(booster, out_dir / f"xgboost-r{r}.ubj")
    save_splits(out_dir / SPLITS, splits)
    mechanisms: dict[str, Mechanism] = {}
    for s in strategies:
        if s.spec.private:
            mechanisms[s.name] = Mechanism.dpsgd(
                float(s.noise_multiplier or 0.0),
                float(s.sampling_rate or 1.0),
                int(s.steps or 0),
                float(s.clip_norm or 0.0),
            )
        else:
            mechanisms[s.name] = Mechanism.non_private(int(s.steps or 0), float(s.sampling_rate or 1.0))
    return TrainManifest(
        experiment="membership",
        dataset=audit.dataset,
        delta=delta,
        sizes={
            "members": sizes.members,
            "nonmembers": sizes.nonmembers,
            "candidates": len(population),
            "repeats": tp.repeats,
        },
        seeds={"seed": tp.seed},
        mechanisms=mechanisms,
        facts={
            "num_classes": prepared.num_classes,
            "hidden": list(hidden) if hidden is not None else None,
            "model": None if choice is None else asdict(choice),
            "calibration_accountant": tp.dpsgd.calibration_accountant,
            "poisson_sampling": True,
            # Every candidate is a member independently with this probability in every repeat
            # (Steinke et al. 2023's one-run audit needs 1/2); ``members`` is the expected count.
            "inclusion_probability": splits.inclusion_probability,
            "member_counts": splits.member_counts,
            "strategies": [s.to_dict() for s in strategies],
        },
        seconds=round(time.perf_counter() - started, 3),
    )
