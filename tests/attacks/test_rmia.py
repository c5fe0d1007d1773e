"""RMIA (Zarifzadeh et al. 2024) on a canaries × models grid: hand cases, references, null, signal."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from dpaudit.attacks import rmia
from dpaudit.attacks.rmia import reference_models, rmia_scores

# Tiny grid: one canary, four models; in-models {0, 2}, out-models {1, 3}.
MEMBER = np.array([[True, False, True, False]])
PX = np.array([[0.8, 0.4, 0.6, 0.2]])
PZ = np.array(
    [
        [0.5, 0.9, 0.1],
        [0.5, 0.3, 0.2],
        [0.4, 0.6, 0.3],
        [0.2, 0.6, 0.5],
    ]
)


def balanced_membership(num_canaries: int, num_models: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = np.arange(num_models) < num_models // 2
    return np.stack([rng.permutation(base) for _ in range(num_canaries)])


def loop_references(membership: np.ndarray, references: int, mode: str) -> np.ndarray:
    """Reference choice written out with loops, as the spec states it."""
    K, M = membership.shape
    out = np.empty((K, M, references), dtype=np.int64)
    for k in range(K):
        for m in range(M):
            after = [(m + j) % M for j in range(1, M)]
            ins = [i for i in after if membership[k, i]]
            outs = [i for i in after if not membership[k, i]]
            out[k, m] = (
                outs[:references] if mode == "offline" else ins[: references // 2] + outs[: references // 2]
            )
    return out


def loop_scores(px, pz, membership, references, mode, a, gamma) -> np.ndarray:
    refs = loop_references(membership, references, mode)
    K, M = membership.shape
    scores = np.empty((K, M))
    for k in range(K):
        for m in range(M):
            ref_x = float(np.mean(px[k, refs[k, m]]))
            ref_z = pz[refs[k, m]].mean(axis=0)
            if mode == "offline":
                ref_x = 0.5 * ((1 + a) * ref_x + (1 - a))
                ref_z = 0.5 * ((1 + a) * ref_z + (1 - a))
            lr_x = px[k, m] / ref_x
            lr_z = pz[m] / ref_z
            scores[k, m] = np.mean(lr_x / lr_z >= gamma)
    return scores


# ---------------------------------------------------------------------------------------------
# Hand-computed cases
# ---------------------------------------------------------------------------------------------


def test_online_hand_case():
    # Target 0, references (2, 1): Pr(x) = (0.6 + 0.4)/2 = 0.5, LR(x) = 1.6;
    # Pr(z) = [0.45, 0.45, 0.25], LR(z) = [1.111, 2, 0.4], LR(x)/LR(z) = [1.44, 0.8, 4] -> 2/3.
    # Target 3, references (0, 1): LR(x) = 0.2/0.6; LR(z) = [0.4, 1, 3.33] -> ratios all < 1 -> 0.
    scores = rmia_scores(PX, PZ, MEMBER, references=2, mode="online")
    np.testing.assert_allclose(scores, [[2 / 3, 2 / 3, 1.0, 0.0]], rtol=0, atol=1e-15)
    # γ = 1.3: target 0 keeps [1.44, 4]; target 2's ratios [1.05, 1.5, 1.2] keep only 1.5.
    scores = rmia_scores(PX, PZ, MEMBER, references=2, mode="online", gamma=1.3)
    np.testing.assert_allclose(scores, [[2 / 3, 2 / 3, 1 / 3, 0.0]], rtol=0, atol=1e-15)


def test_offline_hand_case():
    # a = 0.3: p -> 0.65 p + 0.35. Target 3, reference 1: Pr(x) = 0.61, LR(x) = 0.2/0.61 = 0.328;
    # Pr(z) = [0.675, 0.545, 0.48], LR(z) = [0.296, 1.101, 1.042] -> ratios [1.107, 0.298, 0.315] -> 1/3.
    # Target 0, reference 1: LR(x) = 0.8/0.61; LR(z) = [0.741, 1.651, 0.208] -> [1.77, 0.79, 6.30] -> 2/3.
    scores = rmia_scores(PX, PZ, MEMBER, references=1, mode="offline")
    np.testing.assert_allclose(scores, [[2 / 3, 2 / 3, 1.0, 1 / 3]], rtol=0, atol=1e-15)
    # a = 1 uses the out-mean itself: target 3 / ref 1 gives LR(x) = 0.5, LR(z) = [0.4, 2, 2.5] -> 1/3;
    # target 1 / ref 3 gives LR(x) = 2, LR(z) = [2.5, 0.5, 0.4] -> 2/3.
    scores = rmia_scores(PX, PZ, MEMBER, references=1, mode="offline", a=1.0)
    np.testing.assert_allclose(scores[0, [1, 3]], [2 / 3, 1 / 3], rtol=0, atol=1e-15)


def test_exact_tie_counts_as_at_least_gamma():
    # A population record with the canary's own probabilities in every model has LR(z) = LR(x).
    pz = np.concatenate([PZ, PX.T], axis=1)
    scores = rmia_scores(PX, pz, MEMBER, references=2, mode="online")
    np.testing.assert_allclose(scores, [[3 / 4, 3 / 4, 1.0, 1 / 4]], rtol=0, atol=1e-15)


@pytest.mark.parametrize("chunk_elements", [1, 1 << 22])
def test_matches_loop_reference_on_random_design(monkeypatch, chunk_elements):
    monkeypatch.setattr(rmia, "_CHUNK_ELEMENTS", chunk_elements)  # 1: one canary per chunk
    rng = np.random.default_rng(7)
    K, M, Z = 12, 9, 25
    membership = rng.random((K, M)) < 0.5
    membership[:, :3] = True  # at least 3 in and 3 out per canary
    membership[:, 3:6] = False
    px, pz = rng.random((K, M)), rng.random((M, Z))
    for mode, r in (("offline", 1), ("offline", 2), ("online", 2), ("online", 4)):
        got = rmia_scores(px, pz, membership, references=r, mode=mode, a=0.4, gamma=1.2)
        np.testing.assert_array_equal(got, loop_scores(px, pz, membership, r, mode, 0.4, 1.2))


# ---------------------------------------------------------------------------------------------
# Reference selection
# ---------------------------------------------------------------------------------------------


def test_reference_models_tiny_case_is_cyclic():
    assert reference_models(MEMBER, 1, "offline")[0].tolist() == [[1], [3], [3], [1]]
    assert reference_models(MEMBER, 2, "online")[0].tolist() == [[2, 1], [2, 3], [0, 3], [0, 1]]


def test_reference_models_sides_order_and_target_excluded():
    membership = balanced_membership(30, 10, seed=4)
    for mode, r in (("offline", 3), ("online", 4)):
        refs = reference_models(membership, r, mode)
        assert refs.shape == (30, 10, r) and refs.dtype == np.int64
        assert not np.any(refs == np.arange(10)[None, :, None])
        side = membership[np.arange(30)[:, None, None], refs]
        if mode == "offline":
            assert not side.any()
        else:
            assert side[..., : r // 2].all() and not side[..., r // 2 :].any()
        np.testing.assert_array_equal(refs, loop_references(membership, r, mode))


def test_short_side_raises_naming_canary():
    membership = balanced_membership(3, 6, seed=1)
    membership[1] = [True, False, False, False, False, False]  # one in-model only
    with pytest.raises(ValueError, match=r"canary 1 has 1 in-models among the 6, which leaves 0"):
        reference_models(membership, 2, "online")
    membership = balanced_membership(3, 4, seed=1)  # two out-models per canary
    with pytest.raises(
        ValueError, match=r"needs 2 out-models.*canary 0 has 2 out-models among the 4, which leaves 1"
    ):
        reference_models(membership, 2, "offline")
    with pytest.raises(ValueError, match="even"):
        reference_models(MEMBER, 3, "online")
    with pytest.raises(ValueError, match="references must be an int >= 1, got 0"):
        reference_models(MEMBER, 0, "offline")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"prob_x": PX * 2}, "prob_x must lie in"),
        ({"prob_x": np.full_like(PX, np.nan)}, "prob_x contains NaN"),
        ({"prob_z": PZ[:3]}, r"prob_z must be \[M, Z\] with M = 4"),
        ({"prob_z": -PZ}, "prob_z must lie in"),
        ({"membership": MEMBER.astype(int)}, "boolean"),
        ({"prob_x": PX[:, :3]}, r"prob_x has \(K, M\)"),
        ({"a": 1.5}, "a must lie in"),
        ({"gamma": 0.0}, "gamma must be finite and > 0"),
        ({"mode": "both"}, "mode must be"),
    ],
)
def test_input_validation(kwargs, message):
    args = {"prob_x": PX, "prob_z": PZ, "membership": MEMBER, "references": 1, "mode": "offline"} | kwargs
    with pytest.raises(ValueError, match=message):
        rmia_scores(**args)


# ---------------------------------------------------------------------------------------------
# Shapes, augmentations, null and signal
# ---------------------------------------------------------------------------------------------


def test_shape_range_and_augmentation_average():
    rng = np.random.default_rng(11)
    K, M, Z = 20, 8, 40
    membership = balanced_membership(K, M, seed=2)
    px, pz = rng.random((K, M)), rng.random((M, Z))
    base = rmia_scores(px, pz, membership, references=2, mode="online")
    assert base.shape == (K, M) and base.dtype == np.float64
    assert base.min() >= 0.0 and base.max() <= 1.0
    np.testing.assert_array_equal(
        rmia_scores(px[..., None], pz, membership, references=2, mode="online"), base
    )
    delta = 0.5 * np.minimum(px, 1 - px)
    two = np.stack([px - delta, px + delta], axis=-1)  # mean over A is px
    np.testing.assert_allclose(
        rmia_scores(two, pz, membership, references=2, mode="online"), base, rtol=0, atol=1e-12
    )


def test_null_auroc_is_half():
    rng = np.random.default_rng(0)
    K, M, Z = 400, 16, 200
    membership = balanced_membership(K, M, seed=100)
    px, pz = rng.beta(2, 2, (K, M)), rng.beta(2, 2, (M, Z))
    for mode, r in (("offline", 1), ("online", 4)):
        scores = rmia_scores(px, pz, membership, references=r, mode=mode)
        assert abs(roc_auc_score(membership.ravel(), scores.ravel()) - 0.5) < 0.02


def test_signal_auroc_and_online_beats_offline():
    rng = np.random.default_rng(1)
    K, M, Z = 400, 16, 200
    membership = balanced_membership(K, M, seed=101)
    difficulty, shift = rng.normal(1.0, 1.5, K), rng.uniform(0.5, 2.0, K)
    logits = difficulty[:, None] + shift[:, None] * membership + rng.normal(0, 0.5, (K, M))
    px = 1 / (1 + np.exp(-logits))
    pz = 1 / (1 + np.exp(-(rng.normal(1.0, 1.5, Z)[None, :] + rng.normal(0, 0.5, (M, Z)))))
    auc_off = roc_auc_score(membership.ravel(), rmia_scores(px, pz, membership, references=1).ravel())
    auc_on = roc_auc_score(
        membership.ravel(), rmia_scores(px, pz, membership, references=4, mode="online").ravel()
    )
    assert auc_off > 0.75 and auc_on > 0.75
    assert auc_on >= auc_off + 0.02


def test_refined_ties_keep_the_count_order_and_split_saturated_scores() -> None:
    rng = np.random.default_rng(21)
    member = np.zeros((300, 8), bool)
    member[:, :4] = True
    for row in member:
        rng.shuffle(row)
    prob_x = np.clip(rng.uniform(0.2, 0.6, (300, 8)) + 0.35 * member, 0, 1)
    prob_z = rng.uniform(0.2, 0.6, (8, 5))  # Z = 5: the count saturates
    plain = rmia_scores(prob_x, prob_z, member, references=1)
    refined = rmia_scores(prob_x, prob_z, member, references=1, refine_ties=True)
    assert np.all(np.floor(refined * 5 + 1e-9) == np.round(plain * 5))  # same count
    top = plain == 1.0
    assert top.sum() > 20 and np.unique(refined[top]).size == top.sum()  # the tie is split
    assert np.all((refined[top] > 1.0) & (refined[top] < 1.2))
