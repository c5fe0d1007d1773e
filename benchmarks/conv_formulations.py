"""Native convolution ops against hand-built formulations, on the mnist CNN's second convolution.

The DP step of the mnist CNN spends its time in conv 2's forward pass, its input gradient and its
per-example kernel gradients. Each has a patch-based alternative (patches by the trainer's own
``Conv2D._extracted_patches``, then matmuls; col2im by k² pads for the input gradient). This script
times the trainer's way (native ops; ``Conv2D._kernel_grads`` for the per-example gradients) and the
alternative on the same tensors, and prints the largest difference between them. Run it once with
TensorFlow's default kernels and once with ``TF_ENABLE_ONEDNN_OPTS=1``:

    python benchmarks/conv_formulations.py [--images 100] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

from dpaudit.training.models_conv import Conv2D

SIDE, CHANNELS_IN, CHANNELS_OUT, K = 13, 16, 32, 3
OUT = SIDE - K + 1


def best_ms(
    fn: Callable[..., tf.Tensor], *args: tf.Tensor, repeats: int = 7, calls: int = 30
) -> tuple[float, tf.Tensor]:
    """Minimum over ``repeats`` of the mean ms per call of ``calls`` calls, after one warm-up call."""
    result = fn(*args)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            result = fn(*args)
        times.append((time.perf_counter() - start) / calls * 1e3)
    return min(times), result


def col2im(g: tf.Tensor) -> tf.Tensor:
    """Sum of the K² patch-gradient slices [N, OUT, OUT, K·K, C] padded back to the input grid."""
    total = tf.zeros([tf.shape(g)[0], SIDE, SIDE, CHANNELS_IN])
    for k in range(K * K):
        i, j = divmod(k, K)
        total += tf.pad(g[:, :, :, k, :], [[0, 0], [i, K - 1 - i], [j, K - 1 - j], [0, 0]])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    n = args.images
    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((n, SIDE, SIDE, CHANNELS_IN), dtype=np.float32))
    kernel = tf.constant(rng.standard_normal((K, K, CHANNELS_IN, CHANNELS_OUT)).astype(np.float32))
    delta = tf.constant(rng.standard_normal((n, OUT, OUT, CHANNELS_OUT)).astype(np.float32))
    flat_kernel = tf.reshape(kernel, [K * K * CHANNELS_IN, CHANNELS_OUT])
    layer = Conv2D(filters=CHANNELS_OUT, kernel=K)

    def p_of(x: tf.Tensor) -> tf.Tensor:
        return layer._extracted_patches(x, shared=True)  # [N, P, K·K·C]

    def d_of(delta: tf.Tensor) -> tf.Tensor:
        return tf.reshape(delta, [n, OUT * OUT, CHANNELS_OUT])

    cases = {
        "forward": (
            tf.function(lambda x: tf.nn.conv2d(x, kernel, 1, "VALID")),
            tf.function(lambda x: tf.reshape(tf.matmul(p_of(x), flat_kernel), [n, OUT, OUT, CHANNELS_OUT])),
            (x,),
        ),
        "input gradient": (
            tf.function(
                lambda d: tf.raw_ops.Conv2DBackpropInput(
                    input_sizes=[n, SIDE, SIDE, CHANNELS_IN],
                    filter=kernel,
                    out_backprop=d,
                    strides=[1, 1, 1, 1],
                    padding="VALID",
                )
            ),
            tf.function(
                lambda d: col2im(
                    tf.reshape(tf.matmul(d, flat_kernel, transpose_b=True), [n, OUT, OUT, K * K, CHANNELS_IN])
                )
            ),
            (delta,),
        ),
        "per-example kernel gradients": (
            tf.function(lambda x, delta: layer._kernel_grads(x, delta[None], shared=True)[0]),
            tf.function(
                lambda x, delta: tf.transpose(tf.matmul(d_of(delta), p_of(x), transpose_a=True), [0, 2, 1])
            ),
            (x, delta),
        ),
    }
    print(
        f"{n} images, {SIDE}×{SIDE}×{CHANNELS_IN} → {OUT}×{OUT}×{CHANNELS_OUT}, {K}×{K} kernels, "
        f"{args.threads} threads, oneDNN {os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default')}"
    )
    print("| operation | trainer ms | alternative ms | max abs difference |")
    print("| --- | --- | --- | --- |")
    for name, (native, alternative, inputs) in cases.items():
        native_ms, native_out = best_ms(native, *inputs)
        alternative_ms, alternative_out = best_ms(alternative, *inputs)
        difference = float(tf.reduce_max(tf.abs(native_out - alternative_out)))
        print(f"| {name} | {native_ms:.2f} | {alternative_ms:.2f} | {difference:.1e} |")


if __name__ == "__main__":
    main()
