"""A NumPy simulator of :class:`~dpaudit.training_audit.transcript.Transcript` with a known answer.

It models one DP-SGD run directly on the linear Gaussian structure of :mod:`dpaudit.training_audit.transcript`
(no network, no data): at step t the batch holds n_t real records (Poisson: n_t ~ Binomial(N, q) with
uniformly random members; shuffle: each epoch a random permutation of the N records cut into batches
of B), each included canary joins with probability q (as :mod:`dpaudit.training_audit.inert` adds them),
canary
j moves the canary coordinates S along its own unit direction d_j in R^canary_dims by its clipped
contribution c_{t,j} = C·f, f ~ U(0.3, 1), and Gaussian noise σC·ξ lands on S and on the k probe
coordinates P; everything is divided by the code's divisor n_t. Directions are drawn once per canary;
with more canaries than dimensions they overlap, which mimics the interference of real canaries.

The knobs plant the bugs the conformance checks (:mod:`dpaudit.training_audit.conformance`) must catch:
``signal_ratio`` scales what canaries add (3: clipping at 3C; 0.3: batch-level clipping),
``noise_ratio`` scales the noise (0.3: σ too small), ``reuse_noise`` reuses the first step's noise at
every step (a constant seed), ``skip_noise_every`` = s drops the noise at every s-th step,
``fixed_batches`` draws shuffled fixed-size batches under a Poisson declaration, ``divisor`` is
``"batch"`` (n_t = real + canary rows of the step) or ``"constant"`` (n_t = B). With the defaults the
run is exactly the declared DP-SGD (Abadi et al. 2016, Alg. 1, on the inert coordinates), so the
canaries' true ε is at most the declaration's PLD ε. Batch keys are sums of SplitMix64-scrambled
record ids (Steele, Lea & Flood 2014), written here because NumPy has no vectorised 64-bit hash.
"""

from __future__ import annotations

import numpy as np

from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.transcript import Transcript

__all__ = ["DIVISORS", "batch_key", "simulate_transcript"]

DIVISORS = ("batch", "constant")
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood 2014): a fixed bijective scrambling of 64-bit ids."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def batch_key(records: np.ndarray) -> np.uint64:
    """Key of a multiset of record ids: Σ mix(id) mod 2^64 (order-free; equal multisets, equal keys)."""
    return np.uint64(np.sum(_mix(np.asarray(records)), dtype=np.uint64))


def _keys(records: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The key of each consecutive run of ``sizes`` records (wrapping cumulative sums of the mixes)."""
    cum = np.concatenate([np.zeros(1, np.uint64), np.cumsum(_mix(records), dtype=np.uint64)])
    ends = np.cumsum(sizes)
    return cum[ends] - cum[ends - sizes]


def _batches(declared: DeclaredDPSGD, shuffled: bool, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(real rows, batch keys, epoch) of every step."""
    T, N, B, per_epoch = (
        declared.total_steps,
        declared.dataset_size,
        declared.batch_size,
        declared.steps_per_epoch,
    )
    epoch = np.arange(T) // per_epoch
    if shuffled:
        sizes = np.full(per_epoch, B, dtype=np.int64)
        sizes[-1] = N - (per_epoch - 1) * B
        epochs = int(epoch[-1]) + 1
        rows = np.tile(sizes, epochs)[:T]
        keys = np.concatenate([_keys(rng.permutation(N), sizes) for _ in range(epochs)])[:T]
        return rows, keys, epoch
    rows = rng.binomial(N, declared.sampling_rate, size=T).astype(np.int64)
    records = np.concatenate([rng.choice(N, size=int(n), replace=False) for n in rows])
    return rows, _keys(records, rows), epoch


def simulate_transcript(
    declared: DeclaredDPSGD,
    canaries: int,
    included: np.ndarray,
    rng: np.random.Generator,
    *,
    probe_dims: int = 64,
    canary_dims: int = 128,
    signal_ratio: float = 1.0,
    noise_ratio: float = 1.0,
    reuse_noise: bool = False,
    skip_noise_every: int = 0,
    fixed_batches: bool = False,
    divisor: str = "batch",
    from_step: float = 0.0,
    contribution: tuple[float, float] = (0.3, 1.0),
) -> Transcript:
    """One simulated run of ``declared`` (bugs planted by the keyword knobs; see the module docstring).

    ``included`` [canaries] bool: which canaries the audit put in. Every Transcript field is filled as
    its docstring defines it; ŝ_t is floored at 1e-300 as the observer does, so a step without noise
    gives huge finite projections. ``from_step`` in [0, 1): ``signal_ratio`` and ``noise_ratio`` act
    only from step ⌊from_step·T⌋ on (a bug in the last part of training); before it the step is correct.
    ``contribution``: the range of f in c_{t,j} = C·f (uniform; (1, 1): every canary at the clip norm).
    """
    inc = np.asarray(included, dtype=bool).ravel()
    if inc.shape != (canaries,):
        raise ValueError(f"included must have {canaries} entries, got shape {inc.shape}")
    if divisor not in DIVISORS:
        raise ValueError(f"divisor must be one of {DIVISORS}, got {divisor!r}")
    if probe_dims < 1 or canary_dims < 1 or skip_noise_every < 0:
        raise ValueError("probe_dims and canary_dims must be >= 1 and skip_noise_every >= 0")
    T, q = declared.total_steps, declared.sampling_rate
    C, sigma_c = declared.clip_norm, declared.noise_multiplier * declared.clip_norm
    rows, keys, epoch = _batches(declared, fixed_batches or declared.sampling == "shuffle", rng)
    present = inc[None, :] & (rng.random((T, canaries)) < q)
    canary_rows = present.sum(axis=1).astype(np.int64)
    directions = rng.standard_normal((canaries, canary_dims))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    contribution = C * rng.uniform(*contribution, size=(T, canaries))  # c_{t,j}: clipped norm along d_j
    k_sum = (present * contribution) @ directions  # K_t, the correctly clipped canary sum on S
    if reuse_noise:
        xi = np.broadcast_to(rng.standard_normal(canary_dims), (T, canary_dims))
        xi_p = np.broadcast_to(rng.standard_normal(probe_dims), (T, probe_dims))
    else:
        xi, xi_p = rng.standard_normal((T, canary_dims)), rng.standard_normal((T, probe_dims))
    if not 0.0 <= from_step < 1.0:
        raise ValueError(f"from_step must lie in [0, 1), got {from_step!r}")
    bugged = np.arange(T) >= int(from_step * T)
    scale = np.where(bugged, noise_ratio, 1.0) * sigma_c
    if skip_noise_every:
        scale[skip_noise_every - 1 :: skip_noise_every] = 0.0
    n = np.maximum(rows + canary_rows, 1) if divisor == "batch" else np.full(T, declared.batch_size)
    g_s = (np.where(bugged, signal_ratio, 1.0)[:, None] * k_sum + scale[:, None] * xi) / n[:, None]
    probe = scale[:, None] * xi_p / n[:, None]
    s_hat = np.maximum(np.linalg.norm(probe, axis=1) / np.sqrt(probe_dims), 1e-300)
    k_norm = np.linalg.norm(k_sum, axis=1)
    observed = np.einsum("td,td->t", g_s, k_sum) / np.where(k_norm > 0, k_norm, 1.0) / s_hat
    return Transcript(
        source="gradients",
        projections=(g_s @ directions.T) / s_hat[:, None],
        expected=contribution / sigma_c,
        present=present,
        signal=k_norm / sigma_c,
        signal_observed=np.where(k_norm > 0, observed, 0.0),
        probe=probe,
        batch_rows=rows,
        canary_rows=canary_rows,
        epoch=epoch.astype(np.int64),
        batch_keys=keys.astype(np.uint64),
    )
