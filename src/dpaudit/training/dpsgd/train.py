"""The training loop: validate the arguments, plan the chunks, run each chunk's steps in blocks.
In: model, examples X/y, membership mask [T, N], configuration, seed, hooks, optional shard range.
Out: :class:`~dpaudit.training.dpsgd.config.TrainResult` (final parameters and observer records)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from dpaudit.logs import progress
from dpaudit.training.dpsgd.cache import _get_step_function
from dpaudit.training.dpsgd.config import Batching, DPSGDConfig, InjectedGradient, TrackedRecords, TrainResult
from dpaudit.training.dpsgd.observers import Injector, Observer
from dpaudit.training.dpsgd.plan import Strategy, StrategyName, _layout
from dpaudit.training.models import Model


class TrainingStoppedError(Exception):
    """``train_trials`` was asked to stop (its ``stop`` callable returned true between step blocks)."""


def _pad(a: np.ndarray, size: int) -> np.ndarray:
    """Pad the trial axis to ``size`` by repeating the last trial (dropped again afterwards)."""
    if len(a) == size:
        return a
    return np.concatenate([a, np.repeat(a[-1:], size - len(a), axis=0)], axis=0)


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
    stop: Callable[[], bool] | None = None,
    progress_bar: bool = True,
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
    different random stream than a full step. Since θ never moves, every row's gradient at the K
    coordinates, its norm and its loss are computed once per call (once per chunk when every trial
    starts from the same θ, as in threat model F), and a step only draws its batch, weights those
    rows by their clip factors and adds noise; the "auto" strategy then batches up to
    ``RELEASED_CHUNK`` trials a chunk. Dense and convolution layers; not with tracked records, an
    injector or a clipped injected gradient.

    ``stop`` is polled before every block of steps; when it returns true the call raises
    :class:`TrainingStoppedError` (a runner that trains shards in a thread stops it this way).
    ``progress_bar=False`` keeps this call's bar off (the runner shows one bar for all shards).
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
    params0 = list(init_params) if init_params is not None else []
    if init_params is not None and len(params0) != len(model.param_shapes):
        raise ValueError(f"init_params has {len(params0)} tensors, model needs {len(model.param_shapes)}")
    tdata = {k: np.asarray(v) for k, v in (trial_data or {}).items()}
    for k, v in tdata.items():
        if len(v) != T:
            raise ValueError(f"trial_data[{k!r}] has {len(v)} rows, expected {T}")
    if jit_compile is None:
        # Measured on 2 CPU cores (adult MLP, 1000 trials × 30 steps): 8.4 s plain vs 10.6 s with
        # XLA; XLA also slows convolutions on CPU. Pass True to try it elsewhere (e.g. a GPU).
        jit_compile = False

    layout = _layout(model, mask, cfg, chunk_size, strategy, batching, released, init_params)
    size, num_chunks = layout.size, layout.num_chunks
    selected = range(num_chunks) if chunks is None else chunks
    if selected.step != 1 or not 0 <= selected.start <= selected.stop <= num_chunks:
        raise ValueError(f"chunks must be a contiguous range within 0..{num_chunks}, got {chunks!r}")
    # Seeded initial weights of the selected trials only (each trial's draw depends on the seed and
    # its index, so a shard draws exactly what one call would for its trials).
    offset = 0
    if init_params is None:
        offset = min(T, selected.start * size)
        params0 = model.init(min(T, selected.stop * size) - offset, seed, first_trial=offset)

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
        gathered=layout.gathered,
        released=released_t,
        shared_params=layout.shared_params,
    )
    Xt = tf.constant(X)
    yt = tf.constant(y)
    seed_t = tf.constant(seed, tf.int64)
    final: list[list[np.ndarray]] = [[] for _ in params0]
    records: dict[str, list[np.ndarray]] = {}
    selected_trials = min(T, selected.stop * size) - min(T, selected.start * size)
    bar = progress(desc=desc, total=selected_trials * cfg.steps, unit="trial-step", disable=not progress_bar)
    fn = stepper.get()
    for ci in selected:
        lo, hi = ci * size, min(T, (ci + 1) * size)
        if lo >= hi:
            break
        n = hi - lo
        own = slice(lo - offset, hi - offset)
        params = [tf.constant(_pad(np.asarray(p[own], dtype=np.float32), size)) for p in params0]
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
            if stop is not None and stop():
                bar.close()
                raise TrainingStoppedError(f"stopped before step {first} of chunk {ci}")
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
