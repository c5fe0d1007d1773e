"""Crafter 4's gradient canary (Nasr et al. 2021, §IV-E): where it goes, its signs, the injected gradient.
In: the summed |update| of every parameter over the warm-up steps (or any per-coordinate score).
Out: the 2n canary coordinates, the canary gradient s_p·C/√(2n) of norm C, and the projection on it.

After t_o warm-up steps the adversary sums the absolute parameter updates
M = Σ_{t<t_o} |θ_{t+1} − θ_t| and picks the 2n coordinates with the smallest M
(:func:`smallest_update_coordinates`). The canary gradient is s_p·C/√(2n) on those coordinates and 0
elsewhere, with s_p = +1, −1, +1, … in the order of the chosen coordinates (Crafter 4, lines 4–7;
:func:`canary_signs`, which can also draw seeded random signs), so that its L2 norm is the clip norm
C and clipping leaves it unchanged (:func:`canary_gradient`). The trainer injects it while training,
so it lives with the trainer; the distinguishers and the simulator that read the projected sums
(:func:`canary_projection`) are in :mod:`dpaudit.attacks.gradient_canary`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["canary_gradient", "canary_projection", "canary_signs", "smallest_update_coordinates"]


def smallest_update_coordinates(updates_abs_sum: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` (= 2n) coordinates with the smallest summed |update| (Nasr et al. Crafter 4, l. 1–2).

    ``updates_abs_sum`` is ``[P]`` (or ``[..., P]``, e.g. one row per trial) of Σ_{t<t_o} |θ_{t+1} − θ_t|.
    Returns integer indices ``[count]`` (or ``[..., count]``) ordered by increasing summed update;
    ties go to the lower index, so the choice is deterministic also when every update is zero (Crafter
    5's learning rate 0).
    """
    values = np.asarray(updates_abs_sum, dtype=np.float64)
    if values.ndim < 1 or values.shape[-1] == 0:
        raise ValueError(f"updates_abs_sum must have a non-empty parameter axis, got shape {values.shape}")
    num_params = values.shape[-1]
    if not 1 <= count <= num_params:
        raise ValueError(f"count must be in 1..{num_params} (the number of parameters), got {count}")
    if np.any(np.isnan(values)):
        raise ValueError("updates_abs_sum contains NaN")
    return np.argsort(values, axis=-1, kind="stable")[..., :count]


def canary_signs(count: int, *, seed: int | None = None) -> np.ndarray:
    """Signs s_p ∈ {+1, −1} of the canary coordinates, ``[count]`` float64.

    ``seed=None``: +1, −1, +1, … as in Crafter 4 (lines 4–7, ``s ← −s``). An integer seed draws
    independent Rademacher signs instead (``numpy.random.default_rng(seed)``).
    """
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if seed is None:
        return np.where(np.arange(count) % 2 == 0, 1.0, -1.0)
    return np.random.default_rng(seed).choice(np.array([1.0, -1.0]), size=count)


def canary_gradient(
    num_params: int, coordinates: np.ndarray, clip_norm: float, *, seed: int | None = None
) -> np.ndarray:
    """The malicious gradient of Crafter 4: s_p·C/√(2n) on the 2n ``coordinates``, 0 elsewhere, ``[P]``.

    Its L2 norm is C (up to floating-point rounding), so clipping at C leaves it unchanged. Signs
    follow :func:`canary_signs` in the order of ``coordinates`` (alternating unless ``seed`` is given).
    """
    coords = np.asarray(coordinates)
    if coords.ndim != 1 or coords.size == 0 or not np.issubdtype(coords.dtype, np.integer):
        raise ValueError(
            f"coordinates must be a non-empty 1-D integer array, got {coords.dtype} {coords.shape}"
        )
    if coords.min() < 0 or coords.max() >= num_params:
        raise ValueError(f"coordinates must lie in 0..{num_params - 1}, got {coords.min()}..{coords.max()}")
    if np.unique(coords).size != coords.size:
        raise ValueError("coordinates must be distinct")
    if not clip_norm > 0:
        raise ValueError(f"clip_norm must be > 0, got {clip_norm}")
    gradient = np.zeros(num_params, dtype=np.float64)
    gradient[coords] = canary_signs(coords.size, seed=seed) * (clip_norm / np.sqrt(coords.size))
    return gradient


def canary_projection(values_at_coordinates: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """d = ⟨g, u⟩ = Σ_p s_p g_p / √(2n): a privatized sum projected on the unit canary direction.

    ``values_at_coordinates`` is ``[..., 2n]`` (e.g. ``[trials, steps, 2n]``: the observer's record of
    the privatized sums at the canary coordinates, in gradient units, not parameter updates, which
    carry a factor −learning rate); ``signs`` is ``[2n]``. Returns ``[...]``. The sign-aligned sum
    of the spec and of Distinguisher 3 (line 12) is √(2n) times this.
    """
    values = np.asarray(values_at_coordinates, dtype=np.float64)
    s = np.asarray(signs, dtype=np.float64)
    if s.ndim != 1 or values.shape[-1:] != s.shape:
        raise ValueError(f"values_at_coordinates {values.shape} must end in the signs' length {s.shape}")
    return values @ s / np.sqrt(s.size)
