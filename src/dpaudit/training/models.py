"""Models as pure functions of parameter lists with a leading trial axis.

Every parameter tensor has shape ``[T, ...]``: T independent models ("trials") are evaluated in
one vectorized computation on a shared set of examples. Each trainable layer also knows how to
compute, from its input activations ``a`` and the per-example gradient ``δ`` of the loss with
respect to its pre-activation output, the squared norm of every example's parameter gradient and
the sum of clipped per-example gradients, without materialising per-example gradients for dense
layers (norm identity ‖a δᵀ‖ = ‖a‖·‖δ‖) and, for convolutions, from input patches (k² shifted
slices) or, for inputs with few channels, one depthwise filter gradient. Forward passes of
convolutions are native convolutions, one per trial for per-trial inputs, up to ``UNROLL_TRIALS``. Sums over
examples run in fixed blocks (:func:`contract_examples`) so that results do not depend on the
number of intra-op threads. :meth:`Model.input_gradients` gives ∇_x ℓ for crafting inputs. Keras and
TF Privacy have no multi-trial layers and no Conv2D fast-clipping entry (0.9.0), hence these layers.

There is deliberately no batch normalisation: it mixes examples inside a batch, so an example's
gradient would depend on the others and per-example clipping would no longer bound one record's
influence (the DP-SGD sensitivity argument breaks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import tensorflow as tf

Activation = Literal["relu", "linear"]

# Longest inner dimension of one matmul in a sum over examples (or positions). Eigen splits a long
# inner dimension of a matmul differently for 1 and 2 intra-op threads, so sums over a thousand
# examples differed in the last bit between ``taskset -c 0`` and 2 cores; matmuls with an inner
# dimension up to 512 measured bit-identical for 1 and 2 threads, and so do reductions over an
# axis. Contracting in blocks of at most 512 and summing the blocks with ``reduce_sum`` makes
# training independent of the thread count (tests/training/test_threads.py).
CONTRACT_BLOCK = 512


def _blocks(n: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Split n rows into the fewest blocks of at most ``CONTRACT_BLOCK`` rows of equal size b:
    (blocks, b, padding rows)."""
    blocks = (n + CONTRACT_BLOCK - 1) // CONTRACT_BLOCK
    b = (n + blocks - 1) // blocks
    return blocks, b, blocks * b - n


def contract_examples(a: tf.Tensor, d: tf.Tensor, shared: bool) -> tf.Tensor:
    """Σ_n a_n d_nᵀ per trial: ``a`` [N, i] (shared) or [T, N, i], ``d`` [T, N, o] → [T, i, o].

    The example axis is split into equal blocks of at most ``CONTRACT_BLOCK`` rows (zero-padded),
    each block contracted by one matmul and the blocks summed by a reduction, so the result does
    not depend on how many threads the matmul uses. Shared inputs use one matmul per block for
    all trials at once (aᵀ [i, b] × d [b, T·o]), measured 10–20 % faster than a batched einsum.
    """
    T, N, o = tf.shape(d)[0], tf.shape(d)[1], tf.shape(d)[2]
    i = tf.shape(a)[-1]
    blocks, b, pad = _blocks(N)
    if shared:
        dt = tf.reshape(tf.transpose(d, [1, 0, 2]), [N, T * o])
        ap = tf.reshape(tf.pad(a, [[0, pad], [0, 0]]), [blocks, b, i])
        dp = tf.reshape(tf.pad(dt, [[0, pad], [0, 0]]), [blocks, b, T * o])
        r = tf.reduce_sum(tf.matmul(ap, dp, transpose_a=True), axis=0)  # [i, T·o]
        return tf.transpose(tf.reshape(r, [i, T, o]), [1, 0, 2])
    ap = tf.reshape(tf.pad(a, [[0, 0], [0, pad], [0, 0]]), [T, blocks, b, i])
    dp = tf.reshape(tf.pad(d, [[0, 0], [0, pad], [0, 0]]), [T, blocks, b, o])
    return tf.reduce_sum(tf.matmul(ap, dp, transpose_a=True), axis=1)


# Per-trial inputs of a convolution run as one native convolution per trial up to this many trials
# in a chunk (a static trial count); above it, as a batched matmul over input patches. Measured on 2
# CPU cores (mnist CNN, 16 trials, forward + backward): unrolled native convolutions 8.4 ms per
# model-step, patch matmul 22 (ExtractImagePatches) or 51 (slices), depthwise convolution with the
# trials on the channel axis 66, block-diagonal kernels 58, trials folded into the batch 112 — TF
# 2.15 has no grouped-convolution gradient on CPU. Not measured on a GPU.
UNROLL_TRIALS = 64

# Convolutions with at most this many input channels get per-example kernel gradients from a
# depthwise filter gradient rather than a patch matmul (see ``Conv2D._kernel_grads_depthwise``).
DEPTHWISE_CHANNELS = 2


def _activate(z: tf.Tensor, activation: Activation) -> tf.Tensor:
    return tf.nn.relu(z) if activation == "relu" else z


@dataclass(frozen=True)
class Dense:
    """Fully connected layer ``z = a W + b`` with per-trial ``W: [T, in, out]``, ``b: [T, out]``."""

    units: int
    activation: Activation = "relu"

    def param_shapes(self, in_shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(in_shape[-1], self.units), (self.units,)]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (self.units,)

    def fans(self, in_shape: tuple[int, ...]) -> tuple[int, int]:
        return in_shape[-1], self.units

    def apply(self, params: Sequence[tf.Tensor], a: tf.Tensor, shared: bool) -> tf.Tensor:
        W, b = params
        z = tf.einsum("ni,tio->tno", a, W) if shared else tf.einsum("tni,tio->tno", a, W)
        return z + b[:, None, :]

    def prepare(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> tuple:
        """What :meth:`sq_norms` and :meth:`weighted_sum` share (for dense layers just the inputs)."""
        return (a, delta, shared)

    def sq_norms(self, prepared: tuple) -> tf.Tensor:
        """Squared per-example gradient norm [T, N]: (‖a_n‖² + 1)·‖δ_n‖² (the +1 is the bias)."""
        a, delta, shared = prepared
        a_sq = tf.reduce_sum(tf.square(a), axis=-1)
        return (a_sq[None, :] if shared else a_sq) * tf.reduce_sum(tf.square(delta), axis=-1) + tf.reduce_sum(
            tf.square(delta), axis=-1
        )

    def weighted_sum(self, prepared: tuple, c: tf.Tensor) -> list[tf.Tensor]:
        """Σ_n c_n ∂ℓ_n/∂θ as matmuls per trial: [Σ_n c_n a_n δ_nᵀ, Σ_n c_n δ_n] (the sum over n in
        fixed-size blocks, see :func:`contract_examples`)."""
        a, delta, shared = prepared
        cd = delta * c[..., None]
        return [contract_examples(a, cd, shared), tf.reduce_sum(cd, axis=1)]

    def per_example(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> list[tf.Tensor]:
        """Materialised per-example gradients [T, R, in, out], [T, R, out] (for a few tracked rows)."""
        dW = tf.einsum("ri,tro->trio", a, delta) if shared else tf.einsum("tri,tro->trio", a, delta)
        return [dW, delta]


@dataclass(frozen=True)
class Conv2D:
    """3×3 (``kernel``) valid convolution with stride 1, computed from input patches.

    Kernel ``[T, k, k, c_in, filters]`` (Keras layout), bias ``[T, filters]``. Patches from
    ``tf.image.extract_patches`` are ordered (row, column, channel), which matches the kernel
    reshaped to ``[k·k·c_in, filters]``; the per-example kernel gradient is Pᵀδ (patches × output
    gradients), whose norms give per-example clipping factors.
    """

    filters: int
    kernel: int = 3
    activation: Activation = "relu"

    def param_shapes(self, in_shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(self.kernel, self.kernel, in_shape[-1], self.filters), (self.filters,)]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        h, w, _ = in_shape
        return (h - self.kernel + 1, w - self.kernel + 1, self.filters)

    def fans(self, in_shape: tuple[int, ...]) -> tuple[int, int]:
        area = self.kernel * self.kernel
        return area * in_shape[-1], area * self.filters

    def patches(self, a: tf.Tensor, shared: bool) -> tf.Tensor:
        """Input patches: [N, P, K] if shared else [T, N, P, K] (P positions, K = k·k·c_in), ordered
        (row, column, channel) like ``tf.image.extract_patches`` — the same values, built from k²
        shifted slices stacked on a new axis. Pure data movement: ``ExtractImagePatches`` was the
        costliest op of a one-model mnist step on CPU (8.9 of 32 ms in a profile; the slices
        0.7 ms). For the per-example kernel gradients, which are never differentiated; the forward
        pass uses :meth:`_extracted_patches`, whose gradient is 2.5× cheaper than k² slice gradients."""
        k = self.kernel
        H, W, c = a.shape[-3], a.shape[-2], a.shape[-1]
        h, w = H - k + 1, W - k + 1
        lead = [slice(None)] * (len(a.shape) - 3)
        shifts = [a[(*lead, slice(i, i + h), slice(j, j + w))] for i in range(k) for j in range(k)]
        p = tf.stack(shifts, axis=-2)  # [..., h, w, k·k, c]
        if shared:
            return tf.reshape(p, [tf.shape(a)[0], h * w, k * k * c])
        return tf.reshape(p, [tf.shape(a)[0], tf.shape(a)[1], h * w, k * k * c])

    def _extracted_patches(self, a: tf.Tensor, shared: bool) -> tf.Tensor:
        """:meth:`patches` by ``tf.image.extract_patches`` (the differentiated forward path)."""
        k = self.kernel
        flat = a if shared else tf.reshape(a, tf.concat([[-1], tf.shape(a)[2:]], axis=0))
        p = tf.image.extract_patches(
            flat, sizes=[1, k, k, 1], strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="VALID"
        )
        depth = k * k * a.shape[-1]
        if shared:
            return tf.reshape(p, [tf.shape(a)[0], -1, depth])
        return tf.reshape(p, [tf.shape(a)[0], tf.shape(a)[1], -1, depth])

    def apply(self, params: Sequence[tf.Tensor], a: tf.Tensor, shared: bool) -> tf.Tensor:
        """Pre-activation outputs ``[T, N, h', w', filters]``.

        Inputs shared by all trials: one native convolution with the T kernels stacked along the
        output channels. Per-trial inputs with a static trial count up to ``UNROLL_TRIALS``: one
        native convolution per trial, on ``tf.unstack`` slices (TF 2.15 has no grouped-convolution
        gradient on CPU). Otherwise a batched matmul over input patches.
        """
        W, b = params
        in_shape = tuple(a.shape[1:] if shared else a.shape[2:])
        h, w, _ = self.out_shape(in_shape)  # type: ignore[arg-type]
        T = W.shape[0]
        if shared:
            c_in = in_shape[-1]
            stacked = tf.reshape(tf.transpose(W, [1, 2, 3, 0, 4]), [self.kernel, self.kernel, c_in, -1])
            z = tf.nn.conv2d(a, stacked, strides=1, padding="VALID")  # [N, h, w, T·f]
            z = tf.transpose(tf.reshape(z, [tf.shape(a)[0], h, w, -1, self.filters]), [3, 0, 1, 2, 4])
        elif T is not None and T <= UNROLL_TRIALS:
            # unstack, not a[t]: the gradient of T slices is T zero-padded full-size tensors added up
            # (O(T²) memory traffic; 16 trials measured 2.9× slower per model than with unstack)
            pairs = zip(tf.unstack(a, num=T), tf.unstack(W, num=T), strict=True)
            z = tf.stack([tf.nn.conv2d(at, wt, strides=1, padding="VALID") for at, wt in pairs])
        else:
            kernel = tf.reshape(W, [tf.shape(W)[0], -1, self.filters])
            p = self._extracted_patches(a, shared)
            z = tf.einsum("tnpk,tko->tnpo", p, kernel)
            z = tf.reshape(z, [tf.shape(z)[0], tf.shape(z)[1], h, w, self.filters])
        return z + b[:, None, None, None, :]

    def _flat_delta(self, delta: tf.Tensor) -> tf.Tensor:
        return tf.reshape(delta, [tf.shape(delta)[0], tf.shape(delta)[1], -1, self.filters])

    def _kernel_grads(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> tf.Tensor:
        """Per-example kernel gradients Pᵀδ ``[T, N, K, filters]``, summed over positions in blocks
        of ``CONTRACT_BLOCK`` (thread-count independent, see :func:`contract_examples`)."""
        if a.shape[-1] is not None and a.shape[-1] <= DEPTHWISE_CHANNELS:
            return self._kernel_grads_depthwise(a, delta, shared)
        p = self.patches(a, shared)
        d = self._flat_delta(delta)
        P = p.shape[-2]
        if P is not None and P <= CONTRACT_BLOCK:
            return tf.einsum("npk,tnpo->tnko", p, d) if shared else tf.einsum("tnpk,tnpo->tnko", p, d)
        blocks, bsz, pad = _blocks(tf.shape(p)[-2])
        K = p.shape[-1]
        if shared:
            pp = tf.reshape(tf.pad(p, [[0, 0], [0, pad], [0, 0]]), [tf.shape(p)[0], blocks, bsz, K])
        else:
            pp = tf.pad(p, [[0, 0], [0, 0], [0, pad], [0, 0]])
            pp = tf.reshape(pp, [tf.shape(p)[0], tf.shape(p)[1], blocks, bsz, K])
        dp = tf.pad(d, [[0, 0], [0, 0], [0, pad], [0, 0]])
        dp = tf.reshape(dp, [tf.shape(d)[0], tf.shape(d)[1], blocks, bsz, self.filters])
        eq = "nkbc,tnkbo->tnkco" if shared else "tnkbc,tnkbo->tnkco"
        return tf.reduce_sum(tf.einsum(eq, pp, dp), axis=2)

    def _kernel_grads_depthwise(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> tf.Tensor:
        """Per-example kernel gradients ``[T, N, K, filters]`` for inputs with few channels, as one
        depthwise-convolution filter gradient with every (example, channel) as its own channel
        (the input patches of such layers are long and thin, and their matmul measured 5× slower
        on CPU: mnist's first layer, 676 positions × 9 patch entries)."""
        k, f = self.kernel, self.filters
        c_in = a.shape[-1]
        H, W = a.shape[-3], a.shape[-2]
        h, w = delta.shape[-3], delta.shape[-2]
        T, N = tf.shape(delta)[0], tf.shape(delta)[1]
        if shared:  # channels ordered (n, c); multiplier (t, f)
            x = tf.reshape(tf.transpose(a, [1, 2, 0, 3]), [1, H, W, -1])
            d = tf.transpose(delta, [2, 3, 1, 0, 4])[:, :, :, None]  # h w N 1 T f
            d = tf.tile(d, [1, 1, 1, c_in, 1, 1]) if c_in > 1 else d
            mult = T * f
        else:  # channels ordered (t, n, c); multiplier f
            x = tf.reshape(tf.transpose(a, [2, 3, 0, 1, 4]), [1, H, W, -1])
            d = tf.transpose(delta, [2, 3, 0, 1, 4])[:, :, :, :, None]  # h w T N 1 f
            d = tf.tile(d, [1, 1, 1, 1, c_in, 1]) if c_in > 1 else d
            mult = f
        d = tf.reshape(d, [1, h, w, -1])
        g = tf.compat.v1.nn.depthwise_conv2d_native_backprop_filter(
            x, tf.stack([k, k, tf.shape(x)[-1], mult]), d, [1, 1, 1, 1], "VALID"
        )
        if shared:
            g = tf.transpose(tf.reshape(g, [k, k, N, c_in, T, f]), [4, 2, 0, 1, 3, 5])
        else:
            g = tf.transpose(tf.reshape(g, [k, k, T, N, c_in, f]), [2, 3, 0, 1, 4, 5])
        return tf.reshape(g, [T, N, k * k * c_in, f])

    def prepare(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> tuple:
        """Per-example kernel gradients Pᵀδ [T, N, K, filters] and bias gradients [T, N, filters],
        computed once and shared by the norms and the clipped sum."""
        return self._kernel_grads(a, delta, shared), tf.reduce_sum(self._flat_delta(delta), axis=2)

    def sq_norms(self, prepared: tuple) -> tf.Tensor:
        g, bias = prepared
        return tf.reduce_sum(tf.square(g), axis=[2, 3]) + tf.reduce_sum(tf.square(bias), axis=-1)

    def weighted_sum(self, prepared: tuple, c: tf.Tensor) -> list[tf.Tensor]:
        """Σ_n c_n ∂ℓ_n/∂θ from the per-example gradients (a reduction over n, fixed order)."""
        g, bias = prepared
        dk = tf.reduce_sum(g * c[:, :, None, None], axis=1)
        shape = [tf.shape(dk)[0], self.kernel, self.kernel, -1, self.filters]
        return [tf.reshape(dk, shape), tf.reduce_sum(bias * c[:, :, None], axis=1)]

    def per_example(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> list[tf.Tensor]:
        g = self._kernel_grads(a, delta, shared)
        shape = [tf.shape(g)[0], tf.shape(g)[1], self.kernel, self.kernel, -1, self.filters]
        return [tf.reshape(g, shape), tf.reduce_sum(self._flat_delta(delta), axis=2)]


@dataclass(frozen=True)
class MaxPool:
    """Non-overlapping ``size``×``size`` max pooling (valid padding)."""

    size: int = 2

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        h, w, c = in_shape
        return (h // self.size, w // self.size, c)

    def apply(self, a: tf.Tensor, shared: bool) -> tf.Tensor:
        if shared:
            return tf.nn.max_pool2d(a, ksize=self.size, strides=self.size, padding="VALID")
        s = tf.shape(a)
        flat = tf.reshape(a, tf.concat([[-1], s[2:]], axis=0))
        out = tf.nn.max_pool2d(flat, ksize=self.size, strides=self.size, padding="VALID")
        return tf.reshape(out, tf.concat([s[:2], tf.shape(out)[1:]], axis=0))


@dataclass(frozen=True)
class Flatten:
    """Flatten everything after the trial and example axes."""

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (math.prod(in_shape),)

    def apply(self, a: tf.Tensor, shared: bool) -> tf.Tensor:
        if shared:
            return tf.reshape(a, [tf.shape(a)[0], -1])
        return tf.reshape(a, [tf.shape(a)[0], tf.shape(a)[1], -1])


Layer = Dense | Conv2D | MaxPool | Flatten
Trainable = Dense | Conv2D


@dataclass(frozen=True)
class LayerTrace:
    """What a trainable layer saw in a forward pass: its input and its pre-activation output."""

    layer: Trainable
    inputs: tf.Tensor
    outputs: tf.Tensor
    shared: bool


class Model:
    """A sequential classifier whose parameters carry a leading trial axis.

    ``forward(params, x)`` accepts inputs shared by all trials (``[N, *input_shape]``); the final
    layer emits logits, and the loss is softmax cross-entropy (a softmax output layer).
    """

    def __init__(
        self, name: str, input_shape: Sequence[int], num_classes: int, layers: Sequence[Layer]
    ) -> None:
        self.name = name
        self.input_shape = tuple(int(s) for s in input_shape)
        self.num_classes = int(num_classes)
        self.layers = tuple(layers)
        last = self.layers[-1]
        if not isinstance(last, Dense) or last.units != self.num_classes or last.activation != "linear":
            raise ValueError(
                f"model {name}: last layer must be Dense({num_classes}, 'linear') (the softmax logits)"
            )
        shapes: list[tuple[int, ...]] = []
        fans: list[tuple[int, int]] = []
        in_shapes: list[tuple[int, ...]] = []
        shape = self.input_shape
        for layer in self.layers:
            in_shapes.append(shape)
            if isinstance(layer, Dense | Conv2D):
                if isinstance(layer, Dense) and len(shape) != 1:
                    raise ValueError(
                        f"model {name}: Dense layer needs a flat input, got shape {shape}; add Flatten()"
                    )
                if isinstance(layer, Conv2D) and len(shape) != 3:
                    raise ValueError(f"model {name}: Conv2D needs [h, w, c] input, got shape {shape}")
                shapes.extend(layer.param_shapes(shape))
                fans.append(layer.fans(shape))
            shape = layer.out_shape(shape)
        self.param_shapes: tuple[tuple[int, ...], ...] = tuple(shapes)
        self._fans = tuple(fans)
        self._in_shapes = tuple(in_shapes)

    @property
    def num_params(self) -> int:
        return sum(math.prod(s) for s in self.param_shapes)

    def activation_size(self) -> int:
        """Floats of activations per example and trial (for choosing chunk sizes)."""
        total = 0
        shape = self.input_shape
        for layer in self.layers:
            if isinstance(layer, Conv2D):
                total += math.prod(layer.out_shape(shape)[:2]) * layer.kernel**2 * shape[-1]  # patches
            shape = layer.out_shape(shape)
            total += math.prod(shape)
        return total

    def init(self, num_trials: int, seed: int, first_trial: int = 0) -> list[np.ndarray]:
        """Glorot-uniform kernels and zero biases (Keras defaults), drawn per trial from ``(seed, trial)``.

        Seeding each trial separately makes a trial's initial weights independent of how trials
        are chunked.
        """
        out = [np.empty((num_trials, *s), dtype=np.float32) for s in self.param_shapes]
        for t in range(num_trials):
            rng = np.random.default_rng([seed, first_trial + t, 7919])
            for i, (fan_in, fan_out) in enumerate(self._fans):
                limit = math.sqrt(6.0 / (fan_in + fan_out))
                out[2 * i][t] = rng.uniform(-limit, limit, size=self.param_shapes[2 * i])
                out[2 * i + 1][t] = 0.0
        return out

    def forward(
        self, params: Sequence[tf.Tensor], x: tf.Tensor, shared: bool = True
    ) -> tuple[tf.Tensor, list[LayerTrace]]:
        """Logits ``[T, N, C]`` of every trial and the layer traces, on inputs shared by all trials
        (``x: [N, ...]``) or, with ``shared=False``, on per-trial inputs ``x: [T, N, ...]`` (e.g.
        each trial's own Poisson batch)."""
        a = x
        traces: list[LayerTrace] = []
        i = 0
        for layer in self.layers:
            if isinstance(layer, Dense | Conv2D):
                z = layer.apply(params[i : i + 2], a, shared)
                traces.append(LayerTrace(layer, a, z, shared))
                a = _activate(z, layer.activation)
                shared = False
                i += 2
            else:
                a = layer.apply(a, shared)
        return a, traces

    def example_losses(self, logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        """Per-example softmax cross-entropy ``[T, N]`` of logits ``[T, N, C]`` and integer labels
        (``[N]`` shared or ``[T, N]``). Two classes use the identity CE = softplus(z_other − z_label),
        cheaper than the sparse softmax op; more classes use that op."""
        labels = tf.cast(labels, tf.int32)
        labels = tf.broadcast_to(labels, tf.shape(logits)[:2])
        if self.num_classes == 2:
            margin = logits[..., 1] - logits[..., 0]
            sign = 1.0 - 2.0 * tf.cast(labels, logits.dtype)  # +1 for label 0, −1 for label 1
            return tf.nn.softplus(sign * margin)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    def input_gradients(
        self, params: Sequence[np.ndarray | tf.Tensor], X: np.ndarray | tf.Tensor, y: np.ndarray | tf.Tensor
    ) -> tf.Tensor:
        """∇_x ℓ(θ_t; x_n, y_n) ``[T, N, *input_shape]`` for every trial t and example n (for crafting
        poisons by gradient steps on the input, Nasr et al. §IV-B/D).

        ``X`` is ``[N, *input_shape]`` (shared) or ``[T, N, *input_shape]`` (per trial); ``y`` is
        ``[N]`` or ``[T, N]``. Works eagerly (returns a tensor; call ``.numpy()``) and inside a
        compiled step, where it composes with an outer tape (double back-propagation).
        """
        ps = [tf.convert_to_tensor(p, tf.float32) for p in params]
        x = tf.convert_to_tensor(X, tf.float32)
        shared = len(x.shape) == len(self.input_shape) + 1
        if shared:
            x = tf.broadcast_to(x[None], tf.concat([tf.shape(ps[0])[:1], tf.shape(x)], axis=0))
        with tf.GradientTape() as tape:
            tape.watch(x)
            logits, _ = self.forward(ps, x, shared=False)
            total = tf.reduce_sum(self.example_losses(logits, y))
        return tape.gradient(total, x)

    def predict_proba(
        self, params: Sequence[np.ndarray | tf.Tensor], X: np.ndarray, budget_floats: float = 5e7
    ) -> np.ndarray:
        """Softmax probabilities ``[T, N, C]`` of every trial's model on ``X`` (chunked over trials
        and examples so that activations stay within ``budget_floats``)."""
        arrays = [np.asarray(p, dtype=np.float32) for p in params]
        T, N = len(arrays[0]), len(X)
        out = np.zeros((T, N, self.num_classes), dtype=np.float32)
        per = max(1, self.activation_size())
        rows = int(max(1, min(N, budget_floats // per))) if N else 1
        trials = int(max(1, min(T, budget_floats // (per * rows)))) if T else 1
        for t0 in range(0, T, trials):
            chunk = [tf.constant(p[t0 : t0 + trials]) for p in arrays]
            for n0 in range(0, N, rows):
                logits, _ = self.forward(chunk, tf.constant(np.asarray(X[n0 : n0 + rows], dtype=np.float32)))
                out[t0 : t0 + trials, n0 : n0 + rows] = tf.nn.softmax(logits).numpy()
        return out

    def losses(self, params: Sequence[np.ndarray | tf.Tensor], X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-example cross-entropy ``[T, N]`` of every trial's model (for loss-threshold attacks)."""
        probs = self.predict_proba(params, X)
        picked = np.take_along_axis(probs, np.asarray(y, dtype=np.int64)[None, :, None], axis=2)[..., 0]
        return -np.log(np.clip(picked, 1e-30, None))


# Default hidden sizes per dataset (Bernau et al. §6: adult 104-6-6-2, purchase100 600-128-100;
# digits is our choice: one hidden layer of 32 for the 8×8 images).
DEFAULT_HIDDEN: dict[str, tuple[int, ...]] = {
    "adult": (6, 6),
    "digits": (32,),
    "purchase100": (128,),
    "mnist": (16, 32),
    "cifar10": (32, 64),
}


def mlp(name: str, input_dim: int, num_classes: int, hidden: Sequence[int]) -> Model:
    """Multi-layer perceptron: relu hidden layers and a softmax output layer."""
    layers: list[Layer] = [Dense(int(h), "relu") for h in hidden]
    layers.append(Dense(num_classes, "linear"))
    return Model(name, (input_dim,), num_classes, layers)


def cnn(name: str, input_shape: Sequence[int], num_classes: int, filters: Sequence[int]) -> Model:
    """Bernau et al. §6 MNIST network without batch normalisation: per conv layer a 3×3 relu
    convolution followed by 2×2 max pooling, then a softmax dense layer."""
    layers: list[Layer] = []
    for f in filters:
        layers += [Conv2D(int(f), 3, "relu"), MaxPool(2)]
    layers += [Flatten(), Dense(num_classes, "linear")]
    return Model(name, input_shape, num_classes, layers)


def model_for_dataset(
    name: str, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] | None = None
) -> Model:
    """The model used for ``name``: CNN for mnist/cifar10 (``hidden`` = conv filters), else an MLP.

    Image data of other datasets (digits, 8×8) is flattened into an MLP.
    """
    sizes = tuple(hidden) if hidden is not None else DEFAULT_HIDDEN.get(name, (32,))
    if name in ("mnist", "cifar10"):
        return cnn(name, input_shape, num_classes, sizes)
    if len(input_shape) == 1:
        return mlp(name, int(input_shape[0]), num_classes, sizes)
    flat = [Flatten()] if len(input_shape) > 1 else []
    layers: list[Layer] = [*flat, *(Dense(int(h), "relu") for h in sizes), Dense(num_classes, "linear")]
    return Model(name, input_shape, num_classes, layers)
