"""RMIA, the relative membership-inference attack, on a canaries × models grid.

Zarifzadeh, Liu, Mitra and Shokri (2024), "Low-Cost High-Power Membership Inference Attacks"
(ICML 2024, arXiv 2312.03262), §3, run on the same leave-one-out grid as :mod:`dpaudit.attacks.lira`.

Protocol. K canaries, M models; ``membership[k, m]`` says whether canary k was in model m's
training set. Each model m in turn is the *target*; the other models are candidate *reference*
models. ``prob_x[k, m]`` (or ``[K, M, A]`` over A query augmentations, averaged over A) is model m's
probability Pr(x_k | θ_m) of canary k's assigned label, and ``prob_z[m, j]`` is model m's probability
Pr(z_j | θ_m) of the true label of population record z_j (a test-split record no model trained on).

Score. For decision (k, m) with reference set R_km (below):

- reference averages Pr(x_k) = mean_{θ′∈R_km} Pr(x_k | θ′) and Pr(z_j) = mean_{θ′∈R_km} Pr(z_j | θ′);
- likelihood ratios LR(x_k) = Pr(x_k | θ_m) / Pr(x_k) and LR(z_j) = Pr(z_j | θ_m) / Pr(z_j);
- ``Score(k, m) = (1/Z) · #{j : LR(x_k) / LR(z_j) ≥ γ}``, in [0, 1], higher = member.

The score moves in steps of 1/Z, so in- and out-decisions can tie; ties are left as they are
(dpaudit's bounds code handles them). Probabilities and averages are floored at
:data:`PROB_FLOOR` so a zero never divides.

Reference models (deterministic, and blind to the probabilities). "After m" means cyclic model
order m+1, m+2, …, M−1, 0, …, m−1; the target itself is never a reference.

- ``mode="offline"``: the first r models after m that did *not* train on canary k. Only out-models
  are available offline, so the in-side is approximated linearly: with Pr_OUT the mean over those r
  models, Pr(x) = ½((1 + a)·Pr_OUT(x) + (1 − a)), i.e. Pr_IN ≈ a·Pr_OUT + (1 − a) averaged with
  Pr_OUT. The same map is applied to every population record z (they are out of every model too).
- ``mode="online"``: r even; the first r/2 models after m that trained on canary k and the first
  r/2 after m that did not. Pr(x) and Pr(z) are plain means over those r models.

:func:`reference_models` returns the chosen indices ``[K, M, r]`` (online: in-models first, then
out-models), so a LiRA run can be restricted to exactly the same models.

Defaults. ``a = 0.3`` is the default ``offline_a`` of the RMIA module in ML Privacy Meter, the
authors' maintained library (``modules/mia/attacks/rmia.py``), which can also tune a per target on
a paired model; the per-experiment configurations released with the paper (CIFAR-10, under
``research/2023_rmia``) set a = 0.33. ``γ = 1`` is the threshold that module compares the pairwise
ratio against (it counts strictly greater; here ≥ γ as in the score's definition, which differs
only on exact ties); those paper configurations set γ = 2. The paper's own text could not be
consulted here, so neither value is confirmed from it: treat both as tunable.

Why hand-written: no maintained library ships RMIA as a function over a precomputed probability
grid; ML Privacy Meter's implementation is tied to its own training and signal pipeline and to
its own choice of reference models. This module is pure numpy.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.special import expit

Mode = Literal["online", "offline"]

#: Floor on probabilities and reference averages before any division.
PROB_FLOOR = 1e-30

#: Default offline in-side slope ``a`` (ML Privacy Meter's default; see the module docstring).
DEFAULT_OFFLINE_A = 0.3

#: Default threshold ``γ`` on LR(x) / LR(z) (see the module docstring).
DEFAULT_GAMMA = 1.0

#: Upper bound on elements of the gathered ``[chunk, M, r, 1 + Z]`` array per canary chunk.
_CHUNK_ELEMENTS = 1 << 22


def _check_membership(membership: np.ndarray) -> np.ndarray:
    member = np.asarray(membership)
    if member.dtype != np.bool_:
        raise ValueError(f"membership must be a boolean [K, M] array, got dtype {member.dtype}")
    if member.ndim != 2 or member.shape[1] < 2:
        raise ValueError(f"membership must be [K, M] with M >= 2 models, got shape {member.shape}")
    return member


def _check_probabilities(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got values in [{arr.min()}, {arr.max()}]")
    return arr


def _first_after(side: np.ndarray, count: int) -> np.ndarray:
    """Indices ``[K, M, count]`` of the first ``count`` models after each target with ``side`` True."""
    K, M = side.shape
    order = (np.arange(M)[:, None] + 1 + np.arange(M - 1)[None, :]) % M  # [M, M−1], target excluded
    on_side = side[:, order]  # [K, M, M−1]
    # A stable sort of "not on side" puts the on-side positions first, in cyclic order.
    pos = np.argsort(~on_side, axis=-1, kind="stable")[..., :count]
    return np.take_along_axis(np.broadcast_to(order, (K, M, M - 1)), pos, axis=-1)


def _check_side(side: np.ndarray, need: int, label: str, mode: str, references: int) -> None:
    count = side.sum(axis=1)  # [K]
    available = (count[:, None] - side).min(axis=1)  # fewest on this side once the target is removed
    bad = np.flatnonzero(available < need)
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"RMIA ({mode}, references={references}) needs {need} {label}-models besides the target for "
            f"every (canary, target) pair; canary {k} has {int(count[k])} {label}-models among the "
            f"{side.shape[1]}, which leaves {int(available[k])} when the target is one of them "
            f"({bad.size} canaries affected)"
        )


def reference_models(membership: np.ndarray, references: int, mode: Mode = "offline") -> np.ndarray:
    """The reference models ``[K, M, r]`` (int64 model indices) of every (canary k, target m).

    Offline: the first ``references`` models after m (cyclic order, m excluded) that are out for
    canary k. Online (``references`` even): the first ``references/2`` in-models after m, then the
    first ``references/2`` out-models after m. Raises ``ValueError`` when a canary has too few
    models on a side once the target is excluded.
    """
    if mode not in ("online", "offline"):
        raise ValueError(f"mode must be 'online' or 'offline', got {mode!r}")
    if isinstance(references, bool) or not isinstance(references, int | np.integer) or references < 1:
        raise ValueError(f"references must be an int >= 1, got {references!r}")
    references = int(references)
    if mode == "online" and references % 2:
        raise ValueError(
            f"online RMIA needs an even number of references (half in, half out), got {references}"
        )
    member = _check_membership(membership)
    if mode == "offline":
        _check_side(~member, references, "out", mode, references)
        return _first_after(~member, references).astype(np.int64)
    half = references // 2
    _check_side(member, half, "in", mode, references)
    _check_side(~member, half, "out", mode, references)
    chosen = np.concatenate([_first_after(member, half), _first_after(~member, half)], axis=-1)
    return chosen.astype(np.int64)


def rmia_scores(
    prob_x: np.ndarray,
    prob_z: np.ndarray,
    membership: np.ndarray,
    *,
    references: int = 1,
    mode: Mode = "offline",
    a: float = DEFAULT_OFFLINE_A,
    gamma: float = DEFAULT_GAMMA,
    refine_ties: bool = False,
) -> np.ndarray:
    """RMIA scores ``[K, M]`` (float64) for every (canary k, target model m): in [0, 1], or below
    1 + 1/Z with ``refine_ties``.

    ``prob_x`` is ``[K, M]`` or ``[K, M, A]`` (averaged over A), ``prob_z`` is ``[M, Z]``, both
    probabilities in [0, 1]; ``membership`` is the boolean ``[K, M]`` design. The score is the
    fraction of population records z with LR(x)/LR(z) ≥ ``gamma``, on the reference models of
    :func:`reference_models`; offline, reference averages go through ½((1 + a)·p + (1 − a)).

    With few population records the count saturates: every strongly member-like x scores 1, and a
    threshold at a low FPR cannot split the tie. ``refine_ties`` orders equal counts by LR(x), adding
    ``(1/Z)·0.999·σ(log LR(x))`` (σ the logistic), which never reorders different counts.

    ``refine_ties`` is a choice of this project, not part of Zarifzadeh et al.'s RMIA (the paper's
    score is the count alone, ties included). Its justification has a limited scope: for decisions
    that share the target model *and* the reference models, the LR(z) are the same, so the count
    #{z : LR(x) ≥ γ′·LR(z)} at every γ′ ≥ γ is non-decreasing in LR(x), and ordering tied counts by
    LR(x) is the order a stricter γ would give. Across target models or reference sets (the audit's
    one global threshold compares decisions of all targets, whose references differ per canary) the
    LR(z) differ and no such argument holds: there it is a heuristic tie-break that changes which
    decisions pass a low-FPR threshold. It cannot make a bound invalid (LR(x) is computed from the
    target's output and its references, blind to the target's membership bit, like the count), but
    RMIA's rates with it are not the paper's rates; the canaries attack uses it and says so.
    """
    member = _check_membership(membership)
    K, M = member.shape
    px = _check_probabilities(prob_x, "prob_x")
    if px.ndim == 3:
        if px.shape[2] < 1:
            raise ValueError(f"prob_x has an empty augmentation axis, shape {px.shape}")
        px = px.mean(axis=2)
    if px.ndim != 2:
        raise ValueError(f"prob_x must be [K, M] or [K, M, A], got shape {px.shape}")
    if px.shape != (K, M):
        raise ValueError(f"prob_x has (K, M) = {px.shape}, membership is {member.shape}")
    pz = _check_probabilities(prob_z, "prob_z")
    if pz.ndim != 2 or pz.shape[0] != M or pz.shape[1] < 1:
        raise ValueError(f"prob_z must be [M, Z] with M = {M} models and Z >= 1, got shape {pz.shape}")
    if not 0.0 <= a <= 1.0:
        raise ValueError(f"a must lie in [0, 1], got {a}")
    if not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be finite and > 0, got {gamma}")
    refs = reference_models(member, references, mode)  # [K, M, r]
    r = refs.shape[2]
    Z = pz.shape[1]

    scores = np.empty((K, M), dtype=np.float64)
    chunk = max(1, _CHUNK_ELEMENTS // (M * r * (Z + 1)))
    for start in range(0, K, chunk):
        stop = min(K, start + chunk)
        n = stop - start
        # Column 0: the canary; columns 1..Z: the population. One array, one code path, so equal
        # inputs give bit-equal ratios.
        values = np.concatenate([px[start:stop, :, None], np.broadcast_to(pz, (n, M, Z))], axis=2)
        ref_mean = values[np.arange(n)[:, None, None], refs[start:stop]].mean(axis=2)  # [n, M, 1+Z]
        if mode == "offline":
            ref_mean = 0.5 * ((1.0 + a) * ref_mean + (1.0 - a))
        lr = np.maximum(values, PROB_FLOOR) / np.maximum(ref_mean, PROB_FLOOR)
        relative = lr[..., :1] / lr[..., 1:]  # [n, M, Z]: LR(x) / LR(z)
        scores[start:stop] = np.count_nonzero(relative >= gamma, axis=2) / Z
        if refine_ties:
            scores[start:stop] += 0.999 / Z * expit(np.log(lr[..., 0]))
    return scores
