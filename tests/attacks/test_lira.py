"""LiRA (Carlini et al. 2022) on a canaries × models grid: confidences, exact fits, leave-one-out, ROC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax
from scipy.stats import binomtest, norm

from dpaudit.attacks.lira import leave_one_out_fits, lira_scores
from dpaudit.training.outputs import hinge_confidence, logit_scaled_confidence


def balanced_membership(num_canaries: int, num_models: int, seed: int) -> np.ndarray:
    """Each canary in exactly half of the models, on a seeded random mask (the spec's design)."""
    rng = np.random.default_rng(seed)
    base = np.arange(num_models) < num_models // 2
    return np.stack([rng.permutation(base) for _ in range(num_canaries)])


def tpr_at_fpr(scores: np.ndarray, membership: np.ndarray, fpr: float) -> tuple[float, int, int]:
    """TPR at the threshold whose FPR on the out-decisions is at most ``fpr``; also (hits, n_in)."""
    out = np.sort(scores[~membership])[::-1]
    allowed = int(np.floor(fpr * out.size))
    threshold = out[allowed]  # strictly above it: at most `allowed` out-decisions
    hits = int(np.sum(scores[membership] > threshold))
    return hits / int(membership.sum()), hits, int(membership.sum())


# ---------------------------------------------------------------------------------------------
# Confidences
# ---------------------------------------------------------------------------------------------


def test_logit_scaled_confidence_is_log_odds_of_softmax_and_stable():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3, 5))
    labels = rng.integers(0, 5, size=(4, 3))
    p = np.take_along_axis(softmax(logits, axis=-1), labels[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(logit_scaled_confidence(logits, labels), np.log(p / (1 - p)), rtol=1e-10)
    # p_y rounds to 1.0 in float64 here; the logit form stays finite and exact.
    extreme = np.array([[60.0, 0.0, -3.0]])
    expected = 60.0 - np.log(1.0 + np.exp(-3.0))
    np.testing.assert_allclose(logit_scaled_confidence(extreme, np.array([0])), [expected], rtol=1e-12)
    # labels broadcast: one label per canary against [K, M, C] logits
    per_canary = logit_scaled_confidence(logits, labels[:, :1])
    np.testing.assert_allclose(per_canary[:, 1], logit_scaled_confidence(logits[:, 1], labels[:, 0]))


def test_hinge_confidence():
    logits = np.array([[2.0, 5.0, 1.0], [0.5, -1.0, 3.0]])
    np.testing.assert_allclose(hinge_confidence(logits, np.array([1, 0])), [3.0, -2.5])


def test_confidence_rejects_bad_labels():
    with pytest.raises(ValueError, match="0..2"):
        logit_scaled_confidence(np.zeros((2, 3)), np.array([0, 3]))
    with pytest.raises(ValueError, match="integers"):
        hinge_confidence(np.zeros((2, 3)), np.array([0.0, 1.0]))


# ---------------------------------------------------------------------------------------------
# Hand computation (acceptance 4 of issue 14)
# ---------------------------------------------------------------------------------------------

PHI = np.array([[2.0, 1.5, 3.1, -0.4, 0.2, 0.9, 2.6]])  # K = 1 canary, M = 7 models
MEMBER = np.array([[True, True, True, False, False, False, True]])


def test_online_scores_match_a_hand_computation():
    scores = lira_scores(PHI, MEMBER, mode="online")
    expected = []
    for m in range(PHI.shape[1]):
        shadows = np.arange(PHI.shape[1]) != m
        ins = PHI[0, shadows & MEMBER[0]]
        outs = PHI[0, shadows & ~MEMBER[0]]
        mu_in, sd_in = ins.mean(), ins.std(ddof=1)
        mu_out, sd_out = outs.mean(), outs.std(ddof=1)
        x = PHI[0, m]
        log_in = -0.5 * ((x - mu_in) / sd_in) ** 2 - np.log(sd_in * np.sqrt(2 * np.pi))
        log_out = -0.5 * ((x - mu_out) / sd_out) ** 2 - np.log(sd_out * np.sqrt(2 * np.pi))
        expected.append(log_in - log_out)
    np.testing.assert_allclose(scores[0], expected, rtol=1e-10)
    # target 0 (in): in-shadows {1.5, 3.1, 2.6}, out-shadows {-0.4, 0.2, 0.9}, by hand
    mu_in, var_in = 7.2 / 3, ((1.5 - 2.4) ** 2 + (3.1 - 2.4) ** 2 + (2.6 - 2.4) ** 2) / 2
    mu_out, var_out = 0.7 / 3, sum((v - 0.7 / 3) ** 2 for v in (-0.4, 0.2, 0.9)) / 2
    by_hand = (
        -((2.0 - mu_in) ** 2) / (2 * var_in)
        + ((2.0 - mu_out) ** 2) / (2 * var_out)
        - 0.5 * np.log(var_in / var_out)
    )
    assert scores[0, 0] == pytest.approx(by_hand, rel=1e-10)


def test_offline_scores_are_one_sided_out_tests():
    scores = lira_scores(PHI, MEMBER, mode="offline")
    for m in range(PHI.shape[1]):
        outs = PHI[0, (np.arange(PHI.shape[1]) != m) & ~MEMBER[0]]
        z = (PHI[0, m] - outs.mean()) / outs.std(ddof=1)
        assert scores[0, m] == pytest.approx(-np.log(norm.sf(z)), rel=1e-10)
    # monotone in φ for a fixed fit: the two in-targets with the same out-fit rank by confidence
    assert scores[0, 2] > scores[0, 0] > scores[0, 1]


def test_global_variance_pools_within_canary_sums_of_squares():
    rng = np.random.default_rng(3)
    phi = rng.normal(size=(2, 8)) + np.array([[0.0], [5.0]])
    member = balanced_membership(2, 8, seed=1)
    fits = leave_one_out_fits(phi, member, variance="global")
    k, m = 1, 3
    shadows = np.arange(8) != m
    for side, std in ((member, fits.std_in), (~member, fits.std_out)):
        ss, dof = 0.0, 0
        for j in range(2):
            keep = side[j] & (shadows if j == k else True)
            values = phi[j, keep]
            ss += np.sum((values - values.mean()) ** 2)
            dof += values.size - 1
        assert std[k, m, 0] == pytest.approx(np.sqrt(ss / dof), rel=1e-10)


def test_augmentations_average_per_augmentation_scores():
    rng = np.random.default_rng(4)
    phi = rng.normal(size=(3, 8, 2))
    member = balanced_membership(3, 8, seed=2)
    both = lira_scores(phi, member)
    separate = [lira_scores(phi[..., a], member) for a in range(2)]
    np.testing.assert_allclose(both, (separate[0] + separate[1]) / 2, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Leave-one-out excludes the target
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variance", ["per_sample", "global"])
def test_leave_one_out_excludes_the_target(variance):
    rng = np.random.default_rng(5)
    phi = rng.normal(size=(6, 10))
    member = balanced_membership(6, 10, seed=3)
    k, m = 2, 4
    changed = phi.copy()
    changed[k, m] += 7.0
    before = leave_one_out_fits(phi, member, variance=variance)
    after = leave_one_out_fits(changed, member, variance=variance)
    for name in ("mu_in", "std_in", "mu_out", "std_out"):
        np.testing.assert_allclose(getattr(after, name)[k, m], getattr(before, name)[k, m], rtol=1e-12)
    # ... but the other targets of that canary do use it as a shadow
    side = "mu_in" if member[k, m] else "mu_out"
    others = (np.arange(10) != m) & (member[k] == member[k, m])
    assert np.all(np.abs(getattr(after, side)[k, others] - getattr(before, side)[k, others]) > 0.5)
    # so the target's new score is its old fit evaluated at the new φ
    fit = before
    x = changed[k, m]
    expected = norm.logpdf(x, fit.mu_in[k, m, 0], fit.std_in[k, m, 0]) - norm.logpdf(
        x, fit.mu_out[k, m, 0], fit.std_out[k, m, 0]
    )
    assert lira_scores(changed, member, variance=variance)[k, m] == pytest.approx(expected, rel=1e-12)


def test_leave_one_out_matches_refitting_on_a_grid():
    rng = np.random.default_rng(6)
    phi = rng.normal(size=(5, 9)) * rng.uniform(0.5, 2.0, size=(5, 1))
    member = balanced_membership(5, 9, seed=4)
    fits = leave_one_out_fits(phi, member)
    for k in range(5):
        for m in range(9):
            shadows = np.arange(9) != m
            ins, outs = phi[k, shadows & member[k]], phi[k, shadows & ~member[k]]
            assert fits.mu_in[k, m, 0] == pytest.approx(ins.mean(), rel=1e-12)
            assert fits.std_out[k, m, 0] == pytest.approx(outs.std(ddof=1), rel=1e-12)


def test_too_few_shadows_is_a_clear_error():
    member = np.array([[True, True, False, False, False, False]])
    with pytest.raises(ValueError, match=r"canary 0 is in in 2 of the models, which leaves 1 in-shadows"):
        lira_scores(np.zeros((1, 6)), member)
    # offline needs the out side only
    assert lira_scores(np.arange(6.0)[None], member, mode="offline").shape == (1, 6)
    with pytest.raises(ValueError, match="boolean"):
        lira_scores(np.zeros((1, 6)), member.astype(int))
    with pytest.raises(ValueError, match="mode"):
        lira_scores(np.zeros((1, 6)), member, mode="both")


def test_identical_shadows_give_finite_scores():
    member = balanced_membership(1, 8, seed=0)
    scores = lira_scores(np.ones((1, 8)), member)
    assert np.all(np.isfinite(scores))


# ---------------------------------------------------------------------------------------------
# ROC behaviour (acceptance 4 of issue 14)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["online", "offline"])
@pytest.mark.parametrize("variance", ["per_sample", "global"])
def test_no_signal_gives_tpr_equal_to_fpr(mode, variance):
    K, M = 200, 64
    rng = np.random.default_rng(7)
    # canaries differ in difficulty (their own mean and spread), members and non-members do not
    phi = rng.normal(rng.normal(0, 2, size=(K, 1)), rng.uniform(0.5, 2, size=(K, 1)), size=(K, M))
    member = balanced_membership(K, M, seed=8)
    scores = lira_scores(phi, member, mode=mode, variance=variance)
    for fpr in (0.01, 0.05):
        tpr, hits, n_in = tpr_at_fpr(scores, member, fpr)
        interval = binomtest(hits, n_in, fpr).proportion_ci(confidence_level=0.999)
        assert interval.low <= fpr <= interval.high, (fpr, tpr)


@pytest.mark.parametrize("mode", ["online", "offline"])
@pytest.mark.parametrize("variance", ["per_sample", "global"])
def test_strong_signal_gives_high_tpr_at_low_fpr(mode, variance):
    K, M = 200, 64
    rng = np.random.default_rng(9)
    difficulty = rng.normal(0, 3, size=(K, 1))
    member = balanced_membership(K, M, seed=10)
    phi = difficulty + 4.0 * member + rng.normal(size=(K, M))
    # the oracle with known fits reaches Φ(4 − Φ⁻¹(0.999)) ≈ 0.82; 31 shadows per side cost a little
    tpr, _, _ = tpr_at_fpr(lira_scores(phi, member, mode=mode, variance=variance), member, 0.001)
    assert tpr > 0.5
    # a single global threshold on φ cannot undo the per-canary difficulty: LiRA beats it
    tpr_global, _, _ = tpr_at_fpr(phi, member, 0.001)
    assert tpr > 5 * tpr_global
