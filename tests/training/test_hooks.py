"""Trainer phases and hooks (issue 9.3): injected gradients, the injector callback, the privatized-sum
observer, learning rate 0, input gradients, two-class loss, strategies and trace reuse."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from dpaudit.training import dpsgd, models
from dpaudit.training.dpsgd import cache as dpsgd_cache
from dpaudit.training.dpsgd.cache import _get_step_function


def small_problem(n: int = 40, seed: int = 0) -> tuple[models.Model, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    return models.mlp("m", 4, 2, (3,)), X, rng.integers(0, 2, n)


def all_coordinates(model: models.Model) -> list[int]:
    return list(range(model.num_params))


def test_learning_rate_zero_keeps_weights_and_privatized_sum_is_sum_plus_noise() -> None:
    """η = 0 is valid (Nasr et al. §IV-F): θ never moves, yet every step's privatized sum is drawn;
    the observer's coordinates equal Σ clip(g) + σ·ξ at those coordinates."""
    model, X, y = small_problem()
    p0 = model.init(3, seed=1)
    coords = [0, 7, model.num_params - 1, 3]

    def parts(state: dpsgd.StepState) -> dict[str, tf.Tensor]:
        flat = lambda ts: tf.concat([tf.reshape(t, [tf.shape(t)[0], -1]) for t in ts], axis=1)  # noqa: E731
        return {"sum": flat(state.clipped_sum), "xi": flat(state.noise), "sigma": state.sigma}

    cfg = dpsgd.DPSGDConfig(1.0, 2.0, 0.0, 4, sampling_rate=0.5)
    res = dpsgd.train_trials(
        model, X, y, np.ones((3, len(X)), bool), cfg, seed=3, init_params=p0,
        observers={"g": dpsgd.privatized_sum_observer(coords), "p": parts},
    )  # fmt: skip
    for a, b in zip(res.params, p0, strict=True):
        np.testing.assert_array_equal(a, b)
    expected = res.records["p.sum"] + res.records["p.sigma"][..., None] * res.records["p.xi"]
    assert res.records["g"].shape == (3, 4, 4)
    np.testing.assert_allclose(res.records["g"], expected[..., coords], rtol=1e-6, atol=1e-6)
    assert np.abs(res.records["g"]).min() > 0
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="learning_rate"):
            dpsgd.DPSGDConfig(1.0, 1.0, bad, 1)


def _injection_differences(
    q: float, T: int, steps: int, **kwargs: object
) -> tuple[np.ndarray, dpsgd.TrainResult]:
    """Privatized sums with minus without the hook, per trial and step ``[T, steps, P]`` (η = 0 and
    z = 0 keep θ and the clipped record sums identical in both runs, so the difference is exactly
    what the hook added)."""
    model, X, y = small_problem()
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 0.0, steps, sampling_rate=q)
    obs = {"g": dpsgd.privatized_sum_observer(all_coordinates(model))}
    mask = np.ones((T, len(X)), bool)
    base = dpsgd.train_trials(model, X, y, mask, cfg, seed=4, observers=obs)
    hooked = dpsgd.train_trials(
        model, X, y, mask, cfg, seed=4, observers={**obs, "w": lambda s: {"inj": s.injected_weights
        if s.injected_weights is not None else s.injector_weights}}, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    return hooked.records["g"] - base.records["g"], hooked


def test_injected_per_trial_gradient_enters_gated_trials_after_start_clipped_with_frequency_q() -> None:
    """Acceptance of issue 9.3: a per-trial crafted gradient (norm 5 ≫ C = 1, ``clip=True``) enters
    only gated trials, only from ``start_step`` on, with norm exactly C, and in a fraction q of those
    steps under Poisson sampling. Tolerance: 4.5 standard deviations of the Bernoulli frequency
    (150 gated trials × 30 steps = 4500 draws, sd ≈ 0.006 at q = 0.2)."""
    model, _, _ = small_problem()
    T, steps, start, q, C = 300, 35, 5, 0.2, 1.0
    rng = np.random.default_rng(9)
    grads = [rng.normal(size=(T, *s)).astype(np.float32) for s in model.param_shapes]
    norm = np.sqrt(sum((g.reshape(T, -1) ** 2).sum(axis=1) for g in grads))
    grads = [g * (5.0 / norm).reshape(T, *([1] * (g.ndim - 1))) for g in grads]
    gate = (np.arange(T) % 2).astype(np.float32)
    inj = dpsgd.InjectedGradient(grads, np.ones(T), start_step=start, gate=gate, per_trial=True, clip=True)
    diff, res = _injection_differences(q, T, steps, injected=inj)
    norms = np.linalg.norm(diff, axis=2)  # [T, steps]
    entered = norms > 1e-4
    np.testing.assert_allclose(norms[entered], C, rtol=1e-4)  # clipped to C
    assert not entered[gate == 0].any()  # world gate
    assert not entered[:, :start].any()  # start step
    flat = np.concatenate([g.reshape(T, -1) for g in grads], axis=1)
    direction = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    t_idx, s_idx = np.nonzero(entered)
    np.testing.assert_allclose(diff[t_idx, s_idx], direction[t_idx] * C, atol=1e-4)  # this trial's own
    freq = entered[gate == 1, start:].mean()
    sd = np.sqrt(q * (1 - q) / entered[gate == 1, start:].size)
    assert abs(freq - q) < 4.5 * sd, (freq, q, sd)
    np.testing.assert_array_equal(res.records["w.inj"] > 0, entered)


def test_injector_callback_is_clipped_gated_and_poisson_sampled() -> None:
    """The per-step injector (an adaptive poison, Nasr et al. §IV-D) sees the step state, its
    output is clipped to C and enters gated trials with frequency q (same tolerance as above)."""
    model, _, _ = small_problem()
    T, steps, q = 200, 30, 0.3

    def injector(state: dpsgd.StepState) -> list[tf.Tensor]:
        # Depends on the state (the current weights): 10 × θ, norm ≫ C for Glorot weights.
        return [10.0 * p + 1.0 for p in state.params]

    gate = (np.arange(T) < 120).astype(np.float32)
    diff, res = _injection_differences(q, T, steps, injector=injector, injector_gate=gate)
    norms = np.linalg.norm(diff, axis=2)
    entered = norms > 1e-4
    np.testing.assert_allclose(norms[entered], 1.0, rtol=1e-4)
    assert not entered[gate == 0].any()
    freq = entered[gate == 1].mean()
    sd = np.sqrt(q * (1 - q) / entered[gate == 1].size)
    assert abs(freq - q) < 4.5 * sd, (freq, q, sd)
    np.testing.assert_array_equal(res.records["w.inj"] > 0, entered)
    with pytest.raises(ValueError, match="injector_gate"):
        model2, X, y = small_problem()
        dpsgd.train_trials(model2, X, y, np.ones((2, len(X)), bool), dpsgd.DPSGDConfig(1.0, 0.0, 0.1, 1),
                           injector_gate=np.ones(2))  # fmt: skip


def test_full_batch_injection_enters_every_gated_step() -> None:
    """Without sampling (q = 1) the shared injected gradient enters every gated step after start."""
    model, _, _ = small_problem()
    g = [np.full(s, 0.01, np.float32) for s in model.param_shapes]
    inj = dpsgd.InjectedGradient(g, np.array([1.0, 2.0, 1.0]), start_step=2, gate=np.array([1, 1, 0]))
    diff, _ = _injection_differences(1.0, 3, 4, injected=inj)
    flat = np.concatenate([x.ravel() for x in g])
    for t, w in enumerate([1.0, 2.0, 0.0]):
        np.testing.assert_allclose(diff[t, :2], 0.0, atol=1e-6)
        np.testing.assert_allclose(diff[t, 2:], np.broadcast_to(w * flat, (2, len(flat))), atol=1e-5)


@pytest.mark.parametrize("kind", ["mlp", "cnn", "digits-flatten"])
def test_input_gradients_match_keras(kind: str) -> None:
    """∇_x ℓ for every model family equals a Keras tape on the same weights."""
    from tests.training.test_dpsgd import keras_twin

    rng = np.random.default_rng(3)
    if kind == "mlp":
        model, X = models.mlp("m", 5, 3, (4,)), rng.normal(size=(6, 5))
    elif kind == "cnn":
        model, X = models.cnn("c", (10, 10, 2), 3, (3, 2)), rng.normal(size=(6, 10, 10, 2))
    else:
        model, X = models.model_for_dataset("digits", (4, 4, 1), 3, (5,)), rng.normal(size=(6, 4, 4, 1))
    X = X.astype(np.float32)
    y = np.arange(6) % 3
    p0 = model.init(2, seed=0)
    grads = model.input_gradients(p0, X, y).numpy()
    assert grads.shape == (2, 6, *model.input_shape)
    per_trial = model.input_gradients(p0, np.stack([X, X]), np.stack([y, y])).numpy()
    np.testing.assert_allclose(per_trial, grads, atol=1e-6)
    for t in range(2):
        km = keras_twin(model)
        km.set_weights([p[t] for p in p0])
        xt = tf.constant(X)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=km(xt)))
        np.testing.assert_allclose(grads[t], tape.gradient(loss, xt).numpy(), atol=1e-5)


def test_two_class_loss_is_the_softmax_cross_entropy() -> None:
    model = models.mlp("m", 3, 2, (2,))
    logits = tf.constant(np.random.default_rng(0).normal(size=(2, 5, 2)) * 20, tf.float32)
    labels = tf.constant([0, 1, 1, 0, 1])
    ref = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.broadcast_to(labels, [2, 5]), logits=logits
    )
    np.testing.assert_allclose(model.example_losses(logits, labels), ref, rtol=1e-5, atol=1e-6)


def test_strategies_give_the_same_training() -> None:
    """Trials at once, small groups and one model at a time run the same step: identical
    noise-free full-batch training (the chunking only changes random streams, absent here)."""
    from tests.training.test_dpsgd import small_cases

    model, X, y = small_cases()[1]  # the CNN
    p0 = model.init(3, seed=2)
    cfg = dpsgd.DPSGDConfig(0.5, 0.0, 0.2, 3)
    mask = np.ones((3, len(X)), bool)
    runs = [
        dpsgd.train_trials(model, X, y, mask, cfg, init_params=p0, strategy=s)
        for s in ("trials", "groups", "single")
    ]
    for other in runs[1:]:
        for a, b in zip(runs[0].params, other.params, strict=True):
            np.testing.assert_allclose(a, b, atol=2e-6)
    assert dpsgd.select_strategy(model, "CPU").name == "single"
    assert dpsgd.select_strategy(model, "GPU").name == "trials"
    assert dpsgd.select_strategy(small_problem()[0], "CPU").name == "trials"


def test_one_trace_serves_calls_with_other_seeds_and_sizes() -> None:
    """The seed and sizes are tensors: a second call with another seed and another dataset size
    reuses the compiled step (issue 12: retracing cost 0.9–1.8 s per call)."""
    model, X, y = small_problem(60)
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 2, sampling_rate=0.3)
    obs = {"l": dpsgd.loss_observer([0, 1])}
    dpsgd.train_trials(model, X, y, np.ones((4, 60), bool), cfg, seed=1, observers=obs, chunk_size=4)
    fn = _get_step_function(
        model, cfg, 4, tracked_rows=(), has_difference=False, observers={"l": dpsgd.loss_observer([0, 1])},
        jit_compile=False, injected=None, injector=None, gathered=True,
    ).get()  # fmt: skip
    traces = fn.experimental_get_tracing_count()
    for seed, n in ((2, 60), (3, 50), (4, 45)):
        obs_n = {"l": dpsgd.loss_observer([0, 1])}
        dpsgd.train_trials(
            model, X[:n], y[:n], np.ones((4, n), bool), cfg, seed=seed, observers=obs_n, chunk_size=4
        )
    assert fn.experimental_get_tracing_count() <= traces + 1  # at most one relaxation of N


def test_models_of_one_structure_share_a_compiled_step_and_the_cache_is_bounded() -> None:
    """An audit that rebuilds its model (every stage, every rung of a ladder) reuses the compiled
    step of an equal model, and the cache keeps at most ``_CACHE_SIZE`` steps however many
    distinct ones a long run asks for (each holds a graph: ≈ 20–40 MB)."""
    model, X, y = small_problem(20)
    twin = models.mlp("another name", 4, 2, (3,))
    assert twin.structure == model.structure and twin is not model
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 2)
    kw = dict(
        tracked_rows=(), has_difference=False, observers={}, jit_compile=False, injected=None,
        injector=None, gathered=False, released=None,
    )  # fmt: skip
    dpsgd_cache._CACHE.clear()
    try:
        assert _get_step_function(model, cfg, 4, **kw) is _get_step_function(twin, cfg, 4, **kw)
        wider = models.mlp("m", 4, 2, (4,))
        assert _get_step_function(wider, cfg, 4, **kw) is not _get_step_function(model, cfg, 4, **kw)
        for chunk in range(1, 3 * dpsgd_cache._CACHE_SIZE):
            _get_step_function(model, cfg, chunk, **kw)
        assert len(dpsgd_cache._CACHE) == dpsgd_cache._CACHE_SIZE
    finally:
        dpsgd_cache._CACHE.clear()
