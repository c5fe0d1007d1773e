"""Keras models mapped onto dpaudit's trials-at-once families: same logits on the same weights
(issue 15's acceptance), JSON and ``.keras`` round trips, the params layer list, and refusals."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_breast_cancer, load_digits

from dpaudit.config import ParamsError
from dpaudit.training.keras_import import (
    KerasImportError,
    UnsupportedLayerError,
    model_from_keras,
    model_from_keras_file,
    model_from_keras_json,
    model_from_layer_list,
    params_from_keras_weights,
)
from dpaudit.training.models import Conv2D, Dense, Flatten, MaxPool

keras = tf.keras
L = keras.layers


def _randomise(model: keras.Model, seed: int) -> None:
    """Random kernels *and* biases, so that a bias in the wrong place shows up."""
    rng = np.random.default_rng(seed)
    model.set_weights([rng.normal(0, 0.5, size=w.shape).astype(np.float32) for w in model.get_weights()])


def _logits(mapped, keras_model, X: np.ndarray, trials: int = 2) -> np.ndarray:
    params = [tf.constant(p) for p in params_from_keras_weights(keras_model, mapped, trials=trials)]
    logits, _ = mapped.forward(params, tf.constant(X, dtype=tf.float32))
    out = logits.numpy()
    assert out.shape == (trials, len(X), mapped.num_classes)
    np.testing.assert_array_equal(out[0], out[-1])  # every trial carries the same weights
    return out[0]


@pytest.fixture(scope="module")
def cancer() -> np.ndarray:
    X = load_breast_cancer().data[:64]
    return ((X - X.mean(0)) / X.std(0)).astype(np.float32)


@pytest.fixture(scope="module")
def digits() -> np.ndarray:
    return (load_digits().images[:64, :, :, None] / 16.0).astype(np.float32)


def _mlp() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((30,)),
            L.Dense(16, activation="relu"),
            L.Dropout(0.0),
            L.Dense(8),
            L.Activation("relu"),
            L.Dense(3, activation="softmax"),
        ],
        name="mlp",
    )
    _randomise(model, 1)
    return model


def _cnn() -> keras.Model:
    inputs = keras.Input((8, 8, 1))
    h = L.Conv2D(4, 3)(inputs)
    h = L.MaxPooling2D()(h)
    h = L.ReLU()(h)  # folded into the convolution: relu commutes with max pooling
    h = L.Flatten()(h)
    outputs = L.Dense(10)(h)
    model = keras.Model(inputs, outputs, name="cnn")
    _randomise(model, 2)
    return model


def test_mlp_forward_equals_keras(cancer):
    keras_model = _mlp()
    mapped = model_from_keras(keras_model)
    assert mapped.layers == (Dense(16, "relu"), Dense(8, "relu"), Dense(3, "linear"))
    assert mapped.input_shape == (30,) and mapped.num_classes == 3
    logits = _logits(mapped, keras_model, cancer)
    # The Keras softmax output is the softmax of the mapped model's logits.
    np.testing.assert_allclose(tf.nn.softmax(logits).numpy(), keras_model(cancer).numpy(), atol=1e-5)
    # And the logits themselves equal Keras' pre-softmax activations.
    head = keras.Sequential(keras_model.layers[:-1])
    kernel, bias = keras_model.layers[-1].get_weights()
    np.testing.assert_allclose(logits, head(cancer).numpy() @ kernel + bias, rtol=1e-5, atol=1e-5)


def test_cnn_forward_equals_keras(digits):
    keras_model = _cnn()
    mapped = model_from_keras(keras_model)
    assert mapped.layers == (Conv2D(4, 3, "relu"), MaxPool(2), Flatten(), Dense(10, "linear"))
    np.testing.assert_allclose(_logits(mapped, keras_model, digits), keras_model(digits).numpy(),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("build", [_mlp, _cnn])
def test_json_round_trip(build, cancer, digits):
    keras_model = build()
    X = cancer if keras_model.name == "mlp" else digits
    mapped = model_from_keras_json(keras_model.to_json())
    assert mapped.layers == model_from_keras(keras_model).layers
    rebuilt = keras.models.model_from_json(keras_model.to_json())
    rebuilt.set_weights(keras_model.get_weights())
    np.testing.assert_allclose(_logits(mapped, rebuilt, X), _logits(mapped, keras_model, X), atol=1e-6)


def test_keras_file_round_trip(tmp_path, digits):
    keras_model = _cnn()
    path = tmp_path / "cnn.keras"
    keras_model.save(path)
    mapped = model_from_keras_file(path)
    loaded = keras.models.load_model(path, compile=False)
    np.testing.assert_allclose(_logits(mapped, loaded, digits), keras_model(digits).numpy(),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(KerasImportError, match=r"missing\.keras: file does not exist"):
        model_from_keras_file(tmp_path / "missing.keras")
    with pytest.raises(KerasImportError, match=r"expected a \.keras file"):
        model_from_keras_file(tmp_path / "cnn.h5")


def test_batch_normalization_is_refused_with_its_name_and_reason(tmp_path):
    model = keras.Sequential([keras.Input((5,)), L.Dense(4), L.BatchNormalization(name="bn1"), L.Dense(2)])
    with pytest.raises(UnsupportedLayerError, match=r"layer 'bn1' \(BatchNormalization\) cannot be mapped: "
                       r".*statistics of the whole batch.*per-example clipping"):
        model_from_keras(model)
    model.save(tmp_path / "bn.keras")
    with pytest.raises(UnsupportedLayerError, match=r"layer 'bn1' \(BatchNormalization\).*bn\.keras"):
        model_from_keras_file(tmp_path / "bn.keras")


def test_unsupported_layers_are_refused_with_name_and_reason():
    cases = [
        (keras.Sequential([keras.Input((4, 3)), L.LSTM(5, name="rnn"), L.Dense(2)]),
         r"'rnn' \(LSTM\) cannot be mapped: not supported: dpaudit maps InputLayer, Dense"),
        (keras.Sequential([keras.Input((5,)), L.Dense(4), L.LayerNormalization(name="ln"), L.Dense(2)]),
         r"'ln' \(LayerNormalization\) .*not supported yet: it normalises each example"),
        (keras.Sequential([keras.Input((5,)), L.Dense(4), L.Dropout(0.5, name="drop"), L.Dense(2)]),
         r"'drop' \(Dropout\) .*rate=0.5: dpaudit's DP-SGD trainer has no dropout"),
        (keras.Sequential([keras.Input((5,)), L.Dense(4, activation="tanh", name="t"), L.Dense(2)]),
         r"'t' \(Dense\) .*activation 'tanh' is not supported yet"),
        (keras.Sequential([keras.Input((8, 8, 1)), L.Conv2D(2, 3, padding="same", name="c"), L.Flatten(),
                           L.Dense(2)]),
         r"'c' \(Conv2D\) .*padding='same'"),
        (keras.Sequential([keras.Input((8, 8, 1)), L.Conv2D(2, 3, strides=2, name="c"), L.Flatten(),
                           L.Dense(2)]),
         r"'c' \(Conv2D\) .*strides"),
        (keras.Sequential([keras.Input((5,)), L.Dense(4, activation="softmax", name="s"), L.Dense(2)]),
         r"'s' \(Dense\) .*softmax is allowed on the last layer only"),
        (keras.Sequential([keras.Input((5,)), L.Dense(4), L.Dense(2, activation="relu", name="out")]),
         r"'out' \(Dense\) .*the last Dense layer has activation 'relu'"),
        (keras.Sequential([keras.Input((5,)), L.Dense(1, activation="sigmoid", name="p")]),
         r"'p' \(Dense\) .*activation 'sigmoid'"),
        (keras.Sequential([keras.Input((8, 8, 1)), L.Dense(2, name="d")]),
         r"'d' \(Dense\) .*needs a flat input, got shape \(8, 8, 1\)"),
        (keras.Sequential([keras.Input((5,)), L.Dense(4, use_bias=False, name="nb"), L.Dense(2)]),
         r"'nb' \(Dense\) .*use_bias=False"),
    ]
    for model, message in cases:
        with pytest.raises(UnsupportedLayerError, match=message):
            model_from_keras(model)
    inputs = keras.Input((5,))
    branch = L.Add(name="merge")([L.Dense(3)(inputs), L.Dense(3)(inputs)])
    with pytest.raises(UnsupportedLayerError, match=r"takes its input from .*only a single chain"):
        model_from_keras(keras.Model(inputs, L.Dense(2)(branch)))
    with pytest.raises(KerasImportError, match=r"has no input shape"):
        model_from_keras(keras.Sequential([L.Dense(2)]))


def test_layer_list_matches_the_keras_form(digits):
    layers = [
        {"type": "conv2d", "filters": 4},
        {"type": "maxpool", "size": 2},
        {"type": "flatten"},
    ]
    model = model_from_layer_list(layers, (8, 8, 1), 10)
    assert model.layers == model_from_keras(_cnn()).layers
    mlp = model_from_layer_list([{"type": "dense", "units": 16}, {"type": "dense", "units": 3,
                                                                   "activation": "softmax"}], (30,), 3)
    assert mlp.layers == (Dense(16, "relu"), Dense(3, "linear"))
    with pytest.raises(ParamsError, match=r"unknown key 'model\.layers\[0\]\.unit'"):
        model_from_layer_list([{"type": "dense", "unit": 5}], (30,), 3)
    with pytest.raises(ParamsError, match=r"'model\.layers\[0\]\.type' = 'lstm' must be one of"):
        model_from_layer_list([{"type": "lstm"}], (30,), 3)
    with pytest.raises(ParamsError, match=r"'model\.layers\[0\]\.units' = 0 must be an integer >= 1"):
        model_from_layer_list([{"type": "dense", "units": 0}], (30,), 3)
    with pytest.raises(UnsupportedLayerError, match=r"'model\.layers\[1\]' \(BatchNormalization\)"):
        model_from_layer_list([{"type": "dense", "units": 4}, {"type": "batchnorm"}], (30,), 3)
    with pytest.raises(ParamsError, match=r"units' = 4 must equal the number of classes \(3\)"):
        model_from_layer_list([{"type": "dense", "units": 4, "activation": "softmax"}], (30,), 3)


def test_weights_must_fit_the_mapped_model():
    with pytest.raises(KerasImportError, match=r"has 4 Dense/Conv2D weight arrays, the mapped model 6"):
        params_from_keras_weights(_cnn(), model_from_keras(_mlp()))


def test_same_padding_where_it_equals_valid(digits):
    """A 1×1 convolution and a pool that divides its input evenly are the same under 'same' padding."""
    keras_model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            L.Conv2D(3, 1, padding="same", activation="relu"),
            L.MaxPooling2D(2, padding="same"),
            L.Flatten(),
            L.Dense(4),
        ]
    )
    _randomise(keras_model, 3)
    mapped = model_from_keras(keras_model)
    assert mapped.layers == (Conv2D(3, 1, "relu"), MaxPool(2), Flatten(), Dense(4, "linear"))
    np.testing.assert_allclose(_logits(mapped, keras_model, digits), keras_model(digits).numpy(),
                               rtol=1e-5, atol=1e-5)
    uneven = keras.Sequential([keras.Input((7, 7, 1)), L.MaxPooling2D(2, padding="same", name="p"),
                               L.Flatten(), L.Dense(2)])
    refused = r"'p' \(MaxPooling2D\) .*padding 'same' on input \(7, 7, 1\)"
    with pytest.raises(UnsupportedLayerError, match=refused):
        model_from_keras(uneven)
