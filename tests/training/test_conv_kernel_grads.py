"""Per-example kernel gradients of a convolution from shifted input slices and one broadcasting
batched matmul (``Conv2D._kernel_grads``): every path (shared or per-trial inputs, positions summed
in one block or in several, few input channels through the depthwise filter gradient) against
each example's kernel gradient by ``tf.GradientTape`` and against the input-patch product Pᵀδ.

Tolerances: autodiff and the matmul sum the same P products per entry in another order, so they
differ by float32 rounding, which grows like √P·ε times the entries (P = 576 positions and entries
of order 30 here: up to 2e-5 measured on an AMD EPYC with Eigen's kernels). The test allows 8·√P·ε
of the largest entry (about 1e-3 there), far below what a wrong slice or offset gives (order 1).
Against Pᵀδ from ``tf.image.extract_patches`` the sums run over the same positions in the same
blocks; on CPU they come out bit for bit equal, and the test allows float32 rounding (1e-6
relative to the largest entry) so that another CPU or kernel library does not fail it."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dpaudit.training import models
from dpaudit.training.layer_ops import CONTRACT_BLOCK

PATCH_RTOL = 1e-6

# (shared, trials, examples, image side, input channels, filters): one block of positions (7×7 →
# 5×5), several blocks (26×26 → 24×24 = 576 > CONTRACT_BLOCK), and 1 input channel (depthwise path)
CASES = [
    (False, 2, 3, 7, 3, 4),
    (True, 2, 3, 7, 3, 4),
    (False, 2, 2, 26, 3, 2),
    (True, 3, 2, 26, 4, 3),
    (False, 2, 3, 8, 1, 4),
    (True, 2, 3, 8, 1, 4),
]


def case_tensors(shared: bool, T: int, N: int, H: int, c: int, f: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(H * 100 + c * 10 + f + int(shared))
    a = rng.normal(size=(N, H, H, c) if shared else (T, N, H, H, c)).astype(np.float32)
    W = rng.normal(size=(T, 3, 3, c, f)).astype(np.float32)
    up = rng.normal(size=(T, N, H - 2, H - 2, f)).astype(np.float32)  # δ = ∂(Σ up·z)/∂z
    return a, W, up


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_kernel_gradients_equal_autodiff_per_example(case: tuple) -> None:
    shared, T, N, H, c, f = case
    assert (H - 2) ** 2 > CONTRACT_BLOCK or H < 10  # the large cases exercise the blocked sum
    a, W, up = case_tensors(*case)
    positions = (H - 2) ** 2  # P: the products summed into each kernel entry
    kernel, bias = models.Conv2D(f).per_example(tf.constant(a), tf.constant(up), shared)
    assert kernel.shape == (T, N, 3, 3, c, f)
    for t in range(T):
        for n in range(N):
            x = a[n : n + 1] if shared else a[t, n : n + 1]
            Wt = tf.Variable(W[t])
            with tf.GradientTape() as tape:
                total = tf.reduce_sum(tf.nn.conv2d(x, Wt, 1, "VALID") * up[t, n : n + 1])
            expected = tape.gradient(total, Wt).numpy()
            assert np.abs(expected).max() > 1.0  # a gradient that a wrong slice would miss
            rounding = 8 * np.sqrt(positions) * np.finfo(np.float32).eps * np.abs(expected).max()
            np.testing.assert_allclose(kernel[t, n], expected, rtol=0, atol=rounding)
            np.testing.assert_allclose(bias[t, n], up[t, n].sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [c for c in CASES if c[4] > 1], ids=str)
def test_kernel_gradients_equal_the_patch_product(case: tuple) -> None:
    """The same sums as Pᵀδ over ``tf.image.extract_patches`` patches, position blocks included."""
    shared, T, N, H, c, f = case
    a, _, up = case_tensors(*case)
    layer = models.Conv2D(f)
    got = layer._kernel_grads(tf.constant(a), tf.constant(up), shared).numpy()
    p = layer._extracted_patches(tf.constant(a), shared).numpy()  # [(T,) N, P, K]
    d = up.reshape(T, N, -1, f)
    P = d.shape[2]
    blocks = -(-P // CONTRACT_BLOCK)
    size = -(-P // blocks)
    expected = 0.0
    for lo in range(0, P, size):  # the same position blocks as the trainer
        pb = p[..., lo : lo + size, :]
        expected = expected + np.einsum(
            "npk,tnpo->tnko" if shared else "tnpk,tnpo->tnko", pb, d[:, :, lo : lo + size]
        )
    assert got.shape == expected.shape == (T, N, 9 * c, f)
    np.testing.assert_allclose(got, expected, rtol=0, atol=PATCH_RTOL * np.abs(expected).max())


def test_compiled_and_eager_kernel_gradients_are_identical() -> None:
    """Inside a ``tf.function`` (as in the trainer) the same bits as eagerly."""
    a, _, up = case_tensors(False, 1, 5, 13, 16, 8)
    layer = models.Conv2D(8)
    eager = layer._kernel_grads(tf.constant(a), tf.constant(up), False).numpy()
    compiled = tf.function(lambda x, d: layer._kernel_grads(x, d, False))(a, up).numpy()
    np.testing.assert_array_equal(eager, compiled)
