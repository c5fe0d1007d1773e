"""Attack stage of the target audit: Yeom et al.'s loss threshold and offline LiRA, as scores.

- **Loss threshold** (Yeom et al. 2018, Alg. 1): score = −loss (higher = member); the fixed
  threshold τ = mean member loss gives one (TPR, FPR) point.
- **Offline LiRA** (Carlini et al. 2022, offline variant; :func:`dpaudit.attacks.lira.lira_scores`):
  the target's logit-scaled confidence on each candidate is compared with the shadows' (all "out"),
  score = −log Pr[Z > φ], Z ~ N(μ_out, σ_out²). The grid is ``[K, 1 + M]``: the target in column 0
  (in for members), the shadows after it (out everywhere); leave-one-out fits of column 0 use exactly
  the M shadows.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks.lira import lira_scores
from dpaudit.attacks.membership import loss_threshold_attack, membership_scores
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.target.config import TargetConfig
from dpaudit.io import write_npz
from dpaudit.layout import Audit

SCORES_FILE = "scores.npz"


def attack(config: TargetConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Write ``scores.npz``: per-candidate scores of both attacks, membership, Yeom's fixed point."""
    with np.load(audit.losses_path, allow_pickle=False) as f:
        loss, confidence = f["loss"], f["confidence"]
        shadows, is_member = f["shadow_confidence"], f["is_member"]
    grid = np.concatenate([confidence[:, None], shadows], axis=1)
    membership = np.zeros(grid.shape, dtype=bool)
    membership[:, 0] = is_member
    lira = lira_scores(grid, membership, mode="offline")[:, 0]
    yeom = loss_threshold_attack(loss[is_member], loss[~is_member])
    write_npz(
        out_dir / SCORES_FILE,
        {
            "loss_threshold": membership_scores(loss),
            "lira_offline": np.asarray(lira, np.float64),
            "is_member": is_member,
            "yeom_threshold": np.array(yeom.threshold),
            "yeom_tpr": np.array(yeom.tpr),
            "yeom_fpr": np.array(yeom.fpr),
        },
    )
