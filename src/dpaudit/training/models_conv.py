"""Convolutional, pooling and flattening layers of :mod:`dpaudit.training.models` (trial axis first).

Conv2D computes per-example kernel gradients from shifted input slices and one batched matmul (or,
for few input channels, one depthwise filter gradient); its forward pass runs native convolutions
with their biases added by ``bias_add``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import tensorflow as tf

from dpaudit.training.layer_ops import CONTRACT_BLOCK, Activation, _blocks

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

    def _extracted_patches(self, a: tf.Tensor, shared: bool) -> tf.Tensor:
        """Input patches [N, P, K] if shared else [T, N, P, K] (P positions, K = k·k·c_in, ordered
        (row, column, channel)) by ``tf.image.extract_patches``: the forward pass of per-trial inputs
        beyond ``UNROLL_TRIALS`` (its gradient is 2.5× cheaper than that of k² slices)."""
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
        # Biases by ``tf.nn.bias_add`` right after each native convolution (grappler fuses the
        # pair; the same sums as a broadcast add, bit for bit: mnist CNN CPU time per model 203 →
        # 189 ms, one thread).
        if shared:
            c_in = in_shape[-1]
            stacked = tf.reshape(tf.transpose(W, [1, 2, 3, 0, 4]), [self.kernel, self.kernel, c_in, -1])
            z = tf.nn.conv2d(a, stacked, strides=1, padding="VALID")  # [N, h, w, T·f]
            z = tf.nn.bias_add(z, tf.reshape(b, [-1]))
            return tf.transpose(tf.reshape(z, [tf.shape(a)[0], h, w, -1, self.filters]), [3, 0, 1, 2, 4])
        if T is not None and T <= UNROLL_TRIALS:
            # unstack, not a[t]: the gradient of T slices is T zero-padded full-size tensors added up
            # (O(T²) memory traffic; 16 trials measured 2.9× slower per model than with unstack)
            triples = zip(tf.unstack(a, num=T), tf.unstack(W, num=T), tf.unstack(b, num=T), strict=True)
            return tf.stack(
                [
                    tf.nn.bias_add(tf.nn.conv2d(at, wt, strides=1, padding="VALID"), bt)
                    for at, wt, bt in triples
                ]
            )
        kernel = tf.reshape(W, [tf.shape(W)[0], -1, self.filters])
        p = self._extracted_patches(a, shared)
        z = tf.einsum("tnpk,tko->tnpo", p, kernel)
        z = tf.reshape(z, [tf.shape(z)[0], tf.shape(z)[1], h, w, self.filters])
        return z + b[:, None, None, None, :]

    def _flat_delta(self, delta: tf.Tensor) -> tf.Tensor:
        return tf.reshape(delta, [tf.shape(delta)[0], tf.shape(delta)[1], -1, self.filters])

    def _kernel_grads(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> tf.Tensor:
        """Per-example kernel gradients ``[T, N, K, filters]``: the k² shifted input slices
        ``a[i:i+h, j:j+w]`` stacked on a kernel-offset axis ([N, k², P, c_in], whole slices, not
        interleaved into patches), times δ [N, 1, P, filters] by one broadcasting batched matmul
        over the P output positions, in (row, column, channel) order — the same values as Pᵀδ over
        the input patches (bit for bit on CPU), for less CPU time: mnist's second layer, 4 trials,
        CPU time per model 247 → 210 ms with everything else equal. Positions are summed in blocks
        of ``CONTRACT_BLOCK`` (thread-count independent, see :func:`contract_examples`)."""
        if a.shape[-1] is not None and a.shape[-1] <= DEPTHWISE_CHANNELS:
            return self._kernel_grads_depthwise(a, delta, shared)
        k, f = self.kernel, self.filters
        h, w, c = delta.shape[-3], delta.shape[-2], a.shape[-1]
        lead = [slice(None)] * (len(a.shape) - 3)
        head = [tf.shape(a)[0]] if shared else [tf.shape(a)[0], tf.shape(a)[1]]
        shifts = [a[(*lead, slice(i, i + h), slice(j, j + w))] for i in range(k) for j in range(k)]
        p = tf.reshape(tf.stack(shifts, axis=len(head)), [*head, k * k, h * w, c])  # [(T,) N, k², P, c]
        if shared:
            p = p[None]
        d = self._flat_delta(delta)[:, :, None]  # [T, N, 1, P, f]
        if h * w <= CONTRACT_BLOCK:
            g = tf.matmul(p, d, adjoint_a=True)  # [T, N, k², c, f]
        else:
            blocks, bsz, pad = _blocks(tf.constant(h * w))
            p = tf.pad(p, [[0, 0], [0, 0], [0, 0], [0, pad], [0, 0]])
            p = tf.reshape(p, tf.concat([tf.shape(p)[:3], [blocks, bsz, c]], axis=0))
            d = tf.pad(d, [[0, 0], [0, 0], [0, 0], [0, pad], [0, 0]])
            d = tf.reshape(d, tf.concat([tf.shape(d)[:3], [blocks, bsz, f]], axis=0))
            g = tf.reduce_sum(tf.matmul(p, d, adjoint_a=True), axis=3)
        return tf.reshape(g, [tf.shape(g)[0], tf.shape(g)[1], k * k * c, f])

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
