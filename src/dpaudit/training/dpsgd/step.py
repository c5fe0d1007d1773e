"""The compiled DP-SGD step: select batch → per-example norms → clip and sum → inject → noise → update.
In: seed, chunk index, parameters [T, ...], the shared examples, the chunk's masks and hook data.
Out: updated parameters and the observers' per-step records (one while loop of steps per call)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from dpaudit.training.dpsgd.config import DPSGDConfig
from dpaudit.training.dpsgd.observers import Injector, Observer, StepState, _Lazy
from dpaudit.training.dpsgd.plan import _released_plan
from dpaudit.training.layer_ops import RowStats, _blocks, shared_rows
from dpaudit.training.models import Dense, MaxPool, Model


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


@dataclass
class _Pass:
    """One forward/backward pass over a set of rows: losses, layer traces, output gradients δ,
    what the layers share between norms and sums, per-example gradient norms."""

    losses: tf.Tensor
    traces: list
    deltas: list[tf.Tensor]
    prepared: list[tuple]
    norms: tf.Tensor


def _pad_rows(X: tf.Tensor, y: tf.Tensor, member_mask: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """The examples padded with zero rows (label 0, in no trial's set) to whole blocks of
    :func:`~dpaudit.training.layer_ops.contract_examples` (the same block count and size as the
    unpadded rows). A padded row's clip weight is 0, so all it adds to any sum is exact zeros."""
    _, _, pad = _blocks(tf.shape(X)[0])
    rank = len(X.shape)
    X = tf.pad(X, [[0, pad]] + [[0, 0]] * (rank - 1))
    return X, tf.pad(y, [[0, pad]]), tf.pad(member_mask, [[0, 0], [0, pad]])


@dataclass
class _ReleasedRows:
    """Loop invariants of a step with released coordinates: with learning rate 0 θ never moves, so
    each row's per-example gradient at the K released coordinates ``values`` [S, N, K], its full
    gradient norm ``norms`` [S, N] and its loss ``losses`` [S, N] are the same at every step. S is
    the chunk's trial count, or 1 when every trial starts from the same θ (threat model F)."""

    values: tf.Tensor
    norms: tf.Tensor
    losses: tf.Tensor


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
        shared_params: bool = False,
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
        self.shared_params = shared_params
        # Max pooling's gradient runs oneDNN's kernel (≈ 0.1 ms a step on mnist, against 1–3 ms for
        # TensorFlow's) only when oneDNN's graph pass visits the forward pooling first, and its
        # visiting order through a loop's back edge varies from one process to the next. A step
        # that is its own (not inlined) function has no cycle, so the pass always sees the forward
        # op first: the same bits, the fast kernel in every process. MLP steps stay inlined (the
        # call costs them ≈ 5 %). Released steps evaluate no model.
        self.step_as_function = released is None and any(isinstance(layer, MaxPool) for layer in model.layers)
        # Full batches evaluate every row shared by all trials: the rows are padded once per call to
        # whole blocks of the sums over examples (zero rows, never in a batch), so that no step pads
        # its [T, N, ·] tensors again (a copy each: 8 % of an adult step's op time for N = 1001).
        self.pads_rows = cfg.sampling_rate >= 1.0 and released is None
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
        n_rows = None
        if self.pads_rows:
            n_rows = tf.shape(X)[0]
            X, y, member_mask = _pad_rows(X, y, member_mask)
        data = (seed, chunk, X, y, member_mask, z, normalizer)
        # The shared input's row norms and blocks are loop invariants: computed once per call.
        rows = shared_rows(X) if isinstance(self.model.layers[0], Dense) else None
        released_rows = None if self.released is None else self.released_rows(params, X, y, rows)
        params, rec0 = self._step(
            *data, params, first_step, weights, trial_data, hooks, rows, released_rows, n_rows
        )
        keys = sorted(rec0)
        arrays = [
            tf.TensorArray(rec0[k].dtype, size=num_steps, element_shape=rec0[k].shape).write(0, rec0[k])
            for k in keys
        ]

        def one_step(p: list[tf.Tensor], step: tf.Tensor) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
            return self._step(*data, p, step, weights, trial_data, hooks, rows, released_rows, n_rows)

        if self.step_as_function:
            one_step = tf.function(one_step, experimental_attributes={"_noinline": True})

        def body(i: tf.Tensor, p: list[tf.Tensor], tas: list[tf.TensorArray]) -> tuple:
            step = first_step + tf.cast(i, tf.int64)
            new, rec = one_step(p, step)
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
    def per_example_norms(
        self,
        params: list[tf.Tensor],
        X: tf.Tensor,
        y: tf.Tensor,
        shared: bool,
        rows: RowStats | None = None,
    ) -> _Pass:
        """Per-example norms: forward pass, output gradients δ of every trainable layer by one
        backward pass of Σ ℓ_n, and ‖∂ℓ_n/∂θ‖ per trial and row from the layer identities
        (dense: (‖a‖² + 1)·‖δ‖²; convolution: patches) — no per-example gradient of a dense
        layer is materialised. ``X`` is shared [N, ...] or per trial [T, B, ...]; ``rows`` are the
        precomputed :class:`RowStats` of ``X``'s rows (read by a first dense layer)."""
        with tf.GradientTape() as tape:
            tape.watch(params)
            logits, traces = self.model.forward(params, X, shared=shared)
            losses = self.model.example_losses(logits, y)
            total = tf.reduce_sum(losses)
        deltas = tape.gradient(total, [tr.outputs for tr in traces])
        prepared = [
            tr.layer.prepare(tr.inputs, d, tr.shared, rows) if i == 0 and rows is not None else
            tr.layer.prepare(tr.inputs, d, tr.shared)
            for i, (tr, d) in enumerate(zip(traces, deltas, strict=True))
        ]  # fmt: skip
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

    def released_rows(
        self, params: list[tf.Tensor], X: tf.Tensor, y: tf.Tensor, rows: RowStats | None
    ) -> _ReleasedRows:
        """The released path's loop invariants (:class:`_ReleasedRows`), by one pass over all N rows
        per call: of the first trial only when every trial starts from the same θ. A dense kernel
        entry (i, o) of row n is a_{n,i} δ_{n,o}, a bias entry δ_{n,o}; a convolution's entries are
        gathered from the per-example gradients its norms form (``prepared``: kernel
        ``[S, N, k·k·c_in, filters]``, bias ``[S, N, filters]``)."""
        if self.shared_params:
            params = [p[:1] for p in params]
        pas = self.per_example_norms(params, X, y, shared=True, rows=rows)
        assert self._released_plan is not None
        columns: list[tf.Tensor] = []
        for layer, kind, first, second in self._released_plan.parts:
            if kind == "conv_kernel":
                g = pas.prepared[layer][0]
                columns.append(tf.gather(tf.reshape(g, [tf.shape(g)[0], tf.shape(g)[1], -1]), first, axis=-1))
            elif kind == "conv_bias":
                columns.append(tf.gather(pas.prepared[layer][1], second, axis=-1))
            elif kind == "bias":
                columns.append(tf.gather(pas.deltas[layer], second, axis=-1))
            else:
                tr = pas.traces[layer]
                a = tf.gather(tr.inputs, first, axis=-1)  # [N, k] shared or [S, N, k]
                d = tf.gather(pas.deltas[layer], second, axis=-1)  # [S, N, k]
                columns.append((a[None] if tr.shared else a) * d)
        values = tf.gather(tf.concat(columns, axis=2), self._released_plan.order, axis=2)
        return _ReleasedRows(values, pas.norms, pas.losses)

    def _rows_of_batch(self, x: tf.Tensor, idx: tf.Tensor) -> tf.Tensor:
        """Each trial's gathered rows ``x[t, idx[t]]`` of a released invariant ``x`` [S, N, ...]."""
        if self.shared_params:
            return tf.gather(x[0], idx)
        return tf.gather(x, idx, batch_dims=1)

    def released_sum(
        self, inv: _ReleasedRows, idx: tf.Tensor | None, weights: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Clip-and-sum at the released coordinates only: Σ_n w_n c_n g_n[K] per trial ``[T, K]``
        over the batch (``idx`` None: all N rows weighted by the batch mask; else each trial's
        gathered rows weighted by their validity), from the invariant per-row values — the same sums
        as :meth:`clip_and_sum` restricted to K coordinates, without forming the other P − K. Also
        returns the clip factors of every row [T, N]."""
        T = tf.shape(weights)[0]
        factors = self.clip_factors(inv.norms)  # [S, N]
        if idx is None:
            c, values = factors * weights, inv.values
        else:
            c, values = self._rows_of_batch(factors, idx) * weights, self._rows_of_batch(inv.values, idx)
        all_factors = tf.broadcast_to(factors, tf.stack([T, tf.shape(factors)[1]]))
        return tf.reduce_sum(values * c[..., None], axis=1), all_factors

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
        rows: RowStats | None = None,
        released_rows: _ReleasedRows | None = None,
        n_rows: tf.Tensor | None = None,
    ) -> tuple[list[tf.Tensor], dict[str, tf.Tensor]]:
        """One step; ``n_rows`` (padded rows, see ``pads_rows``) is the number of real rows, and
        what the step state shows per row is cut back to them."""
        cfg = self.cfg
        T = tf.shape(params[0])[0]
        batch_mask, idx, valid = self.select_batch(seed, chunk, step, member_mask)
        R = len(self.tracked_rows)
        if released_rows is not None:  # θ fixed: the batch's rows weighted from the invariants
            summed, all_factors = self.released_sum(released_rows, idx, batch_mask if idx is None else valid)
            clipped_sum = [summed]
            losses = tf.broadcast_to(released_rows.losses, tf.shape(all_factors))
            tracked = None
        elif idx is None:  # full batch or masked Poisson batch: every row, weighted by the mask
            pas = self.per_example_norms(params, X, y, shared=True, rows=rows)
            factors, clipped_sum = self.clip_and_sum(pas, batch_mask)
            losses = pas.losses
            all_factors = factors
            tracked = self.tracked_gradients(pas, self.rows) if R else None
        else:  # gathered Poisson batch: only the sampled rows
            batch_rows = None if rows is None else RowStats(tf.gather(rows.sq, idx), None)
            pas = self.per_example_norms(
                params, tf.gather(X, idx), tf.gather(y, idx), shared=False, rows=batch_rows
            )
            _, clipped_sum = self.clip_and_sum(pas, valid)
            full = _Lazy(lambda: self.per_example_norms(params, X, y, shared=True, rows=rows))
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
        if n_rows is not None:
            losses, batch_mask, all_factors = (t[:, :n_rows] for t in (losses, batch_mask, all_factors))
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
