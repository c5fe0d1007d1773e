"""Operations shared by the dense and convolutional layers of :mod:`dpaudit.training.models`.

The activation, and sums over examples contracted in fixed-size blocks so that training does not
depend on the number of intra-op threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


@dataclass(frozen=True)
class RowStats:
    """What a dense layer needs from its input rows besides the rows: their squared norms ``sq``
    ([N] for an input shared by all trials, [T, B] for per-trial rows) and, for a shared input, its
    rows cut into the blocks of :func:`contract_examples` (``blocks`` [blocks, b, i], zero-padded;
    None for per-trial rows). For the examples these are loop invariants of a training call, so the
    step computes them once per call (:func:`shared_rows`) instead of once per step, and gathered
    batches gather their rows' norms instead of recomputing them."""

    sq: tf.Tensor
    blocks: tf.Tensor | None


def _row_blocks(a: tf.Tensor) -> tf.Tensor:
    """Rows of a shared input ``a`` [N, i] as zero-padded blocks [blocks, b, i] (see :func:`_blocks`)."""
    N, i = tf.shape(a)[0], tf.shape(a)[-1]
    blocks, b, pad = _blocks(N)
    return tf.reshape(tf.pad(a, [[0, pad], [0, 0]]), [blocks, b, i])


def shared_rows(a: tf.Tensor) -> RowStats:
    """The :class:`RowStats` of a shared input ``a`` [N, i] (the same values the per-step
    computation gives, so training is bit-identical with or without them)."""
    return RowStats(tf.reduce_sum(tf.square(a), axis=-1), _row_blocks(a))


def contract_examples(
    a: tf.Tensor, d: tf.Tensor, shared: bool, a_blocks: tf.Tensor | None = None
) -> tf.Tensor:
    """Σ_n a_n d_nᵀ per trial: ``a`` [N, i] (shared) or [T, N, i], ``d`` [T, N, o] → [T, i, o].

    The example axis is split into equal blocks of at most ``CONTRACT_BLOCK`` rows (zero-padded),
    each block contracted by one matmul and the blocks summed by a reduction, so the result does
    not depend on how many threads the matmul uses. Shared inputs use one matmul per block for
    all trials at once (aᵀ [i, b] × d [b, T·o]), measured 10–20 % faster than a batched einsum;
    ``a_blocks`` (shared only) are ``a``'s blocks computed beforehand (:class:`RowStats`).
    """
    T, N, o = tf.shape(d)[0], tf.shape(d)[1], tf.shape(d)[2]
    i = tf.shape(a)[-1]
    blocks, b, pad = _blocks(N)
    if shared:
        dt = tf.reshape(tf.transpose(d, [1, 0, 2]), [N, T * o])
        ap = _row_blocks(a) if a_blocks is None else a_blocks
        dp = tf.reshape(tf.pad(dt, [[0, pad], [0, 0]]), [blocks, b, T * o])
        r = tf.reduce_sum(tf.matmul(ap, dp, transpose_a=True), axis=0)  # [i, T·o]
        return tf.transpose(tf.reshape(r, [i, T, o]), [1, 0, 2])
    ap = tf.reshape(tf.pad(a, [[0, 0], [0, pad], [0, 0]]), [T, blocks, b, i])
    dp = tf.reshape(tf.pad(d, [[0, 0], [0, pad], [0, 0]]), [T, blocks, b, o])
    return tf.reduce_sum(tf.matmul(ap, dp, transpose_a=True), axis=1)


def _activate(z: tf.Tensor, activation: Activation) -> tf.Tensor:
    return tf.nn.relu(z) if activation == "relu" else z
