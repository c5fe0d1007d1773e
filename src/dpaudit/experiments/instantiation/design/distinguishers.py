"""The distinguishers of Nasr et al. 2021 (:data:`dpaudit.references.NASR_2021`, Table I): each maps a
threat model's view to one score per trial, higher for world D′ (the inserted trials).

- Distinguisher 1 (A, B): the final model's loss on the record, negated (:func:`distinguisher1_scores`).
- Distinguisher 2 (C, D): the loss over every step θ_i (:func:`distinguisher2_statistics`).
- Distinguisher 3 (E, F): the likelihood-ratio test of the Poisson-subsampled Gaussian on the canary
  projections, and the paper's literal test (:func:`distinguisher3`).
"""

from __future__ import annotations

import numpy as np

from dpaudit.attacks.gradient_canary import distinguisher3_literal_scores, distinguisher3_scores

__all__ = ["distinguisher1_scores", "distinguisher2_statistics", "distinguisher3"]


def distinguisher1_scores(final_loss: np.ndarray) -> np.ndarray:
    """Distinguisher 1 (§IV-A/B): −ℓ(θ_T; x, y) per trial ``[T]`` (a lower loss means the record was
    trained on: higher score = D′)."""
    return -final_loss


def distinguisher2_statistics(loss_path: np.ndarray) -> dict[str, np.ndarray]:
    """Distinguisher 2 (§IV-C): scores from ℓ(θ_i; x, y) over all steps ``[T, steps + 1]`` (the last
    column is the final model) — the negated maximum, mean and final loss (a lower loss means the
    point was trained on: higher score = D′). The final loss is Distinguisher 1's statistic, which
    this view includes."""
    return {
        "max": -np.max(loss_path, axis=1),
        "mean": -np.mean(loss_path, axis=1),
        "final": -loss_path[:, -1],
    }


def distinguisher3(
    dots: np.ndarray, sizes: np.ndarray, *, sampling_rate: float, noise_std: float, clip_norm: float
) -> tuple[np.ndarray, np.ndarray]:
    """Distinguisher 3 (§IV-E): the likelihood-ratio scores and the paper's literal scores ``[T]``
    from the projections d_t ``[T, steps]`` (the literal test takes the sign-aligned sums √(2n)·d_t)."""
    lr = distinguisher3_scores(dots, sampling_rate=sampling_rate, noise_std=noise_std, canary_norm=clip_norm)
    literal = np.empty(len(dots))
    for size in np.unique(sizes):
        rows = sizes == size
        literal[rows] = distinguisher3_literal_scores(
            np.sqrt(size) * dots[rows], num_coordinates=int(size), clip_norm=clip_norm, noise_std=noise_std
        )
    return lr, literal
