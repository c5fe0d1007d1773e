"""LiRA fitted on chosen reference models: hand values, and the same models as RMIA."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from dpaudit.attacks.lira import augmentation_scale, lira_scores_with_references
from dpaudit.attacks.rmia import reference_models
from dpaudit.experiments.canaries.design import balanced_membership


def test_online_and_offline_scores_match_a_hand_computation() -> None:
    phi = np.array([[2.0, 1.0, -1.0, 0.0]])
    member = np.array([[True, True, False, False]])
    refs = np.array([[[1, 2], [0, 3], [0, 3], [1, 2]]])  # target 0: in-ref 1, out-ref 2
    # σ: the canary's confidences around their mean 0.5, ddof 1: (1.5² + 0.5² + 1.5² + 0.5²) / 3 = 5/3.
    assert augmentation_scale(phi)[0] ** 2 == pytest.approx(5.0 / 3.0)
    online = lira_scores_with_references(phi, member, refs, mode="online")
    # Target 0: φ = 2, μ_in = 1, μ_out = −1 → ((2 + 1)² − (2 − 1)²) / (2σ²) = 8 / (10/3) = 2.4.
    assert online[0, 0] == pytest.approx(2.4)
    # Target 2: φ = −1, μ_in = φ_0 = 2, μ_out = φ_3 = 0 → (1 − 9) / (10/3) = −2.4.
    assert online[0, 2] == pytest.approx(-2.4)
    offline = lira_scores_with_references(phi, member, refs[..., 1:], mode="offline")
    # φ − μ_out = 3, 1, −1, 1 (out-refs 2, 3, 3, 2), scored −log Pr(Z > φ) with σ² = 5/3.
    expected = -norm.logsf(np.array([3.0, 1.0, -1.0, 1.0]) / np.sqrt(5.0 / 3.0))
    assert offline[0].tolist() == pytest.approx(expected.tolist())


def test_augmentations_average_the_per_augmentation_scores() -> None:
    """With A augmentations each is scored on its own scale and the scores are averaged (as
    :func:`lira_scores` does), not the confidences: averaging φ − μ_out ranks decision 0 (two
    moderate deviations) above decision 1 (one large, one small), the mean per-augmentation
    one-sided score ranks them the other way."""
    member = np.zeros((3, 4), bool)
    phi = np.zeros((3, 4, 2))
    phi[0, 0] = [2.0, 2.0]
    phi[1, 0] = [3.6, 0.2]  # mean deviation 1.9 < 2
    phi[2] = [[5.0, 5.0], [-5.0, -5.0], [5.0, 5.0], [-5.0, -5.0]]  # sets the scale of both augmentations
    refs = np.tile(np.array([1, 2, 3, 0])[None, :, None], (3, 1, 1))  # out-reference: the next model
    score = lira_scores_with_references(phi, member, refs, mode="offline")
    sigma = augmentation_scale(phi)
    mu = phi[np.arange(3)[:, None], refs[..., 0]]  # [K, M, A]
    np.testing.assert_allclose(score, (-norm.logsf((phi - mu) / sigma)).mean(axis=-1))
    assert (phi[0, 0] - mu[0, 0]).mean() > (phi[1, 0] - mu[1, 0]).mean()  # the confidences' average
    assert score[1, 0] > score[0, 0]  # the scores' average

    rng = np.random.default_rng(3)
    member = balanced_membership(12, 8, rng)
    phi = rng.normal(size=(12, 8, 3)) * np.array([1.0, 2.0, 0.5]) + member[..., None]
    refs = reference_models(member, 2, "online")
    sigma = augmentation_scale(phi)
    rows = np.arange(12)[:, None]
    mu_in, mu_out = phi[rows, refs[..., 0]], phi[rows, refs[..., 1]]
    llr = ((phi - mu_out) ** 2 - (phi - mu_in) ** 2) / (2 * sigma**2)
    np.testing.assert_allclose(lira_scores_with_references(phi, member, refs, mode="online"), llr.mean(-1))


def test_offline_ranking_is_that_of_the_one_sided_gaussian_test() -> None:
    """With one shared σ, φ − μ_out orders decisions exactly like −log Pr(Z > φ)."""
    rng = np.random.default_rng(5)
    member = balanced_membership(30, 8, rng)
    phi = rng.normal(size=(30, 8)) + member
    refs = reference_models(member, 1, "offline")
    score = lira_scores_with_references(phi, member, refs, mode="offline")
    mu = phi[np.arange(30)[:, None], refs[..., 0]]
    sigma = 0.7
    np.testing.assert_array_equal(
        np.argsort(score, axis=None), np.argsort(-norm.logsf(phi, mu, sigma), axis=None)
    )


def test_more_reference_models_find_more_and_none_find_nothing() -> None:
    rng = np.random.default_rng(6)
    member = balanced_membership(300, 16, rng)
    offsets = rng.normal(0, 2, size=(300, 1))
    signal = rng.normal(size=(300, 16)) + offsets + 1.5 * member
    null = rng.normal(size=(300, 16)) + offsets
    auc = {}
    for mode, r in (("offline", 1), ("online", 4)):
        refs = reference_models(member, r, mode)
        auc[r] = roc_auc_score(
            member.ravel(), lira_scores_with_references(signal, member, refs, mode=mode).ravel()
        )
        none = roc_auc_score(
            member.ravel(), lira_scores_with_references(null, member, refs, mode=mode).ravel()
        )
        assert none == pytest.approx(0.5, abs=0.02)
    assert auc[4] > auc[1] > 0.75


def test_references_must_match_the_grid() -> None:
    with pytest.raises(ValueError, match="references must be"):
        lira_scores_with_references(np.zeros((2, 4)), np.zeros((2, 4), bool), np.zeros((2, 4)), mode="online")
