"""Planning, before any step runs: strategy, chunk layout, Poisson batch bound, released coordinates.
In: the model, the membership mask [T, N], the configuration and the strategy/batching asked for.
Out: a :class:`Strategy`, (trials per chunk, chunks, gathered?) and where released coordinates live."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dpaudit.training.dpsgd.config import Batching, DPSGDConfig, StrategyName
from dpaudit.training.models import Conv2D, Dense, Model


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


#: Largest chunk for released coordinates (learning rate 0) when every trial starts from the same
#: θ: a step then evaluates no model at all (the rows' released gradients are loop invariants, see
#: :class:`~dpaudit.training.dpsgd.step._ReleasedRows`), only a batch draw, a gather and a weighted
#: sum, so op dispatch is the cost and large chunks amortise it.
RELEASED_CHUNK = 1024


def released_chunk_size(model: Model, num_examples: int, shared_params: bool) -> int:
    """Trials per chunk for released coordinates: ``RELEASED_CHUNK`` (at most ≈ 2·10⁶ batch draws a
    step) when every trial starts from the same θ (one trial's pass over the ``num_examples`` rows
    serves the chunk), else the memory budget of one pass over all rows for every trial."""
    if shared_params:
        return max(16, min(RELEASED_CHUNK, int(2e6 // max(num_examples, 1))))
    return default_chunk_size(model, num_examples)


def poisson_batch_bound(size: int, q: float) -> int:
    """A padded batch size that a Binomial(size, q) batch exceeds with probability < 1e-6 (mean +
    5 sd + 2): the memory budget of gathered batches is planned with it. The batch itself is never
    truncated: a larger draw just makes that step's tensors larger."""
    mean = size * q
    return int(min(size, math.ceil(mean + 5.0 * math.sqrt(max(mean * (1.0 - q), 1e-12)) + 2)))


@dataclass(frozen=True)
class _ReleasedPlan:
    """Where K released flat coordinates live: per (layer, kind) group two index vectors, and
    ``order``, the permutation from the groups' concatenation back to the requested order. Kinds:
    ``kernel``/``bias`` of a dense layer (``first`` the kernel rows i, ``second`` the output units
    o), ``conv_kernel`` (``first`` the entry's position in the kernel flattened as
    ``[k·k·c_in·filters]``, ``second`` its filter) and ``conv_bias`` (``second`` the filter)."""

    parts: tuple[tuple[int, str, tf.Tensor, tf.Tensor], ...]
    order: tf.Tensor


def _released_plan(model: Model, released: Sequence[int]) -> _ReleasedPlan:
    """Map flat parameter coordinates (parameters flattened in order and concatenated) onto dense
    layers' kernel entries (i, o) and bias entries o, and convolutions' kernel entries (their flat
    position in the Keras-layout kernel) and bias entries o (see
    :meth:`_StepFunction.released_rows`)."""
    trainable = [layer for layer in model.layers if isinstance(layer, Dense | Conv2D)]
    offsets = np.cumsum([0, *(math.prod(s) for s in model.param_shapes)])
    groups: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
    for pos, c in enumerate(released):
        j = int(np.searchsorted(offsets, c, side="right")) - 1
        layer, local = j // 2, int(c - offsets[j])
        conv = isinstance(trainable[layer], Conv2D)
        if j % 2 == 0:
            units = model.param_shapes[j][-1]
            entry = (pos, local if conv else local // units, local % units)
            groups.setdefault((layer, "conv_kernel" if conv else "kernel"), []).append(entry)
        else:
            groups.setdefault((layer, "conv_bias" if conv else "bias"), []).append((pos, 0, local))
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


@dataclass(frozen=True)
class _Layout:
    """How :func:`train_trials` splits its trials: ``size`` trials per chunk, ``num_chunks`` chunks,
    whether Poisson batches are ``gathered``, and whether every trial starts from the same θ
    (``shared_params``, looked at only for released coordinates)."""

    size: int
    num_chunks: int
    gathered: bool
    shared_params: bool


#: The arguments of :func:`train_trials` that decide its chunks: what :func:`chunk_layout` takes, and
#: what a caller that plans shards of a ``train_trials`` call must pass on.
LAYOUT_KEYWORDS = ("chunk_size", "strategy", "batching", "released", "init_params")


def _layout(
    model: Model,
    mask: np.ndarray,
    cfg: DPSGDConfig,
    chunk_size: int | None = None,
    strategy: Strategy | StrategyName = "auto",
    batching: Batching = "auto",
    released: Sequence[int] | None = None,
    init_params: Sequence[np.ndarray] | None = None,
) -> _Layout:
    """The chunk layout of a :func:`train_trials` call with these arguments. With ``released``
    coordinates (learning rate 0) the "auto" strategy batches trials by :func:`released_chunk_size`."""
    T = len(mask)
    shared_params = released is not None and same_params(init_params)
    if isinstance(strategy, str):
        if strategy == "auto" and released is not None:
            strat = Strategy("trials", released_chunk_size(model, mask.shape[1], shared_params))
        elif strategy == "auto":
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
    return _Layout(size, num_chunks, gathered, shared_params)


def chunk_layout(
    model: Model,
    member_mask: np.ndarray,
    cfg: DPSGDConfig,
    chunk_size: int | None = None,
    strategy: Strategy | StrategyName = "auto",
    batching: Batching = "auto",
    released: Sequence[int] | None = None,
    init_params: Sequence[np.ndarray] | None = None,
) -> tuple[int, int]:
    """``(trials per chunk, number of chunks)`` that :func:`train_trials` uses for these arguments
    (:data:`LAYOUT_KEYWORDS`); chunk ``c`` holds trials ``c·size … min(T, (c+1)·size) − 1``."""
    layout = _layout(
        model, np.asarray(member_mask), cfg, chunk_size, strategy, batching, released, init_params
    )
    return layout.size, layout.num_chunks


def same_params(init_params: Sequence[np.ndarray] | None) -> bool:
    """Whether given initial parameters (list of ``[T, ...]``) are the same for every trial (None:
    the seeded initialisation, which differs per trial)."""
    if init_params is None:
        return False
    return all(np.array_equal(np.broadcast_to(p[:1], np.shape(p)), p) for p in map(np.asarray, init_params))
