"""Phase 0, configuration: what one DP-SGD run is given and what it returns.
In: hyper-parameters, tracked rows and their difference weights, a crafted injected gradient.
Out: :class:`DPSGDConfig`, :class:`TrackedRecords`, :class:`InjectedGradient`, :class:`TrainResult`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

NoiseScale = Literal["global", "local"]
Batching = Literal["auto", "masked", "gathered"]
StrategyName = Literal["auto", "trials", "groups", "single"]


@dataclass(frozen=True)
class DPSGDConfig:
    """Hyper-parameters of DP-SGD shared by all trials of one run.

    ``noise_multiplier`` z is a float or one value per trial. σ = z·sensitivity_factor·C with
    ``noise_scale="global"`` (σ = z when ``clip_norm`` is None), or σ = z·LS_i per trial and step
    with ``noise_scale="local"`` (needs ``TrackedRecords.difference``). ``sampling_rate`` 1.0 is
    full-batch gradient descent; below 1 each example joins each step's batch independently with
    that probability (Poisson sampling). ``normalizer`` divides the noisy sum; None means the
    expected batch size q·|D_t| of each trial t. ``learning_rate`` may be 0 (θ stays fixed while
    the privatized sums are still drawn and observed).
    """

    clip_norm: float | None
    noise_multiplier: float | np.ndarray
    learning_rate: float
    steps: int
    sampling_rate: float = 1.0
    noise_scale: NoiseScale = "global"
    sensitivity_factor: float = 1.0
    normalizer: float | None = None

    def __post_init__(self) -> None:
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be positive or None, got {self.clip_norm}")
        if np.any(np.asarray(self.noise_multiplier) < 0):
            raise ValueError("noise_multiplier must be non-negative")
        if not (math.isfinite(self.learning_rate) and self.learning_rate >= 0):
            raise ValueError(f"learning_rate must be finite and ≥ 0, got {self.learning_rate}")
        if self.steps < 0:
            raise ValueError(f"steps must be non-negative, got {self.steps}")
        if not 0.0 < self.sampling_rate <= 1.0:
            raise ValueError(f"sampling_rate must be in (0, 1], got {self.sampling_rate}")
        if self.noise_scale not in ("global", "local"):
            raise ValueError(f"noise_scale must be 'global' or 'local', got {self.noise_scale!r}")
        if self.noise_scale == "local" and self.sampling_rate < 1.0:
            # LS_i is the tracked records' gradient difference; under Poisson sampling the records
            # may be absent from a step's batch, so it would not be that step's sensitivity.
            raise ValueError("noise_scale 'local' needs full-batch steps (sampling_rate 1.0)")
        if self.normalizer is not None and not self.normalizer > 0:
            raise ValueError(f"normalizer must be positive, got {self.normalizer}")


@dataclass(frozen=True)
class TrackedRecords:
    """Rows of the shared example set whose clipped per-example gradients are materialised.

    ``difference`` (one weight per tracked row, shape ``[R]`` or per trial ``[T, R]``, or None)
    defines the gradient difference Δ = Σ_r w_r·clip(g_r) between the two candidate datasets:
    ``[1]`` for unbounded DP (D′ = D \\ {x̂}), ``[1, -1]`` for bounded DP (x̂ replaced by x̂′).
    Its norm is the local sensitivity LS_i (Bernau Eqs. 19, 21). Per-trial weights let one run
    compare several candidate pairs (Bernau Fig. 4).
    """

    rows: tuple[int, ...]
    difference: Sequence[float] | np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.difference is not None and np.shape(self.difference)[-1] != len(self.rows):
            raise ValueError("TrackedRecords.difference needs one weight per tracked row")
        if self.difference is not None and np.ndim(self.difference) not in (1, 2):
            raise ValueError("TrackedRecords.difference must have shape [R] or [T, R]")

    def weights(self, num_trials: int) -> np.ndarray:
        """Difference weights ``[T, R]`` (zeros when no difference is set)."""
        if self.difference is None:
            return np.zeros((num_trials, len(self.rows)), dtype=np.float32)
        w = np.asarray(self.difference, dtype=np.float32)
        if w.ndim == 2 and len(w) != num_trials:
            raise ValueError(f"TrackedRecords.difference has {len(w)} rows, expected {num_trials} trials")
        return np.broadcast_to(w, (num_trials, len(self.rows))).copy()


@dataclass(frozen=True)
class InjectedGradient:
    """A crafted gradient added to the clipped sum before the noise (Nasr et al. §IV-E, the
    gradient canary).

    ``grads`` has one array per parameter tensor, either shared by all trials (the parameter's
    shape) or per trial (``[T, *shape]``, set ``per_trial=True``). ``weights`` [T] scales it per
    trial (0 = not injected); ``gate`` [T] (0/1, default all 1) is the world gate b of the
    distinguishing game, multiplied into the weights; ``start_step`` is the first step (0-based)
    at which it is added (e.g. after t_o warm-up steps). Under Poisson sampling it joins each
    step's batch with probability q, like a record. With ``clip=True`` each trial's gradient is
    clipped to C first; otherwise it is added as given (craft it with norm ≤ C).
    """

    grads: Sequence[np.ndarray]
    weights: np.ndarray
    start_step: int = 0
    gate: np.ndarray | None = None
    per_trial: bool = False
    clip: bool = False

    def effective_weights(self, num_trials: int) -> np.ndarray:
        """weights × gate, ``[T]`` float32."""
        w = np.asarray(self.weights, dtype=np.float32)
        if w.shape != (num_trials,):
            raise ValueError(f"injected.weights must have shape [{num_trials}], got {w.shape}")
        if self.gate is not None:
            g = np.asarray(self.gate, dtype=np.float32)
            if g.shape != (num_trials,):
                raise ValueError(f"injected.gate must have shape [{num_trials}], got {g.shape}")
            w = w * g
        return w


@dataclass
class TrainResult:
    """Final parameters ``[T, ...]`` per tensor and observer records ``name -> [T, steps, ...]``."""

    params: list[np.ndarray]
    records: dict[str, np.ndarray]
    config: DPSGDConfig
