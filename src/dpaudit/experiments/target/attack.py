"""Attack stage of the target audit: Yeom et al.'s loss threshold and offline LiRA, as score sets.

- **Loss threshold** (Yeom et al. 2018, Alg. 1): score = −loss (higher = member).
- **Offline LiRA** (Carlini et al. 2022, offline variant; :func:`dpaudit.attacks.lira.lira_scores`):
  the target's logit-scaled confidence on each candidate is compared with the shadows' (all "out"),
  score = −log Pr[Z > φ], Z ~ N(μ_out, σ_out²). The grid is ``[K, 1 + M]``: the target in column 0
  (in for members), the shadows after it (out everywhere); leave-one-out fits of column 0 use exactly
  the M shadows.
- **Logit loss** (Negoescu et al.'s footnote 1): score = −logit loss, for Epsilon*.

Each is one score set (:mod:`dpaudit.scores`, group ``attack``), ``member`` = on the user's member
list. The membership was not drawn by the audit, so the sets carry estimators that emit no ε bound:
``rates`` for the two attacks (TPR at the configured FPR levels, AUROC, advantage) and
``epsilon_star`` for the logit losses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks.lira import lira_scores
from dpaudit.attacks.membership import membership_scores
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.scores import ScoreSet, write_score_sets


def attack(config: TargetConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Write the score sets of offline LiRA, the loss threshold and the logit losses."""
    with open_npz(audit.losses_path) as f:
        loss, confidence, logit_loss = f["loss"], f["confidence"], f["logit_loss"]
        shadows, is_member = f["shadow_confidence"], f["is_member"].astype(bool)
    grid = np.concatenate([confidence[:, None], shadows], axis=1)
    membership = np.zeros(grid.shape, dtype=bool)
    membership[:, 0] = is_member
    lira = lira_scores(grid, membership, mode="offline")[:, 0]
    params = {
        "delta": float(manifest.delta),
        "seed": int(manifest.seeds["seed"]),
        "fpr_levels": ",".join(f"{level:g}" for level in config.attack.fpr_levels),
    }
    sets = [
        ScoreSet(
            {"attack": "lira_offline"}, np.asarray(lira, np.float64), is_member, ("rates",), params=params
        ),
        ScoreSet({"attack": "loss_threshold"}, membership_scores(loss), is_member, ("rates",), params=params),
        ScoreSet(
            {"attack": "logit_loss"},
            membership_scores(logit_loss),
            is_member,
            ("epsilon_star",),
            params=params,
        ),
    ]
    # out_dir replaces audit.attack_dir whole when the stage succeeds: the file lands at scores_path.
    write_score_sets(Path(out_dir) / audit.scores_path.name, sets)
