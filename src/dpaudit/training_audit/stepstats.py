"""One step's statistics from what the observer saw (NumPy; notation of
:mod:`dpaudit.training_audit.transcript`)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["canary_statistics", "residual_statistics"]

#: ŝ_t below this is treated as this (a step without noise): statistics stay finite, checks still see it.
TINY = 1e-300


def canary_statistics(
    rows: np.ndarray,
    canary_rows: int,
    on_s: np.ndarray,
    norms: np.ndarray,
    present: np.ndarray,
    noise_multiplier: float,
    clip_norm: float,
) -> dict[str, Any]:
    """Projections, declared signals and the batch's canary signal for one step.

    ``rows``: the observed update on the first kernel's inert rows (canary rows first, then the
    probe's); ``on_s`` [m, |S|]: every canary's gradient on the canary rows at θ_t; ``norms`` [m]: its
    full gradient norm; ``present`` [m]: which canaries were in the batch.
    """
    sigma_c = noise_multiplier * clip_norm
    g_s = rows[:canary_rows].ravel()
    probe = rows[canary_rows:].ravel()
    s_hat = max(float(np.linalg.norm(probe)) / np.sqrt(probe.size), TINY)
    s_norm = np.linalg.norm(on_s, axis=1)
    safe = np.where(s_norm > 0, s_norm, 1.0)
    projections = (on_s @ g_s) / safe / s_hat
    clipped = s_norm * np.minimum(1.0, clip_norm / np.where(norms > 0, norms, 1.0))
    k_vec = (on_s[present] * (clipped[present] / safe[present])[:, None]).sum(axis=0)
    k_norm = float(np.linalg.norm(k_vec))
    observed = float(g_s @ k_vec) / k_norm / s_hat if k_norm > 0 else 0.0
    return {
        "projections": projections,
        "expected": clipped / sigma_c,
        "present": present,
        "signal": k_norm / sigma_c,
        "signal_observed": observed,
        "probe": probe,
        "s_hat": s_hat,
    }


def residual_statistics(
    update: list[np.ndarray],
    clipped_sum: list[np.ndarray],
    kernel_index: int,
    probe_rows: np.ndarray,
    s_hat: float,
) -> np.ndarray:
    """‖R_{t,v}‖² / ŝ_t² per variable: the update less its least-squares fit α̂·K̄ (probe rows left out)."""
    g = [np.asarray(u, dtype=np.float64).copy() for u in update]
    k = [np.asarray(c, dtype=np.float64).copy() for c in clipped_sum]
    g[kernel_index][probe_rows] = 0.0
    k[kernel_index][probe_rows] = 0.0
    kk = sum(float(np.vdot(a, a)) for a in k)
    alpha = sum(float(np.vdot(a, b)) for a, b in zip(g, k, strict=True)) / kk if kk > 0 else 0.0
    left = np.array([float(np.sum((a - alpha * b) ** 2)) for a, b in zip(g, k, strict=True)])
    return left / max(s_hat * s_hat, TINY)
