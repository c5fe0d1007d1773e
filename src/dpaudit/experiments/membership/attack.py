"""Attack stage of the membership audit: every model's losses as score sets.

Per model, two score sets (:mod:`dpaudit.scores`) of the candidate population, ``member`` = the
model trained on the record (each drawn independently with the manifest's inclusion probability):

- ``attack=loss-<repeat>``: negated cross-entropy losses (Yeom et al.'s loss-threshold attack,
  :data:`dpaudit.references.YEOM`), audited by the ``loss_threshold`` estimator (one-run bound of
  Steinke, Nasr & Jagielski 2023, TPR at fixed FPR, the per-model test and Erlingsson et al.'s
  Prop. 3 estimates);
- ``attack=logit-<repeat>``: negated logit losses (Negoescu's footnote 1), audited by the
  ``epsilon_star`` estimator (Epsilon* with its permutation null and bootstrap spread).

The group's ``setting`` is the strategy's name; the first repeat's one-run bound is pre-registered
as the strategy's headline. Every statistic is computed by the bounds stage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks.membership import membership_scores
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.membership.config import MembershipConfig
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.scores import ScoreSet, write_score_sets


def model_sets(
    strategy: str,
    repeat: int,
    ce: np.ndarray,
    logit: np.ndarray,
    member: np.ndarray,
    params: dict[str, float | str],
    registered: bool = True,
) -> list[ScoreSet]:
    """One model's two score sets: negated cross-entropy and negated logit losses of the candidates;
    ``registered``: whether this model's bound is pre-registered for the strategy's headline."""
    one_run = float(params["inclusion_probability"]) == 0.5
    return [
        ScoreSet(
            {"setting": strategy, "attack": f"loss-{repeat}"},
            membership_scores(ce),
            member,
            ("loss_threshold",),
            "one-run" if one_run else "none",
            params=params,
            registered=None if registered else (),
        ),
        ScoreSet(
            {"setting": strategy, "attack": f"logit-{repeat}"},
            membership_scores(logit),
            member,
            ("epsilon_star",),
            params=params,
        ),
    ]


def attack(config: MembershipConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Per model, its two score sets, written to ``scores.npz``."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    seed = int(manifest.seeds["seed"])
    with open_npz(audit.losses_path) as f:
        losses = {k: f[k] for k in f.files}
    names = [str(n) for n in losses["strategy_names"]]
    masks = losses["member_mask"].astype(bool)
    sets: list[ScoreSet] = []
    for m in range(len(losses["model_strategy"])):
        params: dict[str, float | str] = {
            "delta": manifest.delta,
            "seed": seed * 100_003 + m,
            "inclusion_probability": float(manifest.facts.get("inclusion_probability", 0.0)),
            "selection": config.attack.selection,
            "n_bootstrap": config.attack.epsilon_star_bootstrap,
        }
        strategy, repeat = names[int(losses["model_strategy"][m])], int(losses["model_repeat"][m])
        # The first repeat's one-run bound is the strategy's pre-registered headline (see
        # dpaudit.bounds.estimators.loss_threshold); the others are reported beside it.
        ce, logit = losses["ce"][m], losses["logit"][m]
        sets += model_sets(strategy, repeat, ce, logit, masks[m], params, registered=repeat == 0)
    # out_dir replaces audit.attack_dir whole when the stage succeeds: the file lands at scores_path.
    write_score_sets(Path(out_dir) / audit.scores_path.name, sets)
