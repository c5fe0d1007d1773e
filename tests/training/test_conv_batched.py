"""Convolutions of several trials at once (per-trial kernels on per-trial inputs) against one model at
a time: the unrolled native convolutions give the same bits as one convolution per model, and
training with several trials per chunk agrees with one model at a time within a documented tolerance
(the per-example kernel gradients of a layer whose input all trials share are one batched matmul over
the chunk, which may round differently for different trial counts: up to 6e-8 after 3 steps here)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dpaudit.training import dpsgd, models, models_conv
from dpaudit.training.dpsgd import cache as dpsgd_cache
from dpaudit.training.dpsgd import step as dpsgd_step

#: Patch matmul vs native convolution, or one chunk vs another: the same sums in another order
#: (float32 rounding only).
PATCH_ATOL = 1e-5


def problem(trials: int = 5) -> tuple[models.Model, np.ndarray, np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(3)
    model = models.cnn("c", (12, 12, 3), 4, (4, 5))
    X = rng.normal(size=(9, 12, 12, 3)).astype(np.float32)
    return model, X, np.arange(9) % 4, model.init(trials, seed=4)


def per_trial_forward(layer: models.Conv2D, params: list[np.ndarray], a: np.ndarray) -> np.ndarray:
    """One native convolution per trial, the one-model-at-a-time reference."""
    return np.stack(
        [tf.nn.conv2d(a[t], params[0][t], 1, "VALID").numpy() + params[1][t] for t in range(len(a))]
    )


def test_unrolled_and_patch_forward_and_gradients_match_one_model_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(1)
    layer = models.Conv2D(6)
    T = 4
    a = tf.constant(rng.normal(size=(T, 5, 8, 8, 3)).astype(np.float32))
    params = [rng.normal(size=(T, 3, 3, 3, 6)).astype(np.float32), rng.normal(size=(T, 6)).astype(np.float32)]
    ps = [tf.constant(p) for p in params]
    ref = per_trial_forward(layer, params, a.numpy())

    def forward_and_input_grad() -> tuple[np.ndarray, np.ndarray]:
        with tf.GradientTape() as tape:
            tape.watch(a)
            z = layer.apply(ps, a, shared=False)
            total = tf.reduce_sum(tf.sin(z))
        return z.numpy(), tape.gradient(total, a).numpy()

    z_unrolled, g_unrolled = forward_and_input_grad()
    np.testing.assert_array_equal(z_unrolled, ref)
    monkeypatch.setattr(models_conv, "UNROLL_TRIALS", 0)  # force the batched patch matmul
    z_patch, g_patch = forward_and_input_grad()
    np.testing.assert_allclose(z_patch, ref, atol=PATCH_ATOL)
    np.testing.assert_allclose(g_patch, g_unrolled, atol=PATCH_ATOL)


def test_strategies_train_alike_at_zero_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full batch, z = 0, same seed: small groups, all trials in one chunk (unrolled native
    convolutions) and the patch path agree with one model at a time within PATCH_ATOL; trials in
    chunks of one are the one-at-a-time path, bit for bit."""
    model, X, y, p0 = problem()
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 0.3, 3)
    mask = np.ones((5, len(X)), bool)
    mask[1, 2] = mask[3, 7] = False

    def run(strategy: str, chunk: int) -> list[np.ndarray]:
        return dpsgd.train_trials(
            model, X, y, mask, cfg, seed=2, init_params=p0, strategy=strategy, chunk_size=chunk
        ).params

    single = run("single", 1)
    for a, b in zip(single, run("trials", 1), strict=True):
        np.testing.assert_array_equal(a, b)
    for strategy, chunk in (("groups", 2), ("trials", 5)):
        for a, b in zip(single, run(strategy, chunk), strict=True):
            np.testing.assert_allclose(b, a, atol=PATCH_ATOL)
    monkeypatch.setattr(models_conv, "UNROLL_TRIALS", 0)
    dpsgd_cache._CACHE.clear()  # the compiled steps above baked in the unrolled convolutions
    try:
        patch = run("trials", 5)
    finally:
        dpsgd_cache._CACHE.clear()
    moved = False
    for a, b, c in zip(single, patch, p0, strict=True):
        np.testing.assert_allclose(b, a, atol=PATCH_ATOL)
        moved |= bool(np.abs(a - c).max() > 100 * PATCH_ATOL)
    assert moved  # the comparison is not between untouched initial weights


def test_per_example_kernel_gradients_of_per_trial_inputs_are_exact() -> None:
    """The slice-and-matmul kernel gradients equal each example's kernel gradient by autodiff
    (per-trial inputs with 3 channels: not the depthwise path)."""
    rng = np.random.default_rng(5)
    layer = models.Conv2D(4)
    T, N = 2, 3
    a = rng.normal(size=(T, N, 7, 7, 3)).astype(np.float32)
    W = rng.normal(size=(T, 3, 3, 3, 4)).astype(np.float32)
    b = np.zeros((T, 4), np.float32)
    up = rng.normal(size=(T, N, 5, 5, 4)).astype(np.float32)  # δ = ∂(Σ up·z)/∂z
    kernel, bias = layer.per_example(tf.constant(a), tf.constant(up), shared=False)
    for t in range(T):
        for n in range(N):
            Wt = tf.Variable(W[t])
            with tf.GradientTape() as tape:
                z = tf.nn.conv2d(a[t, n : n + 1], Wt, 1, "VALID") + b[t]
                total = tf.reduce_sum(z * up[t, n : n + 1])
            np.testing.assert_allclose(kernel[t, n], tape.gradient(total, Wt), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(bias[t, n], up[t, n].sum(axis=(0, 1)), rtol=1e-5, atol=1e-5)


def test_pooling_models_step_as_their_own_function_with_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model with max pooling runs each step as its own (not inlined) function, which makes
    oneDNN pick its fast pooling gradient in every process; training gives the same bits as the
    step inlined into the loop (noise on, Poisson batches off). MLP steps stay inlined."""
    model, X, y, p0 = problem(2)
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.3, 3)
    mask = np.ones((2, len(X)), bool)

    def run() -> list[np.ndarray]:
        dpsgd_cache._CACHE.clear()
        try:
            result = dpsgd.train_trials(model, X, y, mask, cfg, seed=2, init_params=p0, strategy="single")
            steps = list(dpsgd_cache._CACHE.values())
        finally:
            dpsgd_cache._CACHE.clear()
        assert steps and all(s.step_as_function == inlined_expected for s in steps)
        return result.params

    inlined_expected = True
    own = run()
    monkeypatch.setattr(dpsgd_step, "MaxPool", type("NoPooling", (), {}))
    inlined_expected = False
    inlined = run()
    for a, b, c in zip(own, inlined, p0, strict=True):
        np.testing.assert_array_equal(a, b)
        assert np.abs(a - c).max() > 1e-3
    mlp = models.mlp("m", 4, 2, (3,))
    step = dpsgd_cache._get_step_function(
        mlp, cfg, 1, tracked_rows=(), has_difference=False, observers={}, jit_compile=False,
        injected=None, injector=None, gathered=False, released=None,
    )  # fmt: skip
    assert not step.step_as_function
