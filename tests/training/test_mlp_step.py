"""The MLP step's speed-ups keep its numbers: loop-invariant rows of a shared input and the
two-class loss by ``tf.unstack`` give the same bits as the per-step and strided-slice forms."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd.cache import _get_step_function
from dpaudit.training.layer_ops import contract_examples, shared_rows


def _problem(n: int = 1001, trials: int = 7) -> tuple[models.Model, list[tf.Tensor], tf.Tensor, tf.Tensor]:
    rng = np.random.default_rng(5)
    model = models.mlp("adult_like", 104, 2, (6, 6))
    X = tf.constant((rng.random((n, 104)) < 0.12).astype(np.float32))
    y = tf.constant(rng.integers(0, 2, n).astype(np.int32))
    params = [tf.constant(p) for p in model.init(trials, seed=3)]
    return model, params, X, y


def test_shared_rows_give_the_same_norms_and_sums_bit_for_bit() -> None:
    """Precomputed row norms and blocks of the shared input (computed once per call) change no bit
    of the per-example norms or the clipped sums, for a row count that needs padding (1001) and
    one that does not (1024)."""
    for n in (1001, 1024):
        model, params, X, y = _problem(n)
        cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 1)
        step = _get_step_function(
            model, cfg, len(params[0]), tracked_rows=(), has_difference=False, observers={},
            jit_compile=False, injected=None, injector=None, gathered=False,
        )  # fmt: skip
        w = tf.ones([len(params[0]), n])
        plain = step.per_example_norms(params, X, y, shared=True)
        hoisted = step.per_example_norms(params, X, y, shared=True, rows=shared_rows(X))
        np.testing.assert_array_equal(plain.norms.numpy(), hoisted.norms.numpy())
        assert plain.norms.numpy().min() > 0
        for a, b in zip(step.clip_and_sum(plain, w)[1], step.clip_and_sum(hoisted, w)[1], strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
            assert np.abs(a.numpy()).max() > 0


def test_contract_examples_with_precomputed_blocks_matches_a_plain_sum() -> None:
    """The blocked contraction (blocks given or not) equals Σ_n a_n d_nᵀ in float64 to 1e-5."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1001, 9)).astype(np.float32)
    d = rng.normal(size=(3, 1001, 4)).astype(np.float32)
    want = np.einsum("ni,tno->tio", a.astype(np.float64), d.astype(np.float64))
    at = tf.constant(a)
    got = contract_examples(at, tf.constant(d), True, shared_rows(at).blocks).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got, contract_examples(at, tf.constant(d), True).numpy())


def test_two_class_loss_and_its_gradient_match_the_slice_form_bit_for_bit() -> None:
    """softplus(z_other − z_label) by ``tf.unstack`` has the same values and gradient bits as the
    strided-slice form it replaced, and equals the softmax cross-entropy to 1e-6."""
    model, _, _, _ = _problem()
    rng = np.random.default_rng(1)
    logits = tf.constant(rng.normal(size=(4, 50, 2)).astype(np.float32) * 3)
    labels = tf.constant(rng.integers(0, 2, 50).astype(np.int32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(logits)
        new = model.example_losses(logits, labels)
        sign = 1.0 - 2.0 * tf.cast(tf.broadcast_to(labels, [4, 50]), tf.float32)
        old = tf.nn.softplus(sign * (logits[..., 1] - logits[..., 0]))
        total_new, total_old = tf.reduce_sum(new), tf.reduce_sum(old)
    np.testing.assert_array_equal(new.numpy(), old.numpy())
    np.testing.assert_array_equal(
        tape.gradient(total_new, logits).numpy(), tape.gradient(total_old, logits).numpy()
    )
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.broadcast_to(labels, [4, 50]), logits=logits
    )
    np.testing.assert_allclose(new.numpy(), ce.numpy(), rtol=1e-6, atol=1e-6)
