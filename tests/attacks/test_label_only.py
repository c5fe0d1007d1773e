"""The label-only attack is unbiased with no membership signal and finds a real one."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from dpaudit.attacks.label_only import equal_count_hits, label_only_scores
from dpaudit.experiments.canaries.design import balanced_membership


@pytest.mark.parametrize("hit_rate", [0.9, 0.99, 0.999])
def test_null_auroc_is_one_half_at_every_hit_rate(hit_rate: float) -> None:
    """Hits independent of membership: AUROC 0.50 ± 0.02 (the unequal-count rule gave 0.48 / 0.44 / 0.23)."""
    rng = np.random.default_rng(11)
    k, m, a = 400, 64, 5
    member = balanced_membership(k, m, rng)
    # Per-canary rates around the hit rate, so canaries differ as real ones do.
    logit = np.log(hit_rate / (1 - hit_rate)) + rng.normal(0.0, 0.5, size=(k, 1, 1))
    hits = rng.random((k, m, a)) < 1.0 / (1.0 + np.exp(-logit))
    scores = label_only_scores(hits, member)
    assert roc_auc_score(member.ravel(), scores.ravel()) == pytest.approx(0.5, abs=0.02)


def test_real_signal_is_found() -> None:
    rng = np.random.default_rng(12)
    member = balanced_membership(200, 32, rng)
    hits = rng.random((200, 32, 1)) < np.where(member[..., None], 0.95, 0.6)
    scores = label_only_scores(hits, member)
    # One Bernoulli decision: the best test's AUROC is 0.95·0.4 + ½(0.95·0.6 + 0.05·0.4) = 0.675.
    assert roc_auc_score(member.ravel(), scores.ravel()) == pytest.approx(0.675, abs=0.02)


def test_both_sides_use_equally_many_shadows_and_never_the_target() -> None:
    member = np.array([[True, True, True, True, False, False, False]])
    hits = np.zeros((1, 7, 1))
    hits[0, 3] = 1  # only model 3 hits
    in_hits, out_hits, n = equal_count_hits(hits, member)
    # In-side has 4 models, out-side 3: targets in the in-side leave 3/3, targets out leave 4/2 → 2.
    assert n[0].tolist() == [3, 3, 3, 3, 2, 2, 2]
    assert in_hits[0, 3, 0] == 0  # target 3's own hit never counts
    assert in_hits[0, 1, 0] == 1  # target 1: its three in-shadows are 2, 3, 0
    assert in_hits[0, 4, 0] == 0  # target 4: its two in-shadows are 0, 1 (cyclically after 4)
    assert in_hits[0, 2, 0] == 1  # target 2: 3, 0, 1
    assert out_hits.sum() == 0


def test_a_canary_without_shadows_on_a_side_is_refused() -> None:
    with pytest.raises(ValueError, match="canary 0 is in 1 and out of 3"):
        label_only_scores(np.ones((1, 4)), np.array([[True, False, False, False]]))
