"""Heuristic (non-DP) membership-inference defences, many models trained at once.

Phases:

1. :mod:`~dpaudit.training.heuristics.trainer`: vectorised minibatch SGD over a leading trial axis with
   a pluggable per-trial loss (hard or soft targets, fixed-size uniform batches of each trial's members).
2. The defences on top of it:

   a. :mod:`~dpaudit.training.heuristics.relaxloss`: RelaxLoss (Chen, Yu, Fritz, ICLR 2022), descent,
      ascent or posterior flattening around a target loss α.
   b. :mod:`~dpaudit.training.heuristics.selena`: SELENA (Tang et al., USENIX Security 2022), Split-AI
      soft labels from K sub-models distilled into one released model per target.
   c. :mod:`~dpaudit.training.heuristics.hamp`: HAMP (Chen & Pattabiraman, NDSS 2024), high-entropy soft
      labels with an entropy regulariser, and outputs replaced at inference by those of random inputs
      in the query's class ranking.
"""

from __future__ import annotations

from dpaudit.training.heuristics.hamp import (
    HampConfig,
    hamp_logits,
    hamp_loss,
    hamp_objective,
    hamp_outputs,
    soft_label_probability,
    soft_labels,
    train_hamp,
)
from dpaudit.training.heuristics.relaxloss import (
    RelaxLossConfig,
    flattened_targets,
    relaxloss_loss,
    relaxloss_objective,
    train_relaxloss,
)
from dpaudit.training.heuristics.selena import (
    SelenaConfig,
    SplitAI,
    exclusion_mask,
    split_ai,
    split_ai_targets,
    train_selena,
)
from dpaudit.training.heuristics.trainer import (
    Loss,
    LossContext,
    batch_size_for,
    cross_entropy,
    steps_for,
    train_minibatch,
)

__all__ = [
    "HampConfig",
    "Loss",
    "LossContext",
    "RelaxLossConfig",
    "SelenaConfig",
    "SplitAI",
    "batch_size_for",
    "cross_entropy",
    "exclusion_mask",
    "flattened_targets",
    "hamp_logits",
    "hamp_loss",
    "hamp_objective",
    "hamp_outputs",
    "relaxloss_loss",
    "relaxloss_objective",
    "split_ai",
    "soft_label_probability",
    "soft_labels",
    "split_ai",
    "split_ai_targets",
    "steps_for",
    "train_hamp",
    "train_minibatch",
    "train_relaxloss",
    "train_selena",
]
