"""Watch every step of the user's own Keras training, never change it, and write a :class:`Transcript`.

Three read-only taps, installed when ``fit`` starts:

* ``model.train_step`` is wrapped to copy the batch it receives (to see which canaries and how many
  records the user's loader delivered) and then runs the user's own step unchanged;
* ``optimizer.apply_gradients`` is wrapped to copy the privatized gradient it receives on the inert
  rows of the first dense layer (the tap works for SGD, Adam, TF Privacy's DP optimizers and
  hand-written steps that call it), with the learning rate and step count the optimizer is about to use;
* a callback computes, at each step's start, every canary's gradient at the current iterate θ_t (TF's
  ``GradientTape.jacobian``, vectorised), and at its end turns the observed gradient — or, when
  ``apply_gradients`` never ran, minus the change of the inert weights — into the statistics of
  :mod:`dpaudit.training_audit.transcript`.

The tap's assumption, that the gradient handed to ``apply_gradients`` is the privatized release, is
checked at every step (:mod:`dpaudit.training_audit.tap`): the optimizer's update of that gradient,
replayed on
the audited weights, must be how they moved. Where it is not (noise or clipping inside the optimizer,
as Opacus does), the transcript is built from the weights' change instead (source ``"iterates"``).
The layer that reads the input is found in nested and subclassed models
(:mod:`dpaudit.training_audit.input_layer`).

Nothing is added to any gradient: canaries reach the model only through the user's batches.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from dpaudit.training_audit.canaries import CanaryDesign
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.input_layer import PASSTHROUGH_LAYERS, first_dense_kernel
from dpaudit.training_audit.pergrad import chain_functions, dense_chain, jacobian_functions
from dpaudit.training_audit.stepstats import canary_statistics, residual_statistics
from dpaudit.training_audit.tap import TOLERANCE, TapVerifier, current_learning_rate
from dpaudit.training_audit.transcript import Transcript

__all__ = [
    "PASSTHROUGH_LAYERS",
    "StepObserver",
    "first_dense_kernel",
    "microbatches",
    "per_example_loss",
    "stochastic_layers",
]
#: Layers whose training output is random or depends on the rest of the batch: with one of them the
#: clipped sum cannot be recomputed exactly and the residual check is skipped (and said so).
STOCHASTIC = ("Dropout", "GaussianNoise", "GaussianDropout", "AlphaDropout", "BatchNormalization")
#: Canaries whose gradient the callback computes at once (bounds the jacobian's memory).
CHUNK = 256
#: Target median gradient norm of a canary at θ_0, in units of C: "large enough to be clipped".
CLIP_RATIO = 4.0


def microbatches(model: Any) -> int | None:
    """TF Privacy's ``num_microbatches`` on the optimizer or the model (``None``: per-example clipping)."""
    for owner in (getattr(model, "optimizer", None), model):
        value = getattr(owner, "_num_microbatches", None)
        if value is not None:
            return int(value)
    return None


def stochastic_layers(model: Any) -> list[str]:
    """Names of the layers whose training-mode output is random or batch-dependent (see STOCHASTIC)."""
    found = []
    for layer in model.submodules:
        name = type(layer).__name__
        if any(name.endswith(kind) for kind in STOCHASTIC) or name.startswith("Random"):
            found.append(f"{name} {getattr(layer, 'name', '')!r}")
    return found


def per_example_loss(model: Any, loss: Any = None) -> Any:
    """The model's compiled loss (or ``loss``) with no reduction: one value per example."""
    import tensorflow as tf

    loss = loss if loss is not None else model.loss
    if loss is None:
        raise ValueError("the model has no compiled loss; pass loss= to the auditor")
    if isinstance(loss, tf.keras.losses.Loss):
        return loss.__class__.from_config({**loss.get_config(), "reduction": "none"})
    if isinstance(loss, str):
        return tf.keras.losses.get(loss)
    return loss


def _batch_key(x: np.ndarray, y: np.ndarray) -> np.uint64:
    """A 64-bit digest of the multiset of (x, y) rows: the rows' bytes in sorted order, hashed once."""
    n = x.shape[0]
    rows = np.concatenate(
        [np.ascontiguousarray(a).view(np.uint8).reshape(n, a.nbytes // max(n, 1)) for a in (x, y)], axis=1
    )
    ordered = rows[np.lexsort(rows.T[::-1])] if n else rows
    return np.frombuffer(hashlib.blake2b(ordered.tobytes(), digest_size=8).digest(), dtype=np.uint64)[0]


class StepObserver:
    """Taps one model's training (see the module docstring) and accumulates its transcript."""

    def __init__(
        self, design: CanaryDesign, declared: DeclaredDPSGD, table_x: Any, table_y: Any, included: np.ndarray
    ) -> None:
        self.design, self.declared = design, declared
        self.table_x, self.table_y, self.included = table_x, table_y, included
        self.scale: float | None = None
        self._model: Any = None
        self._steps: list[dict[str, Any]] = []
        self._epoch = -1
        f = design.features
        self._rows = np.concatenate([f.canary, f.probe])
        self._n_canary_rows = f.canary.size
        self._canary_index: dict[bytes, int] = {}

    # ------------------------------------------------------------------------------------ install

    def install(self, model: Any, loss: Any = None) -> None:
        """Tap ``model`` (once) and set the canaries' scale from their gradients at θ_0."""
        import tensorflow as tf

        if self._model is not None:
            if model is not self._model:
                raise ValueError("this auditor already watches another model; use one auditor per run")
            return
        if int(getattr(model, "_steps_per_execution", None) or 1) > 1:
            raise ValueError("the audit observes every step: compile with steps_per_execution=1")
        f = self.design.features
        self._targets = self.design.targets()
        parts = microbatches(model)
        if parts is not None and parts > 1:
            raise ValueError(
                f"the DP optimizer or model splits each batch into num_microbatches={parts} microbatches: "
                f"TF Privacy then needs every batch size to be a multiple of {parts}, but canaries join "
                "batches at random (each with probability q), so TensorFlow would fail inside the optimizer; "
                "and it clips each microbatch's mean, not each record. Set num_microbatches=None: TF Privacy "
                "then clips each example on its own, the same DP-SGD as num_microbatches equal to the batch "
                "size, which is what the declaration describes"
            )
        sample = np.zeros_like(self.design.inputs(1.0)[:2])  # valid for any first layer (token ids too)
        self.kernel = first_dense_kernel(model, f.features, sample, self._rows)
        self._loss = per_example_loss(model, loss)
        self._variables = list(model.trainable_variables)
        self._kernel_index = next(i for i, v in enumerate(self._variables) if v.ref() == self.kernel.ref())
        self._index = {v.ref(): i for i, v in enumerate(self._variables)}
        self._batch_x = tf.Variable(
            tf.zeros([0, *f.input_shape], f.x_dtype), shape=tf.TensorShape(None), trainable=False
        )
        self._batch_y = tf.Variable(tf.zeros([0], f.y_dtype), shape=tf.TensorShape(None), trainable=False)
        self._grads = [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False) for v in self._variables]
        self._fired = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._lr = tf.Variable(0.0, dtype=tf.float32, trainable=False)
        self._iteration = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._clipped = (
            None
            if stochastic_layers(model)
            else [tf.Variable(tf.zeros(v.shape, tf.float32), trainable=False) for v in self._variables]
        )
        self._model = model
        canary_fn, clipped_sum = self._gradient_functions(model)
        self._grad_fn = tf.function(canary_fn, reduce_retracing=True)

        original_step = model.train_step

        def train_step(data: Any) -> Any:
            x, y, _ = tf.keras.utils.unpack_x_y_sample_weight(data)
            self._batch_x.assign(x)
            self._batch_y.assign(y)
            if self._clipped is not None:
                for var, value in zip(self._clipped, clipped_sum(x, y), strict=True):
                    var.assign(value)
            return original_step(data)

        optimizer = model.optimizer
        original_apply = optimizer.apply_gradients
        self._verifier = TapVerifier(optimizer, self.kernel)
        try:
            current_learning_rate(optimizer)
            readable = True
        except (AttributeError, TypeError, ValueError):
            readable = False  # no learning rate to replay: only the support test runs
            self._verifier.kind = "unknown"
            self._verifier.description = self._verifier._describe(type(optimizer).__name__, True)

        def apply_gradients(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            for grad, var in pairs:
                i = self._index.get(var.ref())
                if grad is not None and i is not None:
                    self._grads[i].assign(tf.cast(tf.convert_to_tensor(grad), tf.float32))
                    if i == self._kernel_index:
                        self._fired.assign_add(1)
                        if readable:
                            self._lr.assign(current_learning_rate(optimizer))
                            self._iteration.assign(tf.cast(optimizer.iterations, tf.int64))
            return original_apply(pairs, *args, **kwargs)

        model.train_step = train_step
        optimizer.apply_gradients = apply_gradients
        model.make_train_function(force=True)
        self.scale = self._calibrate()
        self._inputs = self.design.inputs(self.scale)
        keys = self._inputs.reshape(self._inputs.shape[0], -1)[:, f.canary]
        self._canary_index = {row.tobytes(): j for j, row in enumerate(keys)}
        self.table_x.assign(self._inputs[self.included])

    def _gradient_functions(self, model: Any) -> tuple[Any, Any]:
        """(canary, clipped_sum) functions: the Dense-chain path where it agrees with the jacobian path
        on the canaries at θ_0 (relative 1e-4), else the jacobian path
        (:mod:`dpaudit.training_audit.pergrad`)."""
        import tensorflow as tf

        rows = tf.constant(self.design.features.canary, tf.int32)
        clip = float(self.declared.clip_norm)
        generic = jacobian_functions(model, self._loss, self._kernel_index, rows, clip)
        layers = dense_chain(model)
        if layers is None or layers[0].kernel.ref() != self.kernel.ref():
            return generic
        fast = chain_functions(model, layers, self._loss, rows, clip)
        x, y = self.design.inputs(1.0)[:32], self._targets[:32]
        (s_ref, n_ref), (s_fast, n_fast) = generic[0](x, y), fast[0](x, y)
        agree = all(
            np.allclose(np.asarray(b), np.asarray(a), rtol=1e-4, atol=1e-6 * float(np.max(np.abs(a)) + 1e-30))
            for a, b in ((s_ref, s_fast), (n_ref, n_fast))
        )
        return fast if agree else generic

    def canary_gradients(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every canary's gradient on the canary rows [m, |S|] and its full norm [m], at the current θ,
        for canary inputs ``x`` (the design's at some scale)."""
        y = self._targets
        parts = [self._grad_fn(x[i : i + CHUNK], y[i : i + CHUNK]) for i in range(0, x.shape[0], CHUNK)]
        on_s = np.concatenate([np.asarray(p[0], dtype=np.float64) for p in parts])
        norms = np.concatenate([np.asarray(p[1], dtype=np.float64) for p in parts])
        return on_s, norms

    def _calibrate(self) -> float:
        """The canaries' input scale, from their gradient norms at θ_0 over a ×2 grid of scales.

        The smallest scale whose median norm is ≥ 4·C ("large enough to be clipped"); where the loss
        saturates first (a large input makes half the canaries confidently right: their gradient
        vanishes), the scale of the largest median, if that is still above C.
        """
        target, clip = CLIP_RATIO * self.declared.clip_norm, self.declared.clip_norm
        scales = 2.0 ** np.arange(-8, 25)
        medians = []
        for scale in scales:
            medians.append(float(np.median(self.canary_gradients(self.design.inputs(float(scale)))[1])))
            if medians[-1] >= target:
                return float(scale)
        best = int(np.argmax(medians))
        if medians[best] <= clip:
            raise ValueError(
                f"the canaries' gradients never exceed C = {clip:g} (largest median norm {medians[best]:.3g} "
                "over input scales 2^-8..2^24): the loss hardly responds to the inert features"
            )
        return float(scales[best])

    # -------------------------------------------------------------------------------- every step

    def epoch_begin(self) -> None:
        self._epoch += 1

    def batch_begin(self) -> None:
        import tensorflow as tf

        self._on_s, self._norms = self.canary_gradients(self._inputs)
        self._before = [v.numpy().astype(np.float64) for v in self._variables]
        self._fired_before = int(self._fired.numpy())
        for g in self._grads:
            g.assign(tf.zeros_like(g))

    def batch_end(self) -> None:
        fired = int(self._fired.numpy()) > self._fired_before
        after = [v.numpy().astype(np.float64) for v in self._variables]
        moved = [b - a for b, a in zip(self._before, after, strict=True)]
        tapped = [g.numpy().astype(np.float64) for g in self._grads] if fired else None
        mismatch = self._tap_mismatch(tapped, after) if tapped is not None else float("nan")
        x = np.asarray(self._batch_x.numpy())
        y = np.asarray(self._batch_y.numpy())
        flat = x.reshape(x.shape[0], -1)
        canary_features = self.design.features.canary
        is_canary = np.any(flat[:, canary_features] != 0, axis=1)
        present = np.zeros(self._on_s.shape[0], dtype=bool)
        for row in flat[is_canary][:, canary_features]:
            j = self._canary_index.get(row.tobytes())
            if j is not None:
                present[j] = True
        real = ~is_canary
        clipped = [c.numpy() for c in self._clipped] if self._clipped is not None else None
        stats: dict[str, Any] = {"iterates": self._statistics(moved, present, clipped)}
        if tapped is not None:
            stats["gradients"] = self._statistics(tapped, present, clipped)
        stats |= {
            "mismatch": mismatch,
            "fired": fired,
            "batch_rows": int(real.sum()),
            "canary_rows": int(is_canary.sum()),
            "epoch": max(self._epoch, 0),
            "batch_key": _batch_key(x[real], y[real]),
        }
        self._steps.append(stats)

    def _statistics(self, update: list[np.ndarray], present: np.ndarray, clipped: Any) -> dict[str, Any]:
        """One step's transcript statistics with ``update`` as the observed privatized gradient."""
        declared = self.declared
        stats = canary_statistics(
            update[self._kernel_index][self._rows],
            self._n_canary_rows,
            self._on_s,
            self._norms,
            present,
            declared.noise_multiplier,
            declared.clip_norm,
        )
        if clipped is not None:
            probe_rows = self.design.features.probe
            stats["residual"] = residual_statistics(
                update, clipped, self._kernel_index, probe_rows, stats["s_hat"]
            )
        return stats

    def _tap_mismatch(self, tapped: list[np.ndarray], after: list[np.ndarray]) -> float:
        """How far the tapped gradient fails to explain the audited weights' change (:mod:`.tap`)."""
        k, rows = self._kernel_index, self._rows
        return self._verifier.step(
            tapped[k][rows],
            self._before[k][rows],
            after[k][rows],
            lr=float(self._lr.numpy()),
            iteration=int(self._iteration.numpy()),
            kernel_norm=float(np.linalg.norm(tapped[k])),
            global_norm=float(np.sqrt(sum(float(np.vdot(g, g)) for g in tapped))),
        )

    # ---------------------------------------------------------------------------------- results

    @property
    def steps_observed(self) -> int:
        return len(self._steps)

    @property
    def hook_fired(self) -> bool:
        """Whether ``apply_gradients`` received the kernel's gradient at every observed step."""
        return bool(self._steps) and all(s["fired"] for s in self._steps)

    @property
    def tap_explains(self) -> bool:
        """Whether the tap saw every step and its gradient explained every tested step's update."""
        mismatch = np.asarray([s["mismatch"] for s in self._steps], dtype=np.float64)
        return self.hook_fired and not bool(np.any(mismatch[np.isfinite(mismatch)] > TOLERANCE))

    def transcript(self) -> Transcript:
        """The run so far as a :class:`Transcript`: from the tapped gradients if the tap saw every step
        and explained every update (:mod:`dpaudit.training_audit.tap`), else from the weights' change."""
        if not self._steps:
            raise ValueError("no training step was observed: pass audit.callback() to fit()")
        source = "gradients" if self.tap_explains else "iterates"
        steps = [s[source] | s for s in self._steps]

        def stack(key: str, dtype: Any = np.float64) -> np.ndarray:
            return np.asarray([s[key] for s in steps], dtype=dtype)

        fired = any(s["fired"] for s in steps)
        tap_fields = (
            {"update_mismatch": stack("mismatch"), "update_rule": self._verifier.description} if fired else {}
        )
        return Transcript(
            source=source,
            projections=stack("projections"),
            expected=stack("expected"),
            present=stack("present", bool),
            signal=stack("signal"),
            signal_observed=stack("signal_observed"),
            probe=stack("probe"),
            batch_rows=stack("batch_rows", np.int64),
            canary_rows=stack("canary_rows", np.int64),
            epoch=stack("epoch", np.int64),
            batch_keys=stack("batch_key", np.uint64),
            **self._residual_fields(steps),
            **tap_fields,
        )

    def _residual_fields(self, steps: list[dict[str, Any]]) -> dict[str, Any]:
        if self._clipped is None:
            return {"stochastic_layers": tuple(stochastic_layers(self._model))}
        f = self.design.features
        dims = [int(np.prod(v.shape)) for v in self._variables]
        dims[self._kernel_index] -= f.probe.size * int(self.kernel.shape[1])
        return {
            "residual": np.asarray([s["residual"] for s in steps], dtype=np.float64),
            "residual_dims": np.asarray(dims, dtype=np.int64),
            "residual_names": tuple(v.name for v in self._variables),
        }
