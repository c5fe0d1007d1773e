"""The label-only likelihood-ratio attack on a canaries × models grid, with equal in/out counts.

A release of the top-1 label only shows, for each query a of canary k on model m, whether the model
answers the canary's assigned label: a hit ``b_kma ∈ {0, 1}``. The attack is LiRA's test (Carlini
et al. 2022, arXiv 2112.03570, Algorithm 1) with a Bernoulli model in place of the Gaussian: for
target m, the hit rates p_in and p_out are estimated on shadow models that did / did not train on
canary k, and the score is ``mean_a [log Pr(b_kma | p_in) − log Pr(b_kma | p_out)]``; higher means
"member".

**Equal counts.** Leave-one-out shadows are unequal in number: a member target leaves M_in − 1
in-shadows and M_out out-shadows, a non-member the reverse. With smoothed rates
``(hits + ½)/(n + 1)`` the shrinkage then differs between the sides, and it differs in opposite
directions for members and non-members: with no membership signal at all a hit scored
log((n−½)/n) − log((n+½)/(n+1)) < 0 for every member and > 0 for every non-member, an AUROC of
0.23 at a hit rate of 0.999 with M = 64. Here each side uses the same number
``n = min(in-shadows, out-shadows)`` of shadows, the first n of that side after the target in
cyclic model order (m + 1, m + 2, …). The choice depends on the design only, never on the hits, so
with no signal the member and non-member scores have the same distribution (the decision's data
are exchangeable) and the AUROC is ½ in expectation, whatever the hit rate.

Why hand-written: no maintained library ships a label-only likelihood-ratio test over a shadow-model
grid (TensorFlow Privacy's membership-inference module thresholds scores; the label-only attacks
of Choquette-Choo et al. 2021 are research code).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SMOOTHING", "equal_count_hits", "label_only_scores"]

#: Additive smoothing of the Bernoulli rates (Jeffreys prior: +1/2 success, +1/2 failure).
SMOOTHING = 0.5


def _cyclic_window_sums(
    values: np.ndarray, models: np.ndarray, target: np.ndarray, n: np.ndarray
) -> np.ndarray:
    """For each target m: the sum of ``values`` over the first ``n[m]`` of ``models`` after m in cyclic
    order (``values``: ``[S, A]`` for the sorted side ``models`` ``[S]``; result ``[M, A]``)."""
    size = len(models)
    start = np.searchsorted(models, target, side="right") % max(size, 1)  # first side model after m
    doubled = np.concatenate([values, values], axis=0)
    prefix = np.concatenate([np.zeros((1, values.shape[1])), np.cumsum(doubled, axis=0)], axis=0)
    return prefix[start + n] - prefix[start]


def equal_count_hits(hits: np.ndarray, membership: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hit totals on each side for every (canary k, target m, query a), over n shadows per side.

    Returns ``(in_hits, out_hits, n)``: ``[K, M, A]``, ``[K, M, A]`` and ``[K, M]``, where n is the
    smaller of the two leave-one-out side sizes and each side's n shadows are its first after m in
    cyclic model order. Raises ``ValueError`` when a canary leaves some target no shadow on a side.
    """
    b = np.asarray(hits, dtype=np.float64)
    if b.ndim == 2:
        b = b[..., None]
    member = np.asarray(membership)
    if member.dtype != np.bool_:
        raise ValueError(f"membership must be a boolean [K, M] array, got dtype {member.dtype}")
    if b.ndim != 3 or member.shape != b.shape[:2]:
        raise ValueError(
            f"hits must be [K, M] or [K, M, A] matching membership {member.shape}, got {b.shape}"
        )
    if not np.all((b == 0) | (b == 1)):
        raise ValueError("hits must be 0 or 1 (whether the target answers the canary's label)")
    K, M, A = b.shape
    targets = np.arange(M)
    in_hits = np.zeros((K, M, A))
    out_hits = np.zeros((K, M, A))
    counts = np.zeros((K, M), dtype=np.int64)
    for k in range(K):
        ins, outs = np.flatnonzero(member[k]), np.flatnonzero(~member[k])
        n = np.minimum(len(ins) - member[k], len(outs) - ~member[k]).astype(np.int64)
        if n.min() < 1:
            raise ValueError(
                f"the label-only attack needs >= 1 shadow on each side for every target; canary {k} is in "
                f"{len(ins)} and out of {len(outs)} of the {M} models"
            )
        in_hits[k] = _cyclic_window_sums(b[k, ins], ins, targets, n)
        out_hits[k] = _cyclic_window_sums(b[k, outs], outs, targets, n)
        counts[k] = n
    return in_hits, out_hits, counts


def label_only_scores(hits: np.ndarray, membership: np.ndarray, smoothing: float = SMOOTHING) -> np.ndarray:
    """Label-only LiRA scores ``[K, M]`` from ``hits[k, m, a]`` = 1 if query a of canary k gets its label.

    Rates ``p = (side hits + smoothing)/(n + 2·smoothing)`` over n shadows per side
    (:func:`equal_count_hits`); the score is ``mean_a log Pr(b | p_in) − log Pr(b | p_out)``.
    """
    if not smoothing > 0:
        raise ValueError(f"smoothing must be > 0 (rates of 0 or 1 give infinite scores), got {smoothing}")
    b = np.asarray(hits, dtype=np.float64)
    if b.ndim == 2:
        b = b[..., None]
    in_hits, out_hits, n = equal_count_hits(b, membership)
    n = n[..., None].astype(np.float64)
    p_in = (in_hits + smoothing) / (n + 2.0 * smoothing)
    p_out = (out_hits + smoothing) / (n + 2.0 * smoothing)
    llr = b * (np.log(p_in) - np.log(p_out)) + (1.0 - b) * (np.log1p(-p_in) - np.log1p(-p_out))
    return llr.mean(axis=-1)
