"""The models people write: nested and subclassed models audited, the rest refused with a remedy that fits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfp_opt = pytest.importorskip("tensorflow_privacy")

from dpaudit.training_audit import DeclaredDPSGD, TrainingAuditor  # noqa: E402
from dpaudit.training_audit.canaries import REMEDY  # noqa: E402
from dpaudit.training_audit.input_layer import first_dense_kernel  # noqa: E402
from dpaudit.training_audit.pergrad import dense_chain, jacobian_functions  # noqa: E402
from dpaudit.training_audit.tap import tap_check  # noqa: E402

N, B, FEATURES, ZERO, CLIP, SIGMA = 120, 24, 12, 4, 1.0, 1.0
LOSS = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, FEATURES)).astype("float32")
    x[:, :ZERO] = 0.0
    return x, (x[:, ZERO:].sum(axis=1) > 0).astype("int64")


def declared(epochs: int = 1) -> DeclaredDPSGD:
    return DeclaredDPSGD(
        noise_multiplier=SIGMA,
        clip_norm=CLIP,
        batch_size=B,
        dataset_size=N,
        epochs=epochs,
        sampling="shuffle",
    )


def net() -> Any:
    return tf.keras.Sequential(
        [tf.keras.Input((FEATURES,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(2)]
    )


class Tutorial(tf.keras.Model):
    """The DP-SGD tutorials' pattern: the network as an attribute, DP-SGD by hand in train_step."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.net = inner

    def call(self, x: Any, training: bool = False) -> Any:
        return self.net(x, training=training)

    def train_step(self, data: Any) -> dict:
        x, y = data
        with tf.GradientTape() as tape:
            losses = LOSS(y, self(x, training=True))
        jac = tape.jacobian(losses, self.trainable_variables)
        n = tf.shape(x)[0]
        norms = tf.sqrt(tf.add_n([tf.reduce_sum(tf.reshape(j * j, [n, -1]), 1) for j in jac]))
        factor = tf.minimum(1.0, CLIP / (norms + 1e-12))
        grads = [
            (tf.tensordot(factor, j, axes=1) + tf.random.normal(j.shape[1:], stddev=SIGMA * CLIP)) / B
            for j in jac
        ]
        self.optimizer.apply_gradients(zip(grads, self.trainable_variables, strict=True))
        return {"loss": tf.reduce_mean(losses)}


def fit(model: Any, canaries: int = 30, epochs: int = 1, ds: Any = None) -> TrainingAuditor:
    x, y = data()
    ds = ds if ds is not None else tf.data.Dataset.from_tensor_slices((x, y)).batch(B)
    audit = TrainingAuditor(canaries=canaries, declared=declared(epochs), seed=0)
    model.fit(audit.wrap(ds), epochs=epochs, callbacks=[audit.callback()], verbose=0)
    return audit


def test_a_sequential_inside_a_subclass_with_its_own_dp_sgd_step_is_audited() -> None:
    tf.keras.utils.set_random_seed(0)
    model = Tutorial(net())
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=LOSS)
    t = fit(model).transcript()
    assert t.source == "gradients" and t.steps == N // B
    assert t.canary_rows.sum() > 0 and np.all(t.batch_rows == B)
    assert tap_check(t, 0.01).status == "passed"
    assert 0.2 < float(np.median(t.probe_scale)) * B / (SIGMA * CLIP) < 5.0  # the probe sees σC/B


def test_a_functional_model_inside_a_subclass_with_a_dp_optimizer_is_audited() -> None:
    class Holder(tf.keras.Model):
        def __init__(self) -> None:
            super().__init__()
            inputs = tf.keras.Input((FEATURES,))
            hidden = tf.keras.layers.Dense(8, activation="relu")(inputs)
            self.body = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(hidden))

        def call(self, x: Any, training: bool = False) -> Any:
            return self.body(x, training=training)

    tf.keras.utils.set_random_seed(0)
    model = Holder()
    optimizer = tfp_opt.DPKerasSGDOptimizer(l2_norm_clip=CLIP, noise_multiplier=SIGMA, learning_rate=0.1)
    model.compile(optimizer=optimizer, loss=LOSS)
    audit = fit(model)
    assert audit.transcript().source == "gradients"
    assert audit.verdict().bound.canaries == 30
    # the per-example path: a subclass is read through the jacobian (never the Dense-chain shortcut)
    assert (
        dense_chain(model) is None
        and dense_chain(tf.keras.Sequential([tf.keras.Input((FEATURES,)), net()])) is not None
    )


def test_the_input_layer_is_found_by_calling_the_model_and_its_rows_checked() -> None:
    class Attributes(tf.keras.Model):  # layers as attributes, declared in the opposite order
        def __init__(self, shift: float = 0.0) -> None:
            super().__init__()
            self.head, self.first, self.shift = tf.keras.layers.Dense(2), tf.keras.layers.Dense(8), shift

        def call(self, x: Any, training: bool = False) -> Any:
            return self.head(tf.nn.relu(self.first(x - self.shift)))

    sample, rows = np.zeros((2, FEATURES), "float32"), np.arange(ZERO)
    model = Attributes()
    assert first_dense_kernel(model, FEATURES, sample, rows) is model.first.kernel
    with pytest.raises(ValueError, match="changes the input before that layer"):
        first_dense_kernel(Attributes(shift=0.5), FEATURES, sample, rows)
    inputs = tf.keras.Input((FEATURES,))
    hidden = tf.keras.layers.Dense(4)(inputs)
    two = tf.keras.Model(inputs, [tf.keras.layers.Dense(2)(hidden), tf.keras.layers.Dense(1)(hidden)])
    with pytest.raises(ValueError, match="returns 2 outputs"):
        first_dense_kernel(two, FEATURES, sample, rows)
    x, y = data()
    index = next(i for i, v in enumerate(model.trainable_variables) if v is model.first.kernel)
    assert index > 0  # not the first variable: the attribute order is not the data's order
    slow = jacobian_functions(model, LOSS, index, tf.constant([0, 1]), CLIP)
    assert np.asarray(slow[0](x[:4], y[:4])[0]).shape == (4, 2 * 8)


def test_a_conv2d_first_model_is_refused_with_a_remedy_for_convolutions() -> None:
    rng = np.random.default_rng(0)
    x = np.zeros((N, 6, 6, 1), "float32")
    x[:, 1:5, 1:5] = rng.normal(size=(N, 4, 4, 1))  # a border of pixels that are 0 in every image
    y = (x.sum(axis=(1, 2, 3)) > 0).astype("int64")
    model = tf.keras.Sequential(
        [
            tf.keras.Input((6, 6, 1)),
            tf.keras.layers.Conv2D(2, 3),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=LOSS)
    with pytest.raises(ValueError, match="Conv2D") as err:
        fit(model, ds=tf.data.Dataset.from_tensor_slices((x, y)).batch(B))
    message = str(err.value)
    assert "convolution shares each kernel weight" in message and "channel" in message
    assert "pixels" in message and REMEDY not in message


def test_an_embedding_first_model_is_refused_with_a_remedy_for_token_ids() -> None:
    rng = np.random.default_rng(0)
    x = np.zeros((N, 6), "int64")
    x[:, :3] = rng.integers(1, 20, size=(N, 3))  # the last three positions are padding (id 0) everywhere
    y = (x[:, 0] > 10).astype("int64")
    model = tf.keras.Sequential(
        [
            tf.keras.Input((6,), dtype="int64"),
            tf.keras.layers.Embedding(20, 4),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(2),
        ]
    )
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss=LOSS)
    with pytest.raises(ValueError, match="Embedding") as err:
        fit(model, ds=tf.data.Dataset.from_tensor_slices((x, y)).batch(B))
    assert "audit-only token ids" in str(err.value) and REMEDY not in str(err.value)


def test_dict_inputs_and_two_label_outputs_are_refused_with_what_was_found() -> None:
    x, y = data()
    audit = TrainingAuditor(canaries=10, declared=declared(), seed=0)
    as_dict = tf.data.Dataset.from_tensor_slices(({"age": x[:, :6], "income": x[:, 6:]}, y)).batch(B)
    with pytest.raises(ValueError, match=r"a dict of 2 tensors \(keys \['age', 'income'\]\)"):
        audit.wrap(as_dict)
    two_labels = tf.data.Dataset.from_tensor_slices((x, (y, y))).batch(B)
    with pytest.raises(ValueError, match="several outputs.*single-output"):
        audit.wrap(two_labels)


def test_tf_privacy_microbatches_are_refused_before_training() -> None:
    tf.keras.utils.set_random_seed(0)
    model = net()
    optimizer = tfp_opt.DPKerasSGDOptimizer(
        l2_norm_clip=CLIP, noise_multiplier=SIGMA, num_microbatches=4, learning_rate=0.1
    )
    model.compile(optimizer=optimizer, loss=LOSS)
    before = [v.numpy().copy() for v in model.trainable_variables]
    with pytest.raises(ValueError, match="num_microbatches=4.*num_microbatches=None"):
        fit(model, canaries=40)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, model.trainable_variables, strict=True))
