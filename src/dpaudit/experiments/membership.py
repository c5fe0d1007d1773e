"""Membership audit: DP-SGD at many noise levels vs. loss-threshold membership inference and Epsilon*.

Erlingsson et al. train models at fixed noise and compare accountants' ε upper bounds (naive,
advanced, RDP; Table 1) with an attack-based lower bound (Prop. 3), drawing the "region of
privacy" between them (Fig. 2). Negoescu et al. score single model instances, DP or not, by
Epsilon* (Def. 2) from member and non-member losses and plot it against utility (Figs. 1–2).
This module runs both on the same models in four stages:

- ``run_train``: per strategy and repeat a model (one trial each; all trials of a group in one
  trainer call): DP-SGD with Poisson sampling over a noise grid and over target ε (noise by
  calibration at δ = 1/(n ln n) unless set), non-DP SGD for several epoch counts, XGBoost.
- ``run_losses``: cross-entropy and logit losses on members / non-members, utility on the
  evaluation split, in one npz.
- ``run_attack``: per model the numbers of :func:`membership_analysis.analyse_model`.
- ``run_bounds``: accountants' ε for the noise actually used, metrics, CSV plots, report section.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import Audit
from dpaudit.experiments.membership_models import (
    build_model,
    group_seed,
    load_weights,
    neural_logits,
    save_weights,
    save_xgboost,
    train_group,
    train_xgboost,
    xgboost_logits,
)
from dpaudit.experiments.membership_plan import (
    MembershipConfig,
    Splits,
    Strategy,
    config_from_params,
    draw_splits,
    plan_strategies,
)
from dpaudit.io import read_json, write_json, write_npz
from dpaudit.logs import progress

__all__ = [
    "MembershipConfig",
    "config_from_params",
    "run_attack",
    "run_bounds",
    "run_losses",
    "run_train",
]

log = logging.getLogger(__name__)

TRAIN_CONFIG = "config.json"
SPLITS = "splits.npz"
ATTACK_FILE = "attack.npz"


def _hidden(config: MembershipConfig, dataset: str) -> tuple[int, ...] | None:
    return config.hidden.get(dataset)


def _load_splits(path: Path) -> Splits:
    with np.load(path, allow_pickle=False) as f:
        return Splits(members=f["members"], nonmembers=f["nonmembers"], evaluation=f["evaluation"])


def _strategies(train_config: dict[str, Any]) -> list[Strategy]:
    return [Strategy.from_dict(s) for s in train_config["strategies"]]


def run_train(config: MembershipConfig, audit: Audit, out_dir: Path) -> None:
    """Train every strategy × repeat; write weights, XGBoost models, splits and the config used."""
    from dpaudit.bounds.epsilon_star import default_delta

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    prepared = PreparedData.load(audit.prepared_path)
    sizes = config.sizes_for(audit.dataset)
    candidates = np.concatenate([prepared.train_idx, prepared.pool_idx])
    splits = draw_splits(candidates, prepared.eval_idx, sizes, config.repeats, config.seed, audit.dataset)
    delta = config.delta if config.delta is not None else default_delta(sizes.members)
    strategies = plan_strategies(config, sizes.members, delta)
    population = splits.population
    member_mask = np.stack([np.isin(population, m) for m in splits.members])  # [R, P]
    X_pop, y_pop = prepared.X[population], prepared.y[population]
    hidden = _hidden(config, audit.dataset)
    model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, hidden)
    groups: dict[str, list[Strategy]] = {}
    for s in strategies:
        if s.kind != "xgboost":
            groups.setdefault(s.group, []).append(s)
    for group, members_of_group in progress(groups.items(), desc=f"train {audit.name}", unit="group"):
        trial_strategies = [s for s in members_of_group for _ in range(config.repeats)]
        trial_repeats = [r for _ in members_of_group for r in range(config.repeats)]
        started = time.perf_counter()
        params = train_group(
            model,
            X_pop,
            y_pop,
            member_mask[trial_repeats],
            trial_strategies,
            seed=group_seed(config.seed, group),
        )
        log.info(
            "%s: trained %d trials of group %s in %.1fs",
            audit.name,
            len(trial_strategies),
            group,
            time.perf_counter() - started,
        )
        save_weights(
            out_dir / f"weights-{group}.npz", params, [s.name for s in trial_strategies], trial_repeats
        )
    if config.xgboost.enabled:
        for r in range(config.repeats):
            rows = splits.members[r]
            booster = train_xgboost(
                prepared.X[rows], prepared.y[rows], prepared.num_classes, config.xgboost, seed=config.seed + r
            )
            save_xgboost(booster, out_dir / f"xgboost-r{r}.ubj")
    write_npz(
        out_dir / SPLITS,
        {"members": splits.members, "nonmembers": splits.nonmembers, "evaluation": splits.evaluation},
    )
    write_json(
        out_dir / TRAIN_CONFIG,
        {
            "dataset": audit.dataset,
            "num_classes": prepared.num_classes,
            "members": sizes.members,
            "nonmembers": sizes.nonmembers,
            "repeats": config.repeats,
            "delta": delta,
            "hidden": list(hidden) if hidden is not None else None,
            "calibration_accountant": config.dpsgd.calibration_accountant,
            "poisson_sampling": True,
            "strategies": [s.to_dict() for s in strategies],
        },
    )


def _utility(probs: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Accuracy and (binary tasks only, else NaN) AUROC of predicted probabilities."""
    from sklearn.metrics import roc_auc_score

    accuracy = float(np.mean(np.argmax(probs, axis=-1) == labels))
    if probs.shape[-1] != 2 or len(np.unique(labels)) < 2:
        return accuracy, float("nan")
    return accuracy, float(roc_auc_score(labels, probs[:, 1]))


def run_losses(config: MembershipConfig, audit: Audit, out_path: Path) -> None:
    """Per model: CE and logit losses on its members and non-members, utility on the eval split."""
    from scipy.special import softmax

    from dpaudit.attacks.membership import losses_from_logits

    prepared = PreparedData.load(audit.prepared_path)
    train_config = read_json(audit.train_dir / TRAIN_CONFIG)
    splits = _load_splits(audit.train_dir / SPLITS)
    strategies = _strategies(train_config)
    repeats = int(train_config["repeats"])
    population = splits.population
    rows = np.concatenate([population, splits.evaluation])
    X_rows, y_rows = prepared.X[rows], prepared.y[rows]
    member_pos = np.searchsorted(population, splits.members)  # population is sorted and unique
    nonmember_pos = np.searchsorted(population, splits.nonmembers)
    eval_slice = slice(len(population), len(rows))
    y_eval = y_rows[eval_slice]

    logits_of: dict[tuple[str, int], np.ndarray] = {}
    groups = sorted({s.group for s in strategies if s.kind != "xgboost"})
    if groups:
        model = build_model(prepared.name, prepared.input_shape, prepared.num_classes, train_config["hidden"])
        for group in progress(groups, desc=f"losses {audit.name}", unit="group"):
            params, trial_strategy, trial_repeat = load_weights(audit.train_dir / f"weights-{group}.npz")
            logits = neural_logits(model, params, X_rows)
            for t, (name, r) in enumerate(zip(trial_strategy, trial_repeat, strict=True)):
                logits_of[(name, r)] = logits[t]
    if any(s.kind == "xgboost" for s in strategies):
        for r in range(repeats):
            logits_of[("xgboost", r)] = xgboost_logits(
                audit.train_dir / f"xgboost-r{r}.ubj", X_rows, prepared.num_classes
            )

    fields: dict[str, list[Any]] = {
        k: []
        for k in (
            "member_ce",
            "nonmember_ce",
            "member_logit",
            "nonmember_logit",
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
            fields["member_ce"].append(ce[member_pos[r]])
            fields["nonmember_ce"].append(ce[nonmember_pos[r]])
            fields["member_logit"].append(logit[member_pos[r]])
            fields["nonmember_logit"].append(logit[nonmember_pos[r]])
            accuracy, auroc = _utility(probs[eval_slice], y_eval)
            fields["accuracy"].append(accuracy)
            fields["auroc"].append(auroc)
            fields["train_accuracy"].append(_utility(probs[member_pos[r]], y_rows[member_pos[r]])[0])
            model_strategy.append(si)
            model_repeat.append(r)
    arrays: dict[str, np.ndarray] = {
        k: np.asarray(v, dtype=np.float32 if k.endswith(("_ce", "_logit")) else np.float64)
        for k, v in fields.items()
    }
    arrays.update(
        strategy_names=np.asarray([s.name for s in strategies], dtype=str),
        model_strategy=np.asarray(model_strategy, dtype=np.int64),
        model_repeat=np.asarray(model_repeat, dtype=np.int64),
        members=splits.members,
        nonmembers=splits.nonmembers,
    )
    write_npz(out_path, arrays)


def run_attack(config: MembershipConfig, audit: Audit, out_dir: Path) -> None:
    """Per model: Yeom attack, TPR at the fixed FPR, valid and naive ε lower bounds, Epsilon*."""
    from dpaudit.experiments.membership_analysis import ModelAttack, analyse_model

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train_config = read_json(audit.train_dir / TRAIN_CONFIG)
    delta = float(train_config["delta"])
    with np.load(audit.losses_path, allow_pickle=False) as f:
        losses = {k: f[k] for k in f.files}
    n_models = len(losses["model_strategy"])
    rows: list[ModelAttack] = []
    for m in progress(range(n_models), desc=f"attack {audit.name}", unit="model"):
        rows.append(
            analyse_model(
                losses["member_ce"][m],
                losses["nonmember_ce"][m],
                losses["member_logit"][m],
                losses["nonmember_logit"][m],
                delta,
                fpr=config.attack.fpr,
                confidence=config.attack.confidence,
                selection=config.attack.selection,
                seed=config.seed * 100_003 + m,
            )
        )
    arrays: dict[str, np.ndarray] = {
        name: np.asarray([getattr(row, name) for row in rows], dtype=np.float64)
        for name in ModelAttack.__dataclass_fields__
    }
    arrays.update(
        strategy_names=losses["strategy_names"],
        model_strategy=losses["model_strategy"],
        model_repeat=losses["model_repeat"],
        delta=np.asarray(delta),
        fpr=np.asarray(config.attack.fpr),
        confidence=np.asarray(config.attack.confidence),
    )
    write_npz(out_dir / ATTACK_FILE, arrays)


def run_bounds(
    config: MembershipConfig, audit: Audit, metrics_path: Path, plots_dir: Path, section_path: Path
) -> None:
    """Accountants' ε for every DP strategy, metrics JSON, plot CSVs and the report section."""
    from dpaudit.experiments.membership_report import write_outputs

    train_config = read_json(audit.train_dir / TRAIN_CONFIG)
    with np.load(audit.losses_path, allow_pickle=False) as f:
        losses = {k: f[k] for k in f.files if not k.endswith(("_ce", "_logit"))}
    with np.load(audit.attack_dir / ATTACK_FILE, allow_pickle=False) as f:
        attack = {k: f[k] for k in f.files}
    write_outputs(
        config, audit, train_config, losses, attack, Path(metrics_path), Path(plots_dir), Path(section_path)
    )
