"""Black-box membership inference from per-example losses (Yeom et al.'s loss-threshold attack).

The adversary sees a trained model's loss on a query record and calls it a member when the loss
is at most a threshold. Yeom et al. (2018, Alg. 1) use the model's average training loss as the
threshold; Erlingsson et al. (§4) report the attack's TPR at a fixed 5 % FPR; the advantage
TPR − FPR of the best threshold turns into an ε lower bound via Erlingsson et al. Prop. 3 (see
:mod:`dpaudit.bounds`). Scores passed to the bounds library are *negated* losses, so that a higher
score means "member" there.

ROC quantities come from :func:`sklearn.metrics.roc_curve`; only the cross-entropy clipping and
the average-loss rule are written here, because no library provides them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_curve

from dpaudit.training.outputs import losses_from_logits

#: Smallest probability used inside a logarithm (cross-entropy of a confident wrong prediction).
PROBABILITY_FLOOR = 1e-12


def _as_losses(values: np.ndarray, name: str) -> np.ndarray:
    losses = np.asarray(values, dtype=np.float64).ravel()
    if losses.size == 0:
        raise ValueError(f"{name} is empty: the attack needs at least one loss")
    if not np.all(np.isfinite(losses)):
        raise ValueError(f"{name} contains NaN or infinite losses")
    return losses


def cross_entropy_loss(probabilities: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Per-example cross-entropy −log p_y of predicted class probabilities.

    ``probabilities`` is ``[..., n, C]`` (rows sum to one; leading axes, e.g. trials, are kept);
    ``labels`` is ``[n]`` with values in ``0..C-1``. Probabilities are floored at
    :data:`PROBABILITY_FLOOR` so a confidently wrong prediction gives a large finite loss. This is
    :func:`dpaudit.training.outputs.losses_from_logits` applied to the log-probabilities (a softmax
    of log p is p), so the package has one cross-entropy.
    """
    probs = np.asarray(probabilities, dtype=np.float64)
    if probs.ndim < 2:
        raise ValueError(f"probabilities must be [..., n, C], got shape {probs.shape}")
    with np.errstate(divide="ignore"):
        log_probs = np.log(np.clip(probs, PROBABILITY_FLOOR, 1.0))
    ce, _ = losses_from_logits(log_probs, labels)
    return ce


def yeom_decision(losses: np.ndarray, threshold: np.ndarray | float) -> np.ndarray:
    """Yeom et al.'s decision rule (Alg. 1, :data:`dpaudit.references.YEOM`): "member" iff loss ≤ threshold.

    The one rule of the package: the membership audit's threshold attack, the identifiability
    audit's MI adversary on x̂ (threshold: the trial's mean training loss) and the ROC sweeps all
    count a loss equal to the threshold as "member", so a threshold at an observed loss includes it.
    """
    return np.asarray(losses) <= np.asarray(threshold)


@dataclass(frozen=True)
class LossThresholdAttack:
    """Outcome of thresholding losses: guess "member" when ``loss <= threshold`` (:func:`yeom_decision`)."""

    threshold: float
    tpr: float
    fpr: float

    @property
    def advantage(self) -> float:
        """Membership advantage TPR − FPR (Yeom et al. Def. 4)."""
        return self.tpr - self.fpr


def loss_threshold_attack(
    member_losses: np.ndarray, nonmember_losses: np.ndarray, threshold: float | None = None
) -> LossThresholdAttack:
    """Yeom et al.'s loss-threshold attack (Alg. 1); the default threshold is the average training loss.

    The threshold is fixed before the adversary sees any non-member, so its TPR and FPR are
    unbiased estimates for this model (unlike the best threshold picked on the same data).
    """
    members = _as_losses(member_losses, "member_losses")
    nonmembers = _as_losses(nonmember_losses, "nonmember_losses")
    tau = float(np.mean(members)) if threshold is None else float(threshold)
    return LossThresholdAttack(
        threshold=tau,
        tpr=float(np.mean(yeom_decision(members, tau))),
        fpr=float(np.mean(yeom_decision(nonmembers, tau))),
    )


def _roc(
    member_losses: np.ndarray, nonmember_losses: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    members = _as_losses(member_losses, "member_losses")
    nonmembers = _as_losses(nonmember_losses, "nonmember_losses")
    truth = np.concatenate([np.ones(members.size), np.zeros(nonmembers.size)])
    scores = -np.concatenate([members, nonmembers])
    fpr, tpr, thresholds = roc_curve(truth, scores, drop_intermediate=False)
    return fpr, tpr, -thresholds


def tpr_at_fpr(member_losses: np.ndarray, nonmember_losses: np.ndarray, fpr: float = 0.05) -> float:
    """Largest TPR of a loss threshold whose FPR on the non-members is at most ``fpr`` (Erlingsson §4).

    Read off the empirical ROC step curve without interpolation, so the reported point is one an
    adversary can actually achieve with a single threshold.
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    fprs, tprs, _ = _roc(member_losses, nonmember_losses)
    return float(np.max(tprs[fprs <= fpr + 1e-12]))


def best_threshold_advantage(member_losses: np.ndarray, nonmember_losses: np.ndarray) -> LossThresholdAttack:
    """The threshold maximising TPR − FPR on the very data it is scored on.

    This is the *naive* same-data maximum of Erlingsson §5.3: it is optimistic (biased upwards),
    so an ε derived from it is not a valid lower bound. Use the bounds library's split or
    Bonferroni selection for a valid one.
    """
    fprs, tprs, thresholds = _roc(member_losses, nonmember_losses)
    best = int(np.argmax(tprs - fprs))
    threshold = float(thresholds[best]) if np.isfinite(thresholds[best]) else float("-inf")
    return LossThresholdAttack(threshold=threshold, tpr=float(tprs[best]), fpr=float(fprs[best]))


def membership_scores(losses: np.ndarray) -> np.ndarray:
    """Scores for the bounds library (higher = more likely a member): the negated losses."""
    return -_as_losses(losses, "losses")
