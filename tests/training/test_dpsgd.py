"""The many-trials DP-SGD trainer against TF Privacy, brute-force per-example gradients and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_privacy import DPKerasSGDOptimizer

from dpaudit.training import dpsgd, models


def keras_twin(model: models.Model) -> tf.keras.Model:
    """The same architecture as a Keras Sequential model (weights set by the caller)."""
    layers: list = [tf.keras.Input(model.input_shape)]
    for layer in model.layers:
        if isinstance(layer, models.Dense):
            layers.append(
                tf.keras.layers.Dense(
                    layer.units, activation=None if layer.activation == "linear" else "relu"
                )
            )
        elif isinstance(layer, models.Conv2D):
            layers.append(tf.keras.layers.Conv2D(layer.filters, layer.kernel, activation="relu"))
        elif isinstance(layer, models.MaxPool):
            layers.append(tf.keras.layers.MaxPool2D(layer.size))
        else:
            layers.append(tf.keras.layers.Flatten())
    return tf.keras.Sequential(layers)


def small_cases() -> list[tuple[models.Model, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    Xm = (rng.normal(size=(8, 5)) * 3).astype(np.float32)
    Xc = rng.normal(size=(6, 10, 10, 2)).astype(np.float32)
    return [
        (models.mlp("mlp", 5, 3, (4, 4)), Xm, np.arange(8) % 3),
        (models.cnn("cnn", (10, 10, 2), 3, (4, 3)), Xc, np.arange(6) % 3),
    ]


def train(*args, **kwargs) -> dpsgd.TrainResult:
    """train_trials without XLA (compiling costs more than these tiny runs)."""
    return dpsgd.train_trials(*args, jit_compile=False, **kwargs)


def min_clip_factor(state: dpsgd.StepState) -> dict[str, tf.Tensor]:
    return {"": tf.reduce_min(state.clip_factors, axis=1)}


@pytest.mark.parametrize("case", [0, 1], ids=["mlp", "cnn"])
def test_noise_free_step_equals_tf_privacy(case: int) -> None:
    """One step with z = 0 equals DPKerasSGDOptimizer with one microbatch per example (which
    averages the clipped sum over microbatches, i.e. normalizer = batch size)."""
    model, X, y = small_cases()[case]
    p0 = model.init(2, seed=1)
    cfg = dpsgd.DPSGDConfig(clip_norm=0.5, noise_multiplier=0.0, learning_rate=0.1, steps=1)
    res = dpsgd.train_trials(
        model, X, y, np.ones((2, len(X)), bool), cfg, init_params=p0, observers={"clip": min_clip_factor}
    )
    assert res.records["clip"].min() < 0.9  # clipping is active for some example
    for trial in range(2):
        km = keras_twin(model)
        km.set_weights([p[trial] for p in p0])
        opt = DPKerasSGDOptimizer(
            l2_norm_clip=0.5, noise_multiplier=0.0, num_microbatches=len(X), learning_rate=0.1
        )
        # The optimizer's own minimize(): per-microbatch gradients, clipping, sum, / num_microbatches.
        opt.minimize(
            lambda km=km: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=km(X)),
            km.trainable_variables,
        )
        for expected, got in zip(km.get_weights(), res.params, strict=True):
            np.testing.assert_allclose(got[trial], expected, atol=2e-6, rtol=1e-5)
    assert np.abs(res.params[1]).max() > 1e-4  # the step moved the (zero-initialised) biases


@pytest.mark.parametrize("case", [0, 1], ids=["mlp", "cnn"])
def test_per_example_norms_clipping_and_sum(case: int) -> None:
    """Norm identity / patch norms equal brute-force per-example gradient norms; every tracked
    clipped gradient has norm min(‖g‖, C); the clipped sum is the masked sum of those."""
    model, X, y = small_cases()[case]
    p0 = model.init(1, seed=4)
    C = 0.3
    rows = tuple(range(len(X)))
    mask = np.ones((1, len(X)), bool)
    mask[0, 1] = False

    def grab(state: dpsgd.StepState) -> dict[str, tf.Tensor]:
        flat = tf.concat([tf.reshape(g, [1, len(rows), -1]) for g in state.tracked_grads], axis=2)
        summed = tf.concat([tf.reshape(g, [1, -1]) for g in state.clipped_sum], axis=1)
        return {"norms": state.tracked_norms, "clipped": flat, "sum": summed}

    cfg = dpsgd.DPSGDConfig(clip_norm=C, noise_multiplier=0.0, learning_rate=0.0, steps=1)
    res = train(
        model, X, y, mask, cfg, init_params=p0, tracked=dpsgd.TrackedRecords(rows), observers={"g": grab}
    )
    km = keras_twin(model)
    km.set_weights([p[0] for p in p0])
    brute = []
    for i in range(len(X)):
        with tf.GradientTape() as tape:
            logits = km(X[i : i + 1])
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y[i : i + 1], logits=logits)
        grads = tape.gradient(loss, km.trainable_variables)
        brute.append(np.concatenate([g.numpy().ravel() for g in grads]))
    brute = np.array(brute)
    norms = np.linalg.norm(brute, axis=1)
    np.testing.assert_allclose(res.records["g.norms"][0, 0], norms, rtol=1e-4)
    assert norms.max() > C  # clipping binds for some example
    clipped = res.records["g.clipped"][0, 0]
    np.testing.assert_allclose(np.linalg.norm(clipped, axis=1), np.minimum(norms, C), rtol=1e-4)
    expected = brute * np.minimum(1.0, C / norms)[:, None]
    np.testing.assert_allclose(clipped, expected, atol=1e-6)
    np.testing.assert_allclose(
        res.records["g.sum"][0, 0], (expected * mask[0][:, None]).sum(axis=0), atol=1e-5
    )


def test_mask_trains_on_the_selected_subset_only() -> None:
    model, X, y = small_cases()[0]
    p0 = model.init(2, seed=2)
    mask = np.ones((2, len(X)), bool)
    mask[1, 3] = False
    cfg = dpsgd.DPSGDConfig(clip_norm=1.0, noise_multiplier=0.0, learning_rate=0.2, steps=3, normalizer=7.0)
    both = train(model, X, y, mask, cfg, init_params=p0)
    keep = np.arange(len(X)) != 3
    alone = train(model, X[keep], y[keep], np.ones((1, 7), bool), cfg, init_params=[p[1:] for p in p0])
    for a, b in zip(both.params, alone.params, strict=True):
        np.testing.assert_allclose(a[1], b[0], atol=1e-6)
    assert not np.allclose(both.params[0][0], both.params[0][1])


def test_noise_scale_global_and_local() -> None:
    """θ_noisy − θ_free = −(η/B)·σ·ξ with σ = z·factor·C (global) or z·LS_i (local)."""
    model = models.mlp("m", 20, 2, (64,))
    rng = np.random.default_rng(1)
    X = rng.normal(size=(10, 20)).astype(np.float32)
    y = rng.integers(0, 2, 10)
    p0 = model.init(3, seed=0)
    mask = np.ones((3, 10), bool)
    free = train(model, X, y, mask, dpsgd.DPSGDConfig(2.0, 0.0, 1.0, 1, normalizer=1.0), init_params=p0)
    noisy = train(
        model,
        X,
        y,
        mask,
        dpsgd.DPSGDConfig(2.0, np.array([0.5, 1.0, 3.0]), 1.0, 1, sensitivity_factor=2.0, normalizer=1.0),
        init_params=p0,
        seed=5,
    )
    diffs = [
        np.concatenate([(a - b)[t].ravel() for a, b in zip(noisy.params, free.params, strict=True)])
        for t in range(3)
    ]
    stds = np.array([d.std() for d in diffs])  # ~1500 parameters each
    np.testing.assert_allclose(stds, [2.0, 4.0, 12.0], rtol=0.08)

    tracked = dpsgd.TrackedRecords((0, 1), (1.0, -1.0))
    obs = {"s": lambda s: {"sigma": s.sigma, "ls": s.sensitivity}}
    cfg = dpsgd.DPSGDConfig(2.0, 1.5, 0.1, 2, noise_scale="local")
    res = train(model, X, y, mask, cfg, tracked=tracked, observers=obs)
    np.testing.assert_allclose(res.records["s.sigma"], 1.5 * res.records["s.ls"], rtol=1e-6)
    assert np.all(res.records["s.ls"] > 0) and np.all(res.records["s.ls"] <= 4.0 + 1e-5)  # ≤ 2C


def test_poisson_sampling_rate_and_reproducibility() -> None:
    model = models.mlp("m", 4, 2, (3,))
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = rng.integers(0, 2, 200)
    mask = np.ones((4, 200), bool)
    mask[:, 100:] = False
    obs = {"b": lambda s: {"": tf.reduce_sum(s.batch_mask, axis=1)}}
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 12, sampling_rate=0.2)
    a = train(model, X, y, mask, cfg, seed=7, observers=obs)
    # 100 members × q = 0.2 → 20 per batch on average; 4 trials × 12 steps (sd of the mean 0.6).
    assert abs(a.records["b"].mean() - 20.0) < 2.5
    assert a.records["b"].std() > 2.0  # Poisson, not fixed-size batches
    b = train(model, X, y, mask, cfg, seed=7, observers=obs)
    c = train(model, X, y, mask, cfg, seed=8, observers=obs)
    for pa, pb, pc in zip(a.params, b.params, c.params, strict=True):
        np.testing.assert_array_equal(pa, pb)
        assert not np.allclose(pa, pc)


def test_non_dp_mode_is_plain_gradient_descent() -> None:
    model, X, y = small_cases()[0]
    p0 = model.init(1, seed=3)
    cfg = dpsgd.DPSGDConfig(clip_norm=None, noise_multiplier=0.0, learning_rate=0.3, steps=2)
    res = train(model, X, y, np.ones((1, len(X)), bool), cfg, init_params=p0)
    km = keras_twin(model)
    km.set_weights([p[0] for p in p0])
    km.compile(
        optimizer=tf.keras.optimizers.SGD(0.3),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    km.train_on_batch(X, y)
    km.train_on_batch(X, y)
    for expected, got in zip(km.get_weights(), res.params, strict=True):
        np.testing.assert_allclose(got[0], expected, atol=2e-6)


def test_bad_inputs_are_rejected() -> None:
    model = models.mlp("m", 4, 2, (3,))
    X = np.zeros((5, 4), np.float32)
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 1, noise_scale="local")
    with pytest.raises(ValueError, match="member_mask"):
        train(model, X, np.zeros(5), np.ones((2, 4), bool), cfg)
    with pytest.raises(ValueError, match="difference"):
        train(model, X, np.zeros(5), np.ones((2, 5), bool), cfg)
    with pytest.raises(ValueError, match="sampling_rate"):
        dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 1, sampling_rate=0.0)


def test_step_blocks_and_xla_give_the_same_result() -> None:
    """Steps split over several compiled calls reproduce one call exactly; XLA (whose stateless RNG
    draws other numbers for the same seed) reproduces the noise-free full-batch computation."""
    model = models.mlp("m", 4, 2, (3,))
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 4)).astype(np.float32)
    y = rng.integers(0, 2, 30)
    mask = rng.random((3, 30)) < 0.7
    cfg = dpsgd.DPSGDConfig(1.0, 0.8, 0.3, 5, sampling_rate=0.5)
    obs = {"s": lambda s: {"": s.sigma * tf.reduce_sum(s.batch_mask, axis=1)}}
    one = train(model, X, y, mask, cfg, seed=2, observers=obs)
    blocks = train(model, X, y, mask, cfg, seed=2, observers=obs, steps_per_call=2)
    plain = dpsgd.DPSGDConfig(1.0, 0.0, 0.3, 5)
    ref = train(model, X, y, mask, plain, seed=2)
    xla = dpsgd.train_trials(model, X, y, mask, plain, seed=2, jit_compile=True)
    assert one.records["s"].shape == (3, 5)
    np.testing.assert_array_equal(one.records["s"], blocks.records["s"])
    for a, b in zip(one.params, blocks.params, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(ref.params, xla.params, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_injected_gradient_is_added_to_the_chosen_trials() -> None:
    """A gradient canary (Nasr et al. §IV) enters the update of weighted trials only: with z = 0,
    η = 1, B = 1 and equal starting weights, θ(injected) − θ(plain) = −w·g after one step."""
    model = models.mlp("m", 4, 2, (3,))
    rng = np.random.default_rng(6)
    X = rng.normal(size=(10, 4)).astype(np.float32)
    y = rng.integers(0, 2, 10)
    one = model.init(1, seed=0)
    p0 = [np.repeat(p, 3, axis=0) for p in one]
    g = [rng.normal(size=s).astype(np.float32) for s in model.param_shapes]
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 1.0, 1, normalizer=1.0)
    inj = dpsgd.InjectedGradient(g, np.array([0.0, 1.0, 0.5]))
    res = train(model, X, y, np.ones((3, 10), bool), cfg, init_params=p0, injected=inj)
    for p, gi in zip(res.params, g, strict=True):
        np.testing.assert_allclose(p[1] - p[0], -gi, atol=1e-5)
        np.testing.assert_allclose(p[2] - p[0], -0.5 * gi, atol=1e-5)
    with pytest.raises(ValueError, match="injected"):
        train(model, X, y, np.ones((3, 10), bool), cfg, injected=dpsgd.InjectedGradient(g[:1], np.ones(3)))


def test_config_rejects_local_noise_with_poisson_sampling() -> None:
    """Local sensitivity is a full-batch notion: under Poisson sampling the tracked records may be absent."""
    settings = {"clip_norm": 1.0, "noise_multiplier": 1.0, "learning_rate": 0.1, "steps": 3}
    settings["noise_scale"] = "local"
    with pytest.raises(ValueError, match="needs full-batch steps"):
        dpsgd.DPSGDConfig(sampling_rate=0.5, **settings)
    assert dpsgd.DPSGDConfig(sampling_rate=1.0, **settings).noise_scale == "local"


def test_loss_observer_records_canary_losses_before_each_update() -> None:
    """The canary hook (Nasr et al. §IV): step i records the losses at θ_i, before that step's update."""
    model = models.mlp("m", 4, 2, (3,))
    rng = np.random.default_rng(4)
    X = rng.normal(size=(12, 4)).astype(np.float32)
    y = rng.integers(0, 2, 12)
    p0 = model.init(2, seed=1)
    cfg = dpsgd.DPSGDConfig(1.0, 0.0, 0.5, 3)
    canaries = [0, 5]
    res = train(
        model,
        X,
        y,
        np.ones((2, 12), bool),
        cfg,
        init_params=p0,
        observers={"canary": dpsgd.loss_observer(canaries)},
    )
    recorded = res.records["canary"]
    assert recorded.shape == (2, 3, 2)
    np.testing.assert_allclose(recorded[:, 0], model.losses(p0, X, y)[:, canaries], rtol=1e-5)
    all_rows = np.ones((2, 12), bool)
    two_steps = train(model, X, y, all_rows, dpsgd.DPSGDConfig(1.0, 0.0, 0.5, 2), init_params=p0)
    np.testing.assert_allclose(recorded[:, 2], model.losses(two_steps.params, X, y)[:, canaries], rtol=1e-4)


def test_cnn_strategy_on_cpu_follows_the_rows_per_step() -> None:
    """CNNs on CPU: one model at a time for full batches, SMALL_BATCH_CHUNK trials a chunk when a
    step evaluates at most SMALL_BATCH_ROWS rows (gathered Poisson batches); MLPs and GPUs as before."""
    cnn = models.cnn("c", (12, 12, 1), 3, (4,))
    mlp = models.mlp("m", 5, 3, (4,))
    small = dpsgd.SMALL_BATCH_ROWS
    assert dpsgd.select_strategy(cnn, "CPU") == dpsgd.Strategy("single", 1)
    assert dpsgd.select_strategy(cnn, "CPU", rows_per_step=small + 1) == dpsgd.Strategy("single", 1)
    assert dpsgd.select_strategy(cnn, "CPU", rows_per_step=small) == dpsgd.Strategy(
        "trials", dpsgd.SMALL_BATCH_CHUNK
    )
    assert dpsgd.select_strategy(cnn, "GPU", rows_per_step=small) == dpsgd.Strategy("trials", None)
    assert dpsgd.select_strategy(mlp, "CPU", rows_per_step=small) == dpsgd.Strategy("trials", None)
    if not tf.config.list_logical_devices("GPU"):
        mask = np.ones((20, 100), bool)
        full = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 2)
        # q = 0.1 of 100: padded batch 10 + 5·3 + 2 = 27 rows ≤ 32 → SMALL_BATCH_CHUNK (4) a chunk.
        poisson = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 2, sampling_rate=0.1)
        assert dpsgd.chunk_layout(cnn, mask[:, :100], full) == (1, 20)
        assert dpsgd.chunk_layout(cnn, mask, poisson) == (4, 5)
        assert dpsgd.chunk_layout(cnn, mask, poisson, batching="masked") == (1, 20)
