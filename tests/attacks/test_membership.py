"""Loss extraction and the loss-threshold membership attack (Yeom et al.; Erlingsson et al. §4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.attacks.membership import (
    best_threshold_advantage,
    cross_entropy_loss,
    loss_threshold_attack,
    losses_from_logits,
    membership_scores,
    tpr_at_fpr,
)
from dpaudit.bounds.epsilon_star import logit_loss


def test_losses_from_logits_match_hand_computation_binary() -> None:
    # softmax([2, 0]) = [e²/(e²+1), 1/(e²+1)]; true class 0: CE = log(1 + e^-2), logit loss = 0 - 2.
    # softmax([0, 1]) with true class 0: CE = log(1 + e), logit loss = 1 - 0.
    ce, logit = losses_from_logits(np.array([[2.0, 0.0], [0.0, 1.0]]), np.array([0, 0]))
    np.testing.assert_allclose(ce, [math.log1p(math.exp(-2.0)), math.log1p(math.e)], rtol=1e-12)
    np.testing.assert_allclose(logit, [-2.0, 1.0], rtol=1e-12)
    np.testing.assert_allclose(ce, [0.1269280110429725, 1.3132616875182228], rtol=1e-12)


def test_losses_from_logits_match_hand_computation_multiclass() -> None:
    # logits [1, 2, 3], true class 0: CE = log(e + e² + e³) − 1; logit loss = log(e² + e³) − 1.
    ce, logit = losses_from_logits(np.array([[1.0, 2.0, 3.0]]), np.array([0]))
    assert ce[0] == pytest.approx(math.log(math.e + math.e**2 + math.e**3) - 1.0, rel=1e-12)
    assert logit[0] == pytest.approx(math.log(math.e**2 + math.e**3) - 1.0, rel=1e-12)
    assert ce[0] == pytest.approx(2.4076059644443806, rel=1e-12)
    assert logit[0] == pytest.approx(2.3132616875182228, rel=1e-12)


def test_losses_from_logits_agree_with_probability_formulas_and_keep_trial_axis() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 50, 4)) * 2.0  # [T, N, C]
    labels = rng.integers(0, 4, size=50)
    ce, logit = losses_from_logits(logits, labels)
    assert ce.shape == logit.shape == (3, 50)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(ce, cross_entropy_loss(probs, labels), rtol=1e-9)
    for t in range(3):  # Negoescu footnote 1 as implemented by the bounds library, from probabilities
        np.testing.assert_allclose(logit[t], logit_loss(probs[t], labels), rtol=1e-7, atol=1e-9)


def test_logit_loss_stays_exact_where_float32_probabilities_saturate() -> None:
    # p_y = 1 − e^-40: float probabilities round to 1; the logit loss is exactly −40 from logits.
    ce, logit = losses_from_logits(np.array([[40.0, 0.0]]), np.array([0]))
    assert logit[0] == pytest.approx(-40.0, rel=1e-12)
    assert ce[0] == pytest.approx(math.exp(-40.0), rel=1e-9)


def test_cross_entropy_from_probabilities_hand_computed() -> None:
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [1.0, 0.0]])
    np.testing.assert_allclose(
        cross_entropy_loss(probs, np.array([0, 0, 1])), [-math.log(0.9), -math.log(0.2), -math.log(1e-12)]
    )
    with pytest.raises(ValueError, match="labels must lie in"):
        cross_entropy_loss(probs, np.array([0, 0, 2]))


def test_yeom_attack_uses_average_training_loss_as_threshold() -> None:
    attack = loss_threshold_attack(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.2, 0.5, 0.6, 0.7]))
    assert attack.threshold == pytest.approx(0.25)
    assert attack.tpr == pytest.approx(0.5)  # 0.1, 0.2 ≤ 0.25
    assert attack.fpr == pytest.approx(0.25)  # 0.2 ≤ 0.25
    assert attack.advantage == pytest.approx(0.25)


def test_tpr_at_fixed_fpr_reads_the_step_roc_curve() -> None:
    members = np.array([0.5, 0.9, 1.0, 1.5, 3.0])
    nonmembers = np.arange(1.0, 21.0)  # one non-member (loss 1.0) may fall below τ at FPR 5 %
    assert tpr_at_fpr(members, nonmembers, fpr=0.05) == pytest.approx(0.8)  # τ ∈ [1.5, 2)
    assert tpr_at_fpr(members, nonmembers, fpr=0.0) == pytest.approx(0.4)  # τ < 1: 0.5, 0.9
    # Ties cannot be split by a deterministic threshold: identical losses give TPR 0 at FPR 5 %.
    assert tpr_at_fpr(np.ones(10), np.ones(10), fpr=0.05) == 0.0


def test_best_threshold_advantage_is_the_same_data_maximum() -> None:
    separable = best_threshold_advantage(np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.6]))
    assert separable.advantage == pytest.approx(1.0)
    assert 0.3 <= separable.threshold < 0.5
    mixed = best_threshold_advantage(np.array([0.1, 0.4, 0.6, 0.9]), np.array([0.3, 0.7, 0.8, 1.0]))
    assert mixed.advantage == pytest.approx(0.5)  # τ = 0.6: TPR 3/4, FPR 1/4
    np.testing.assert_array_equal(membership_scores(np.array([1.0, -2.0])), [-1.0, 2.0])


def test_attack_rejects_empty_or_nan_losses() -> None:
    with pytest.raises(ValueError, match="member_losses is empty"):
        loss_threshold_attack(np.array([]), np.array([1.0]))
    with pytest.raises(ValueError, match="NaN"):
        tpr_at_fpr(np.array([np.nan]), np.array([1.0]))
