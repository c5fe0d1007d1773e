"""Instrumented DP-SGD for many trials at once (Abadi et al. 2016, Algorithm 1; Bernau et al.
§5.1–5.2; the hooks of Nasr et al. 2021 §IV).

T trials share one example set ``X`` (``[N, ...]``); a boolean membership mask ``[T, N]``
selects each trial's training set, so the neighbouring datasets D and D′ of a trial are just two
masks, and Poisson sampling (rate q) draws a random sub-mask every step. One step per trial runs
these phases (methods of :class:`_StepFunction`, in this order):

1. **batch selection** — full batch, or a Poisson sample (each member joins with probability q);
   Poisson batches are *gathered* (only the ≈ q·|D_t| sampled rows of each trial are evaluated,
   padded to the chunk's largest batch) or, for large q, evaluated as a mask over all N rows;
2. **per-example norms** — from the layer identities (:mod:`dpaudit.training.models`), never
   materialising per-example gradients of dense layers;
3. **clip-and-sum** — clip every example to ``clip_norm`` C (c_n = min(1, C/‖g_n‖)) and sum over
   the batch as matmuls; tracked rows get their clipped gradients materialised (only those few);
4. **injection** — hooks that change the privatized sum: a crafted :class:`InjectedGradient`
   (optionally per trial, from a start step, behind a world gate) and an :data:`Injector`
   callback run inside the compiled step, whose output is clipped to C and enters with the
   sampling probability q, like a record;
5. **noise** — Gaussian N(0, σ²I) per trial with σ = z·s, where the sensitivity s is
   ``sensitivity_factor``·C (global: 1·C unbounded, 2·C bounded) or the local sensitivity
   LS_i = ‖Σ_r w_r clip(g_r)‖ of the tracked records (Bernau Eqs. 19 and 21);
6. **update** — θ ← θ − η·(noisy sum)/B, B = ``normalizer`` (default: q times the trial's dataset
   size, i.e. TF Privacy's division by the number of microbatches). η = 0 is allowed (the
   malicious-dataset adversary of Nasr et al. §IV-F keeps θ fixed).

Observers are callables run inside the compiled step that map a :class:`StepState` to a few
per-trial tensors; the trainer stacks them over steps into ``TrainResult.records`` — it never
keeps gradient or weight histories (:func:`privatized_sum_observer` records the noisy sum at a few
coordinates). With ``clip_norm=None`` and ``noise_multiplier=0`` this is plain (minibatch or
full-batch) SGD.

Speed: one compiled trace serves every chunk and every call with the same model, configuration
and hooks (the seed, sizes and chunk index are tensors); :func:`select_strategy` picks trials at
once, small groups or one model at a time per model family, device and rows per step. Sums over
examples run in fixed-size blocks so that results do not depend on the number of intra-op threads.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import tensorflow as tf

from dpaudit.logs import progress
from dpaudit.training.models import Conv2D, Dense, Model

log = logging.getLogger(__name__)

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
class StepState:
    """What an observer or injector may read in one step (tensors have a leading trial axis T).

    ``params`` are θ_i before the update; ``losses`` [T, N] per-example losses at θ_i;
    ``batch_mask`` [T, N] (1 = in this step's batch); ``clip_factors`` [T, N];
    ``tracked_grads`` clipped per-example gradients of the tracked rows, per parameter
    [T, R, ...]; ``tracked_norms`` their unclipped norms [T, R]; ``difference`` Δ per parameter
    [T, ...] (zeros if no difference is set); ``sensitivity`` [T] (LS_i or the global one);
    ``sigma`` [T]; ``noise`` the standard-normal draws ξ per parameter (the added noise is σ·ξ);
    ``clipped_sum`` per parameter (with the injections); ``trial_data`` per-trial constants given
    to ``train_trials``; ``privatized_sum`` the noisy sum Σ clip(g) + injections + σ·ξ per
    parameter (what Protocol 4 of Nasr et al. reveals); ``injected_weights`` [T] and
    ``injector_weights`` [T]: how much of the :class:`InjectedGradient` and of the
    :data:`Injector` output entered this step (0 where the gate, the start step or the Poisson
    draw kept it out).

    With gathered Poisson batches, ``losses`` and ``clip_factors`` over all N rows are computed
    only if an observer reads them (one extra forward and backward pass). An injector runs before
    the noise phase: it sees ``noise`` and ``privatized_sum`` empty and ``clipped_sum`` without
    its own contribution.

    With ``released`` coordinates (``train_trials(released=...)``, learning rate 0), ``clipped_sum``,
    ``noise`` and ``privatized_sum`` each hold one tensor ``[T, K]``: the K released flat
    coordinates in the order given, and ``released`` names them.
    """

    step: tf.Tensor
    params: list[tf.Tensor]
    losses: tf.Tensor
    batch_mask: tf.Tensor
    clip_factors: tf.Tensor
    tracked_grads: list[tf.Tensor]
    tracked_norms: tf.Tensor
    difference: list[tf.Tensor]
    sensitivity: tf.Tensor
    sigma: tf.Tensor
    noise: list[tf.Tensor]
    clipped_sum: list[tf.Tensor]
    trial_data: dict[str, tf.Tensor] = field(default_factory=dict)
    privatized_sum: list[tf.Tensor] = field(default_factory=list)
    injected_weights: tf.Tensor | None = None
    injector_weights: tf.Tensor | None = None
    released: tuple[int, ...] | None = None

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if isinstance(value, _Lazy):  # computed on first read, inside the same trace
            value = value.get()
            object.__setattr__(self, name, value)
        return value


class _Lazy:
    """A StepState field computed only when read (e.g. all-row losses under gathered batches)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self._value: Any = None
        self._done = False

    def get(self) -> Any:
        """The value, computed once."""
        if not self._done:
            self._value, self._done = self.fn(), True
        return self._value


Observer = Callable[[StepState], Mapping[str, tf.Tensor]]
Injector = Callable[[StepState], Sequence[tf.Tensor]]
"""A per-step hook run inside the compiled step: state → one tensor ``[T, *shape]`` per parameter.
The trainer clips each trial's output to C, multiplies it by the injector gate and, under Poisson
sampling, by a Bernoulli(q) draw per trial and step, and adds it to the clipped sum."""


@dataclass
class TrainResult:
    """Final parameters ``[T, ...]`` per tensor and observer records ``name -> [T, steps, ...]``."""

    params: list[np.ndarray]
    records: dict[str, np.ndarray]
    config: DPSGDConfig


@dataclass(frozen=True)
class Strategy:
    """How trials are grouped into compiled chunks (all run the same DP-SGD step).

    ``trials``: many trials per chunk, batched over the trial axis (MLPs on any device, CNNs on a
    GPU); ``groups``: small chunks whose convolutions run one native convolution per trial;
    ``single``: one model at a time (CNNs on CPU, unless batches are small). ``chunk_size`` None
    means the memory budget of :func:`default_chunk_size`. ``batching`` says how Poisson batches
    are formed.
    """

    name: StrategyName
    chunk_size: int | None
    batching: Batching = "auto"


def _has_conv(model: Model) -> bool:
    return any(isinstance(layer, Conv2D) for layer in model.layers)


#: CNNs on CPU batch trials when a step evaluates at most this many rows per trial (small gathered
#: Poisson batches), ``SMALL_BATCH_CHUNK`` trials a chunk.
SMALL_BATCH_ROWS = 32
SMALL_BATCH_CHUNK = 4


def select_strategy(model: Model, device: str | None = None, rows_per_step: int | None = None) -> Strategy:
    """The faster strategy for ``model`` on ``device`` ("CPU"/"GPU"; default: GPU if TensorFlow
    sees one) when each step evaluates ``rows_per_step`` rows per trial (None: unknown), from a
    measured cost model (2 CPU cores, ``benchmarks/README.md``):

    - MLPs: trials at once (1000 adult trials batched: ≈ 0.1 ms per trial-step; one at a time is
      dominated by op dispatch);
    - CNNs on CPU: one model at a time. A CNN step's cost is arithmetic and memory traffic, not op
      dispatch: with every trial's convolutions unrolled as native ops (TF 2.15 has no
      grouped-convolution gradient on CPU) the CPU time per model of the mnist CNN on 100 full-batch
      rows was the same for 1, 2 and 4 trials a chunk (230–270 ms per 30 steps) and higher for
      8–16, whose activations leave the caches. Small batches are the exception: at most
      ``SMALL_BATCH_ROWS`` rows per step (gathered Poisson batches, e.g. q = 0.1 of 100) dispatch
      dominates again: threat model F's training on the mnist CNN (27 padded rows) ran 0.93–1.6×
      as fast per model with 4 trials a chunk as one at a time (wall clock, seven runs at load
      average 3.0–6.6, median 1.35×; 8 a chunk 0.98–1.2×), at about the same CPU time per model;
    - CNNs on a GPU: trials at once (batched matmuls fill the device).

    The choice depends only on the model family, the device type and the configuration, never on a
    timing, so the chunking (and with it the random draws) is the same on every machine of a type.
    """
    if device is None:
        device = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    if _has_conv(model):
        if device.upper() == "GPU":
            return Strategy("trials", None)
        if rows_per_step is not None and rows_per_step <= SMALL_BATCH_ROWS:
            return Strategy("trials", SMALL_BATCH_CHUNK)
        return Strategy("single", 1)
    return Strategy("trials", None)


def _flat_sq_norm(tensors: Sequence[tf.Tensor], keep: int = 1) -> tf.Tensor:
    """Σ over all non-leading axes of all tensors of x² (``keep`` leading axes retained)."""
    total = None
    for t in tensors:
        axes = list(range(keep, len(t.shape)))
        s = tf.reduce_sum(tf.square(t), axis=axes) if axes else tf.square(t)
        total = s if total is None else total + s
    return total


def _per_trial(v: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
    """Reshape a per-trial vector [T] to broadcast against ``like`` [T, ...] (one reshape to a
    constant shape: the step runs thousands of times, and every extra op costs dispatch time)."""
    return tf.reshape(v, [-1] + [1] * (len(like.shape) - 1))


def _clip_per_trial(grads: Sequence[tf.Tensor], clip_norm: float | None) -> list[tf.Tensor]:
    """Scale each trial's gradient (list of [T, ...]) to norm at most C."""
    if clip_norm is None:
        return list(grads)
    norm = tf.sqrt(_flat_sq_norm(grads))
    f = tf.minimum(1.0, clip_norm / tf.maximum(norm, 1e-12))
    return [g * _per_trial(f, g) for g in grads]


def _seed(base: tf.Tensor, chunk: tf.Tensor, step: tf.Tensor, slot: int) -> tf.Tensor:
    """Stateless-RNG seed pair unique per (base seed, chunk, step, slot)."""
    counter = tf.cast(step, tf.int64) * 4096 + slot
    return tf.stack([tf.cast(base, tf.int64) * 1_000_003 + tf.cast(chunk, tf.int64), counter])


# Seed slots of the stateless draws (one stream each).
_SLOT_BATCH, _SLOT_INJECTED, _SLOT_INJECTOR = 4095, 4094, 4093


def default_chunk_size(
    model: Model,
    num_examples: int,
    cache_floats: float = 2e6,
    memory_floats: float = 3e8,
    gathered: bool = False,
) -> int:
    """Trials per chunk: activations of about ``cache_floats`` per chunk (measured on 2 CPU cores,
    adult and digits MLPs: 50–250 trials per chunk ran 1.3–2× faster than 800–1000, which spill
    the caches), at least 16 trials, and never more than ``memory_floats`` of (over-)estimated
    working memory (mnist CNN, |D| = 100: 17 trials, ~1.8 GB resident; 24 trials ran 1.7× faster
    per trial than 3). ``num_examples`` is the number of rows evaluated per step (for gathered
    Poisson batches the padded batch size, not N; ``gathered`` also counts the per-trial copy of
    the inputs that gathering makes)."""
    per_example = model.activation_size() + (math.prod(model.input_shape) if gathered else 0)
    act = per_example * max(num_examples, 1)
    by_cache = int(cache_floats // act)
    by_memory = int(memory_floats // (4 * act + 6 * model.num_params))
    return max(1, min(max(16, by_cache), by_memory))


def poisson_batch_bound(size: int, q: float) -> int:
    """A padded batch size that a Binomial(size, q) batch exceeds with probability < 1e-6 (mean +
    5 sd + 2): the memory budget of gathered batches is planned with it. The batch itself is never
    truncated: a larger draw just makes that step's tensors larger."""
    mean = size * q
    return int(min(size, math.ceil(mean + 5.0 * math.sqrt(max(mean * (1.0 - q), 1e-12)) + 2)))


@dataclass
class _Pass:
    """One forward/backward pass over a set of rows: losses, layer traces, output gradients δ,
    what the layers share between norms and sums, per-example gradient norms."""

    losses: tf.Tensor
    traces: list
    deltas: list[tf.Tensor]
    prepared: list[tuple]
    norms: tf.Tensor


@dataclass(frozen=True)
class _ReleasedPlan:
    """Where K released flat coordinates live: per (layer, kernel|bias) group the kernel rows i
    (``first``) and output units o (``second``) to gather, and ``order``, the permutation from the
    groups' concatenation back to the requested order."""

    parts: tuple[tuple[int, str, tf.Tensor, tf.Tensor], ...]
    order: tf.Tensor


def _released_plan(model: Model, released: Sequence[int]) -> _ReleasedPlan:
    """Map flat parameter coordinates (parameters flattened in order and concatenated) onto dense
    layers' kernel entries (i, o) and bias entries o (see :meth:`_StepFunction.clip_and_sum_released`)."""
    trainable = [layer for layer in model.layers if isinstance(layer, Dense | Conv2D)]
    offsets = np.cumsum([0, *(math.prod(s) for s in model.param_shapes)])
    groups: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
    for pos, c in enumerate(released):
        j = int(np.searchsorted(offsets, c, side="right")) - 1
        layer, local = j // 2, c - offsets[j]
        if not isinstance(trainable[layer], Dense):
            raise ValueError(
                f"released coordinate {c} lies in a {type(trainable[layer]).__name__} layer; "
                "released coordinates support dense layers only"
            )
        if j % 2 == 0:
            units = model.param_shapes[j][-1]
            groups.setdefault((layer, "kernel"), []).append((pos, local // units, local % units))
        else:
            groups.setdefault((layer, "bias"), []).append((pos, 0, local))
    parts, positions = [], []
    for (layer, kind), entries in groups.items():
        parts.append(
            (
                layer,
                kind,
                tf.constant([e[1] for e in entries], tf.int32),
                tf.constant([e[2] for e in entries], tf.int32),
            )
        )
        positions.extend(e[0] for e in entries)
    order = np.argsort(positions)
    return _ReleasedPlan(tuple(parts), tf.constant(order, tf.int32))


class _StepFunction:
    """The compiled DP-SGD step (Abadi et al. 2016, Algorithm 1) for one model, configuration and
    set of hooks, split into its phases. Everything that varies between chunks and calls (seed,
    chunk index, sizes, masks, noise multipliers, hook data) is a tensor argument, so one trace
    serves every chunk and every call with the same cache key (:func:`_get_step_function`)."""

    def __init__(
        self,
        model: Model,
        cfg: DPSGDConfig,
        tracked_rows: tuple[int, ...],
        has_difference: bool,
        observers: Mapping[str, Observer],
        jit_compile: bool,
        injected: tuple[bool, bool, int] | None,
        injector: Injector | None,
        gathered: bool,
        released: tuple[int, ...] | None = None,
    ) -> None:
        self.model = model
        self.cfg = cfg
        self.tracked_rows = tracked_rows
        self.has_difference = has_difference
        self.observers = dict(observers)
        self.rows = tf.constant(list(tracked_rows), dtype=tf.int32)
        self.jit_compile = jit_compile
        self.noiseless = bool(np.all(np.asarray(cfg.noise_multiplier) == 0))
        self.injected = injected  # (per_trial, clip, start_step) or None
        self.injector = injector
        self.gathered = gathered
        self.released = released
        self._released_plan = None if released is None else _released_plan(model, released)
        self._fn: Callable | None = None

    def get(self) -> Callable:
        """The compiled multi-step function (one trace serves every chunk and block length)."""
        if self._fn is None:
            self._fn = tf.function(self._loop, jit_compile=self.jit_compile, reduce_retracing=True)
        return self._fn

    def _loop(
        self,
        seed: tf.Tensor,
        chunk: tf.Tensor,
        params: list[tf.Tensor],
        X: tf.Tensor,
        y: tf.Tensor,
        member_mask: tf.Tensor,
        z: tf.Tensor,
        normalizer: tf.Tensor,
        first_step: tf.Tensor,
        num_steps: tf.Tensor,
        weights: tf.Tensor,
        trial_data: dict[str, tf.Tensor],
        hooks: dict[str, Any],
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        """``num_steps`` (≥ 1) steps in one graph: a while loop, observer records in TensorArrays."""
        data = (seed, chunk, X, y, member_mask, z, normalizer)
        params, rec0 = self._step(*data, params, first_step, weights, trial_data, hooks)
        keys = sorted(rec0)
        arrays = [
            tf.TensorArray(rec0[k].dtype, size=num_steps, element_shape=rec0[k].shape).write(0, rec0[k])
            for k in keys
        ]

        def body(i: tf.Tensor, p: list[tf.Tensor], tas: list[tf.TensorArray]) -> tuple:
            step = first_step + tf.cast(i, tf.int64)
            new, rec = self._step(*data, p, step, weights, trial_data, hooks)
            return i + 1, new, [ta.write(i, rec[k]) for ta, k in zip(tas, keys, strict=True)]

        _, params, arrays = tf.while_loop(
            lambda i, p, tas: i < num_steps, body, (tf.constant(1), list(params), arrays)
        )
        return params, {k: ta.stack() for k, ta in zip(keys, arrays, strict=True)}

    # Phase 1 ----------------------------------------------------------------------------------
    def select_batch(
        self, seed: tf.Tensor, chunk: tf.Tensor, step: tf.Tensor, member_mask: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor | None, tf.Tensor | None]:
        """Batch selection: the batch mask [T, N] (Poisson: member and u < q, one uniform per trial
        and row from the step's stateless stream; full batch: the membership mask) and, for
        gathered batches, each trial's sampled row indices [T, B] in increasing order and their
        validity [T, B] (B = the chunk's largest batch; padding points at row 0 with weight 0).
        The masked and gathered paths use the same draws, so they select the same batches."""
        if self.cfg.sampling_rate >= 1.0:
            return member_mask, None, None
        u = tf.random.stateless_uniform(
            tf.shape(member_mask), seed=_seed(seed, chunk, step, _SLOT_BATCH), alg="philox"
        )
        batch_mask = member_mask * tf.cast(u < self.cfg.sampling_rate, tf.float32)
        if not self.gathered:
            return batch_mask, None, None
        counts = tf.cast(tf.reduce_sum(batch_mask, axis=1), tf.int32)
        width = tf.maximum(tf.reduce_max(counts), 1)
        coords = tf.cast(tf.where(batch_mask > 0), tf.int32)  # [M, 2], row-major: by trial, then row
        starts = tf.cumsum(counts, exclusive=True)
        pos = tf.range(tf.shape(coords)[0]) - tf.gather(starts, coords[:, 0])
        T = tf.shape(member_mask)[0]
        idx = tf.scatter_nd(tf.stack([coords[:, 0], pos], axis=1), coords[:, 1], tf.stack([T, width]))
        valid = tf.cast(tf.range(width)[None, :] < counts[:, None], tf.float32)
        return batch_mask, idx, valid

    # Phase 2 ----------------------------------------------------------------------------------
    def per_example_norms(self, params: list[tf.Tensor], X: tf.Tensor, y: tf.Tensor, shared: bool) -> _Pass:
        """Per-example norms: forward pass, output gradients δ of every trainable layer by one
        backward pass of Σ ℓ_n, and ‖∂ℓ_n/∂θ‖ per trial and row from the layer identities
        (dense: (‖a‖² + 1)·‖δ‖²; convolution: patches) — no per-example gradient of a dense
        layer is materialised. ``X`` is shared [N, ...] or per trial [T, B, ...]."""
        with tf.GradientTape() as tape:
            tape.watch(params)
            logits, traces = self.model.forward(params, X, shared=shared)
            losses = self.model.example_losses(logits, y)
            total = tf.reduce_sum(losses)
        deltas = tape.gradient(total, [tr.outputs for tr in traces])
        prepared = [tr.layer.prepare(tr.inputs, d, tr.shared) for tr, d in zip(traces, deltas, strict=True)]
        sq = None
        for tr, prep in zip(traces, prepared, strict=True):
            s = tr.layer.sq_norms(prep)
            sq = s if sq is None else sq + s
        return _Pass(losses, traces, deltas, prepared, tf.sqrt(sq))

    def clip_factors(self, norms: tf.Tensor) -> tf.Tensor:
        """c_n = min(1, C/‖g_n‖) (ones without clipping)."""
        if self.cfg.clip_norm is None:
            return tf.ones_like(norms)
        return tf.minimum(1.0, self.cfg.clip_norm / tf.maximum(norms, 1e-12))

    # Phase 3 ----------------------------------------------------------------------------------
    def clip_and_sum(self, pas: _Pass, weights: tf.Tensor) -> tuple[tf.Tensor, list[tf.Tensor]]:
        """Clip-and-sum: Σ_n w_n c_n ∂ℓ_n/∂θ per trial and parameter, where w_n is the batch
        weight (mask or validity) of each evaluated row; returns the clip factors and the sums."""
        factors = self.clip_factors(pas.norms)
        c = factors * weights
        clipped_sum: list[tf.Tensor] = []
        for tr, prep in zip(pas.traces, pas.prepared, strict=True):
            clipped_sum.extend(tr.layer.weighted_sum(prep, c))
        return factors, clipped_sum

    def clip_and_sum_released(self, pas: _Pass, weights: tf.Tensor) -> list[tf.Tensor]:
        """Clip-and-sum at the released coordinates only: ``[T, K]`` with Σ_n w_n c_n a_{n,i} δ_{n,o}
        for a dense kernel entry (i, o) and Σ_n w_n c_n δ_{n,o} for a bias entry — the same sums as
        :meth:`clip_and_sum` restricted to K coordinates, without forming the other P − K."""
        c = self.clip_factors(pas.norms) * weights  # [T, N]
        assert self._released_plan is not None
        columns: list[tf.Tensor] = []
        for layer, kind, first, second in self._released_plan.parts:
            tr = pas.traces[layer]
            d = tf.gather(pas.deltas[layer], second, axis=-1) * c[..., None]  # [T, N, k]
            if kind == "bias":
                columns.append(tf.reduce_sum(d, axis=1))
            else:
                a = tf.gather(tr.inputs, first, axis=-1)  # [N, k] shared or [T, N, k]
                columns.append(tf.reduce_sum((a[None] if tr.shared else a) * d, axis=1))
        values = tf.concat(columns, axis=1)
        return [tf.gather(values, self._released_plan.order, axis=1)]

    def tracked_gradients(self, pas: _Pass, rows: tf.Tensor | None) -> tuple[list[tf.Tensor], tf.Tensor]:
        """Clipped per-example gradients [T, R, ...] and unclipped norms [T, R] of the tracked rows,
        taken from ``pas`` at positions ``rows`` (None: ``pas`` covers exactly the tracked rows)."""
        factors = self.clip_factors(pas.norms)
        if rows is not None:
            factors = tf.gather(factors, rows, axis=1)
        grads: list[tf.Tensor] = []
        for tr, d in zip(pas.traces, pas.deltas, strict=True):
            a, dr = tr.inputs, d
            if rows is not None:
                a = tf.gather(tr.inputs, rows, axis=0 if tr.shared else 1)
                dr = tf.gather(d, rows, axis=1)
            for g in tr.layer.per_example(a, dr, tr.shared):
                grads.append(g * factors[(...,) + (None,) * (len(g.shape) - 2)])
        norms = pas.norms if rows is None else tf.gather(pas.norms, rows, axis=1)
        return grads, norms

    def difference(self, tracked_grads: list[tf.Tensor], weights: tf.Tensor) -> list[tf.Tensor]:
        """Δ = Σ_r w_r clip(g_r) per trial, by multiply-and-sum (measured faster than an einsum)."""
        out = []
        for g in tracked_grads:
            out.append(tf.reduce_sum(g * weights[(...,) + (None,) * (len(g.shape) - 2)], axis=1))
        return out

    # Phase 4 ----------------------------------------------------------------------------------
    def inject(
        self,
        seed: tf.Tensor,
        chunk: tf.Tensor,
        step: tf.Tensor,
        clipped_sum: list[tf.Tensor],
        state: StepState,
        trial_data: dict[str, tf.Tensor],
        hooks: dict[str, Any],
    ) -> tuple[list[tf.Tensor], tf.Tensor | None, tf.Tensor | None]:
        """Injection: add the crafted gradient (weights × gate from ``start_step``, clipped to C if
        asked) and the injector's output (always clipped to C, times its gate) to the clipped
        sum; under Poisson sampling each enters a trial's step with probability q (independent
        Bernoulli draws per trial and step, like a record's membership in the batch)."""
        cfg = self.cfg
        T = tf.shape(clipped_sum[0])[0]
        out = list(clipped_sum)
        inj_w = None
        if self.injected is not None:
            per_trial, clip, start = self.injected
            w = hooks["injected_weights"] * tf.cast(step >= start, tf.float32)
            if cfg.sampling_rate < 1.0:
                u = tf.random.stateless_uniform(
                    [T], seed=_seed(seed, chunk, step, _SLOT_INJECTED), alg="philox"
                )
                w = w * tf.cast(u < cfg.sampling_rate, tf.float32)
            grads = list(hooks["injected_grads"])
            if not per_trial:
                grads = [g[None] for g in grads]
                if clip:
                    grads = _clip_per_trial(grads, cfg.clip_norm)
                out = [s + _per_trial(w, s) * g for s, g in zip(out, grads, strict=True)]
            else:
                if clip:
                    grads = _clip_per_trial(grads, cfg.clip_norm)
                out = [s + _per_trial(w, s) * g for s, g in zip(out, grads, strict=True)]
            inj_w = w
        injector_w = None
        if self.injector is not None:
            grads = _clip_per_trial(list(self.injector(state)), cfg.clip_norm)
            w = hooks["injector_gate"]
            if cfg.sampling_rate < 1.0:
                u = tf.random.stateless_uniform(
                    [T], seed=_seed(seed, chunk, step, _SLOT_INJECTOR), alg="philox"
                )
                w = w * tf.cast(u < cfg.sampling_rate, tf.float32)
            out = [s + _per_trial(w, s) * g for s, g in zip(out, grads, strict=True)]
            injector_w = w
        return out, inj_w, injector_w

    # Phase 5 ----------------------------------------------------------------------------------
    def noise(
        self, seed: tf.Tensor, chunk: tf.Tensor, step: tf.Tensor, params: list[tf.Tensor]
    ) -> list[tf.Tensor]:
        """Noise: standard-normal ξ per parameter from the step's stateless stream (zeros, without
        drawing, when every noise multiplier is 0, e.g. non-DP SGD); σ·ξ is added in :meth:`update`."""
        if self.released is not None:
            shape = tf.stack([tf.shape(params[0])[0], len(self.released)])
            if self.noiseless:
                return [tf.zeros(shape)]
            return [tf.random.stateless_normal(shape, seed=_seed(seed, chunk, step, 0), alg="philox")]
        if self.noiseless:
            return [tf.zeros_like(p) for p in params]
        return [
            tf.random.stateless_normal(tf.shape(p), seed=_seed(seed, chunk, step, i), alg="philox")
            for i, p in enumerate(params)
        ]

    # Phase 6 ----------------------------------------------------------------------------------
    def update(
        self,
        params: list[tf.Tensor],
        clipped_sum: list[tf.Tensor],
        sigma: tf.Tensor,
        noise: list[tf.Tensor],
        normalizer: tf.Tensor,
    ) -> tuple[list[tf.Tensor], list[tf.Tensor]]:
        """Update: privatized sum g̃ = Σ clip(g) + σ·ξ and θ ← θ − (η/B)·g̃ per trial."""
        if self.released is not None:  # learning rate 0: θ stays; g̃ at the released coordinates
            return list(params), [clipped_sum[0] + sigma[:, None] * noise[0]]
        scale = self.cfg.learning_rate / normalizer
        privatized, new_params = [], []
        for p, g, xi in zip(params, clipped_sum, noise, strict=True):
            noisy = g + _per_trial(sigma, p) * xi
            privatized.append(noisy)
            new_params.append(p - _per_trial(scale, p) * noisy)
        return new_params, privatized

    def _step(
        self,
        seed: tf.Tensor,
        chunk: tf.Tensor,
        X: tf.Tensor,
        y: tf.Tensor,
        member_mask: tf.Tensor,
        z: tf.Tensor,
        normalizer: tf.Tensor,
        params: list[tf.Tensor],
        step: tf.Tensor,
        weights: tf.Tensor,
        trial_data: dict[str, tf.Tensor],
        hooks: dict[str, Any],
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        cfg = self.cfg
        T = tf.shape(params[0])[0]
        batch_mask, idx, valid = self.select_batch(seed, chunk, step, member_mask)
        R = len(self.tracked_rows)
        if idx is None:  # full batch or masked Poisson batch: every row, weighted by the mask
            pas = self.per_example_norms(params, X, y, shared=True)
            if self.released is None:
                factors, clipped_sum = self.clip_and_sum(pas, batch_mask)
            else:
                factors = self.clip_factors(pas.norms)
                clipped_sum = self.clip_and_sum_released(pas, batch_mask)
            losses = pas.losses
            all_factors = factors
            tracked = self.tracked_gradients(pas, self.rows) if R else None
        else:  # gathered Poisson batch: only the sampled rows
            pas = self.per_example_norms(params, tf.gather(X, idx), tf.gather(y, idx), shared=False)
            if self.released is None:
                _, clipped_sum = self.clip_and_sum(pas, valid)
            else:
                clipped_sum = self.clip_and_sum_released(pas, valid)
            full = _Lazy(lambda: self.per_example_norms(params, X, y, shared=True))
            losses = _Lazy(lambda: full.get().losses)  # type: ignore[assignment]
            all_factors = _Lazy(lambda: self.clip_factors(full.get().norms))  # type: ignore[assignment]
            tracked = None
            if R:
                rows_pass = self.per_example_norms(
                    params, tf.gather(X, self.rows), tf.gather(y, self.rows), True
                )
                tracked = self.tracked_gradients(rows_pass, None)
        if tracked is not None:
            tracked_grads, tracked_norms = tracked
        else:
            tracked_grads, tracked_norms = [], tf.zeros([T, 0])
        if R and self.has_difference:
            difference = self.difference(tracked_grads, weights)
            local = tf.sqrt(_flat_sq_norm(difference))
        else:
            difference = [tf.zeros_like(p) for p in params]
            local = tf.zeros([T])
        if cfg.noise_scale == "local":
            sensitivity = local
        else:
            base = 1.0 if cfg.clip_norm is None else cfg.clip_norm
            sensitivity = tf.fill([T], tf.constant(cfg.sensitivity_factor * base, tf.float32))
        sigma = z * sensitivity
        state = StepState(
            step=step,
            params=list(params),
            losses=losses,
            batch_mask=batch_mask,
            clip_factors=all_factors,
            tracked_grads=tracked_grads,
            tracked_norms=tracked_norms,
            difference=difference,
            sensitivity=sensitivity,
            sigma=sigma,
            noise=[],
            clipped_sum=clipped_sum,
            trial_data=trial_data,
            released=self.released,
        )
        if self.injected is not None or self.injector is not None:
            clipped_sum, state.injected_weights, state.injector_weights = self.inject(
                seed, chunk, step, clipped_sum, state, trial_data, hooks
            )
        noise = self.noise(seed, chunk, step, params)
        new_params, privatized = self.update(params, clipped_sum, sigma, noise, normalizer)
        state.noise = noise
        state.clipped_sum = clipped_sum
        state.privatized_sum = privatized
        records: dict[str, tf.Tensor] = {}
        for name, observer in self.observers.items():
            for key, value in observer(state).items():
                records[f"{name}.{key}" if key else name] = value
        return new_params, records


def _callable_key(fn: Callable) -> Any:
    """A cache key for an observer or injector: its code and closure values when they are
    hashable (so that two ``loss_observer([0, 5])`` share a trace), else its identity."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ("id", id(fn))
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        v = cell.cell_contents
        if isinstance(v, tf.Tensor):
            v = ("tensor", v.dtype.name, tuple(v.shape), v.numpy().tobytes())
        elif isinstance(v, np.ndarray):
            v = ("array", v.dtype.str, v.shape, v.tobytes())
        try:
            hash(v)
        except TypeError:
            return ("id", id(fn))
        cells.append(v)
    return ("code", code, tuple(cells))


_CACHE: OrderedDict[Any, _StepFunction] = OrderedDict()
_CACHE_SIZE = 32


def _get_step_function(model: Model, cfg: DPSGDConfig, chunk: int, **kw: Any) -> _StepFunction:
    """A compiled step from a small LRU cache, keyed by everything that is baked into its trace:
    the model object, the configuration's scalars, the chunk size (static trial count), the
    tracked rows and the hooks. Seeds, sizes and data are tensor arguments, so repeated calls with
    the same key (e.g. one per noise level) reuse one trace instead of retracing (0.9–1.8 s each)."""
    key = (
        id(model),
        cfg.clip_norm,
        bool(np.all(np.asarray(cfg.noise_multiplier) == 0)),
        cfg.learning_rate,
        cfg.sampling_rate,
        cfg.noise_scale,
        cfg.sensitivity_factor,
        chunk,
        kw["tracked_rows"],
        kw["has_difference"],
        tuple((k, _callable_key(v)) for k, v in sorted(kw["observers"].items())),
        kw["jit_compile"],
        kw["injected"],
        None if kw["injector"] is None else _callable_key(kw["injector"]),
        kw["gathered"],
        kw.get("released"),
    )
    fn = _CACHE.get(key)
    if fn is None or fn.model is not model:
        fn = _StepFunction(model, cfg, **kw)
        _CACHE[key] = fn
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return fn


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    """Pad the trial axis to ``size`` by repeating the last trial (dropped again afterwards)."""
    if len(a) == size:
        return a
    return np.concatenate([a, np.repeat(a[-1:], size - len(a), axis=0)], axis=0)


def _rows_per_step(mask: np.ndarray, cfg: DPSGDConfig, mode: Batching) -> tuple[int, bool]:
    """Rows each trial's step evaluates (all N, or for gathered Poisson batches the padded batch
    bound) and whether Poisson batches are gathered under batching ``mode``."""
    gathered = cfg.sampling_rate < 1.0 and (
        mode == "gathered" or (mode == "auto" and cfg.sampling_rate <= 0.5)
    )
    if not gathered:
        return mask.shape[1], False
    # Gathered batches: chunks sized by the padded batch, not N (adult, q = 0.1 of 2000, 2 cores:
    # 0.16–0.19 ms per trial-step with 32–128 trials per chunk, 0.43 with 256).
    sizes = mask.sum(axis=1)
    return poisson_batch_bound(int(sizes.max()) if len(mask) else 0, cfg.sampling_rate), True


def _layout(
    model: Model,
    mask: np.ndarray,
    cfg: DPSGDConfig,
    chunk_size: int | None,
    strategy: Strategy | StrategyName,
    batching: Batching,
) -> tuple[int, int, bool]:
    """Chunk size, number of chunks and whether Poisson batches are gathered (see :func:`train_trials`)."""
    T = len(mask)
    if isinstance(strategy, str):
        if strategy == "auto":
            strat = select_strategy(model, rows_per_step=_rows_per_step(mask, cfg, batching)[0])
        elif strategy in ("trials", "groups", "single"):
            strat = Strategy(strategy, {"trials": None, "groups": 8, "single": 1}[strategy])
        else:
            raise ValueError(f"strategy must be auto, trials, groups or single, got {strategy!r}")
    else:
        strat = strategy
    mode = batching if batching != "auto" else strat.batching
    rows_per_step, gathered = _rows_per_step(mask, cfg, mode)
    size = chunk_size or strat.chunk_size or default_chunk_size(model, rows_per_step, gathered=gathered)
    num_chunks = max(1, math.ceil(T / size))
    size = math.ceil(T / num_chunks) if T else 0
    return size, num_chunks, gathered


def chunk_layout(
    model: Model,
    member_mask: np.ndarray,
    cfg: DPSGDConfig,
    chunk_size: int | None = None,
    strategy: Strategy | StrategyName = "auto",
    batching: Batching = "auto",
) -> tuple[int, int]:
    """``(trials per chunk, number of chunks)`` that :func:`train_trials` uses for these arguments;
    chunk ``c`` holds trials ``c·size … min(T, (c+1)·size) − 1``."""
    size, num_chunks, _ = _layout(model, np.asarray(member_mask), cfg, chunk_size, strategy, batching)
    return size, num_chunks


def train_trials(
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: DPSGDConfig,
    seed: int = 0,
    *,
    tracked: TrackedRecords | None = None,
    observers: Mapping[str, Observer] | None = None,
    trial_data: Mapping[str, np.ndarray] | None = None,
    init_params: Sequence[np.ndarray] | None = None,
    injected: InjectedGradient | None = None,
    injector: Injector | None = None,
    injector_gate: np.ndarray | None = None,
    chunk_size: int | None = None,
    strategy: Strategy | StrategyName = "auto",
    batching: Batching = "auto",
    jit_compile: bool | None = None,
    steps_per_call: int = 50,
    desc: str = "train trials",
    chunks: range | None = None,
    released: Sequence[int] | None = None,
) -> TrainResult:
    """Train ``T = len(member_mask)`` models with DP-SGD (Abadi et al. 2016, Algorithm 1), each on
    its masked subset of ``X``.

    ``member_mask[t, n]`` says whether example n belongs to trial t's training set.
    ``init_params`` (list of ``[T, ...]``) overrides the seeded Glorot initialisation.
    ``trial_data`` holds per-trial arrays ``[T, ...]`` that observers read from the step state.
    ``injected`` adds a crafted gradient to chosen trials' sums (a gradient canary); ``injector``
    is called every step inside the compiled step and its per-trial output, clipped to C, enters
    the trials where ``injector_gate`` [T] (default all 1) is 1, with probability q under Poisson
    sampling (an adaptive poison).

    ``strategy`` groups trials into compiled chunks ("auto": :func:`select_strategy`; "trials",
    "groups" (8 trials per chunk) or "single", or a :class:`Strategy`); ``chunk_size`` overrides
    its chunk size. ``batching`` forms Poisson batches by gathering each trial's sampled rows
    ("gathered", cost ∝ q·N; the default for q ≤ 0.5) or by masking all N rows ("masked"); both
    select the same batches from the same draws and give the same update up to float rounding.
    XLA compilation is off by default (it measured slower on CPU) and can be requested with
    ``jit_compile``. Up to ``steps_per_call`` steps run inside one compiled while loop.

    Results are reproducible for a fixed ``seed``, chunk size and ``jit_compile`` (XLA's stateless
    RNG draws different numbers), and independent of the number of intra-op threads; initial
    weights depend only on ``seed`` and the trial index.

    ``chunks`` (a range of global chunk indices of :func:`chunk_layout`) trains only those chunks'
    trials — a shard (:mod:`dpaudit.training.shards`); the arguments stay those of the whole run,
    so each chunk draws the same numbers, and shards concatenated in chunk order equal one call.

    ``released`` (flat parameter coordinates; learning rate 0 only) makes the trainer release the
    privatized sum at those K coordinates and nothing else. With learning rate 0 θ never moves, so
    what a step reveals is its privatized sum, and an observer that reads K coordinates sees exactly
    these: every phase runs as usual (Poisson batch, per-example norms over all parameters,
    clipping, injection with probability q), but the clipped sum and the Gaussian noise are formed
    at the K coordinates only, instead of drawing P noise values per trial and step to keep K (Nasr
    et al. §IV-F, the malicious-dataset adversary). Same distribution at those coordinates, a
    different random stream than a full step. Dense layers only; not with tracked records, an
    injector or a clipped injected gradient.
    """
    X = np.asarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.int32)
    mask = np.asarray(member_mask)
    if mask.ndim != 2 or mask.shape[1] != len(X):
        raise ValueError(f"member_mask must have shape [T, {len(X)}], got {mask.shape}")
    if len(y) != len(X):
        raise ValueError(f"X has {len(X)} rows but y has {len(y)}")
    if tuple(X.shape[1:]) != model.input_shape:
        raise ValueError(f"X rows have shape {X.shape[1:]}, model {model.name} expects {model.input_shape}")
    if tracked is not None and any(not 0 <= r < len(X) for r in tracked.rows):
        raise ValueError(f"tracked rows {tracked.rows} must index X (0..{len(X) - 1})")
    if cfg.noise_scale == "local" and (tracked is None or tracked.difference is None):
        raise ValueError("noise_scale='local' needs TrackedRecords with a difference vector")
    if batching not in ("auto", "masked", "gathered"):
        raise ValueError(f"batching must be 'auto', 'masked' or 'gathered', got {batching!r}")
    T = len(mask)
    z_all = np.broadcast_to(np.asarray(cfg.noise_multiplier, dtype=np.float32), (T,)).copy()
    sizes = mask.sum(axis=1).astype(np.float32)
    if cfg.normalizer is not None:
        norm_all = np.full(T, cfg.normalizer, dtype=np.float32)
    else:
        norm_all = np.maximum(cfg.sampling_rate * sizes, 1.0).astype(np.float32)
    w_all = tracked.weights(T) if tracked is not None else np.zeros((T, 0), np.float32)
    params0 = list(init_params) if init_params is not None else model.init(T, seed)
    if len(params0) != len(model.param_shapes):
        raise ValueError(f"init_params has {len(params0)} tensors, model needs {len(model.param_shapes)}")
    tdata = {k: np.asarray(v) for k, v in (trial_data or {}).items()}
    for k, v in tdata.items():
        if len(v) != T:
            raise ValueError(f"trial_data[{k!r}] has {len(v)} rows, expected {T}")
    if jit_compile is None:
        # Measured on 2 CPU cores (adult MLP, 1000 trials × 30 steps): 8.4 s plain vs 10.6 s with
        # XLA; XLA also slows convolutions on CPU. Pass True to try it elsewhere (e.g. a GPU).
        jit_compile = False

    size, num_chunks, gathered = _layout(model, mask, cfg, chunk_size, strategy, batching)
    selected = range(num_chunks) if chunks is None else chunks
    if selected.step != 1 or not 0 <= selected.start <= selected.stop <= num_chunks:
        raise ValueError(f"chunks must be a contiguous range within 0..{num_chunks}, got {chunks!r}")

    hooks: dict[str, Any] = {}
    inj_key = None
    inj_grads: list[np.ndarray] = []
    if injected is not None:
        shapes = [(T, *s) if injected.per_trial else s for s in model.param_shapes]
        if len(injected.grads) != len(model.param_shapes) or any(
            tuple(np.shape(g)) != s for g, s in zip(injected.grads, shapes, strict=True)
        ):
            raise ValueError(f"injected gradient shapes must be {shapes}")
        if injected.start_step < 0:
            raise ValueError(f"injected.start_step must be ≥ 0, got {injected.start_step}")
        inj_w = injected.effective_weights(T)
        inj_grads = [np.asarray(g, dtype=np.float32) for g in injected.grads]
        inj_key = (injected.per_trial, injected.clip, int(injected.start_step))
    released_t: tuple[int, ...] | None = None
    if released is not None:
        released_t = tuple(int(c) for c in released)
        if cfg.learning_rate != 0:
            raise ValueError(
                f"released coordinates need learning_rate 0 (got {cfg.learning_rate}): with a moving "
                "model every coordinate's noise enters θ"
            )
        if not released_t or len(set(released_t)) != len(released_t):
            raise ValueError(f"released must be distinct flat coordinates, got {list(released_t)}")
        if min(released_t) < 0 or max(released_t) >= model.num_params:
            raise ValueError(
                f"released coordinates must lie in 0..{model.num_params - 1}, got {list(released_t)}"
            )
        if tracked is not None or injector is not None or (injected is not None and injected.clip):
            raise ValueError("released coordinates do not support tracked records, an injector or clip=True")
        if inj_grads:
            flat = [np.reshape(g, (T, -1) if injected.per_trial else (-1,)) for g in inj_grads]  # type: ignore[union-attr]
            inj_grads = [np.concatenate(flat, axis=-1)[..., list(released_t)]]
    if injector is not None:
        gate = np.ones(T, np.float32) if injector_gate is None else np.asarray(injector_gate, np.float32)
        if gate.shape != (T,):
            raise ValueError(f"injector_gate must have shape [{T}], got {gate.shape}")
    elif injector_gate is not None:
        raise ValueError("injector_gate needs an injector")

    stepper = _get_step_function(
        model,
        cfg,
        size,
        tracked_rows=tuple(tracked.rows) if tracked else (),
        has_difference=tracked is not None and tracked.difference is not None,
        observers=observers or {},
        jit_compile=jit_compile,
        injected=inj_key,
        injector=injector,
        gathered=gathered,
        released=released_t,
    )
    Xt = tf.constant(X)
    yt = tf.constant(y)
    seed_t = tf.constant(seed, tf.int64)
    final: list[list[np.ndarray]] = [[] for _ in params0]
    records: dict[str, list[np.ndarray]] = {}
    selected_trials = min(T, selected.stop * size) - min(T, selected.start * size)
    bar = progress(desc=desc, total=selected_trials * cfg.steps, unit="trial-step")
    fn = stepper.get()
    for ci in selected:
        lo, hi = ci * size, min(T, (ci + 1) * size)
        if lo >= hi:
            break
        n = hi - lo
        params = [tf.constant(_pad(np.asarray(p[lo:hi], dtype=np.float32), size)) for p in params0]
        m = tf.constant(_pad(mask[lo:hi].astype(np.float32), size))
        z = tf.constant(_pad(z_all[lo:hi], size))
        norm = tf.constant(_pad(norm_all[lo:hi], size))
        td = {k: tf.constant(_pad(v[lo:hi], size)) for k, v in tdata.items()}
        w = tf.constant(_pad(w_all[lo:hi], size))
        if injected is not None:
            hooks["injected_weights"] = tf.constant(_pad(inj_w[lo:hi], size))
            hooks["injected_grads"] = [
                tf.constant(_pad(g[lo:hi], size) if injected.per_trial else g) for g in inj_grads
            ]
        if injector is not None:
            hooks["injector_gate"] = tf.constant(_pad(gate[lo:hi], size))
        chunk_records: dict[str, list[np.ndarray]] = {}
        for first in range(0, cfg.steps, steps_per_call):
            block = min(steps_per_call, cfg.steps - first)
            params, rec = fn(
                seed_t, tf.constant(ci, tf.int64), params, Xt, yt, m, z, norm,
                tf.constant(first, tf.int64), tf.constant(block, tf.int32), w, td, hooks,
            )  # fmt: skip
            for k, v in rec.items():
                chunk_records.setdefault(k, []).append(np.moveaxis(v.numpy(), 0, 1)[:n])
            bar.update(n * block)
        for i, p in enumerate(params):
            final[i].append(p.numpy()[:n])
        for k, v in chunk_records.items():
            records.setdefault(k, []).append(np.concatenate(v, axis=1))
    bar.close()
    out_params = [
        np.concatenate(f, axis=0) if f else np.zeros((0, *s), np.float32)
        for f, s in zip(final, model.param_shapes, strict=True)
    ]
    return TrainResult(
        params=out_params,
        records={k: np.concatenate(v, axis=0) for k, v in records.items()},
        config=cfg,
    )


def loss_observer(rows: Sequence[int]) -> Observer:
    """Observer recording the losses ``[T, len(rows)]`` of given example rows every step (e.g. a
    canary's loss, Nasr et al. §IV)."""
    idx = tf.constant(list(rows), dtype=tf.int32)

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        return {"": tf.gather(state.losses, idx, axis=1)}

    return observe


def privatized_sum_observer(coordinates: Sequence[int]) -> Observer:
    """Observer recording the privatized (noisy) sum g̃ = Σ clip(g) + injections + σ·ξ ``[T, K]`` at
    K flat coordinates of the parameter vector (parameters flattened in order and concatenated),
    every step — the view of Nasr et al.'s Protocol 4 at the canary coordinates (§IV-E/F), without
    keeping weight or gradient histories."""
    coords = [int(c) for c in coordinates]
    if any(c < 0 for c in coords):
        raise ValueError("coordinates must be non-negative flat indices")

    def observe(state: StepState) -> dict[str, tf.Tensor]:
        if state.released is not None:  # one [T, K] tensor at the released coordinates
            missing = [c for c in coords if c not in state.released]
            if missing:
                raise ValueError(
                    f"coordinates {missing} are not among the released ones {list(state.released)}"
                )
            positions = [state.released.index(c) for c in coords]
            return {"": tf.gather(state.privatized_sum[0], tf.constant(positions, tf.int32), axis=1)}
        sizes = [math.prod(p.shape[1:]) for p in state.privatized_sum]
        offsets = np.cumsum([0, *sizes])
        if coords and max(coords) >= offsets[-1]:
            raise ValueError(f"coordinate {max(coords)} is out of range ({offsets[-1]} parameters)")
        parts, order = [], []
        for i, g in enumerate(state.privatized_sum):
            local = [c - offsets[i] for c in coords if offsets[i] <= c < offsets[i + 1]]
            if local:
                flat = tf.reshape(g, [tf.shape(g)[0], -1])
                parts.append(tf.gather(flat, tf.constant(local, tf.int32), axis=1))
                order.extend(c for c in coords if offsets[i] <= c < offsets[i + 1])
        if not parts:
            return {"": tf.zeros([tf.shape(state.sigma)[0], 0])}
        values = tf.concat(parts, axis=1)
        perm = [order.index(c) for c in coords]  # back to the requested order
        return {"": tf.gather(values, tf.constant(perm, tf.int32), axis=1)}

    return observe
