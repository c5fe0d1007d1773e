"""Map a Keras model (live, ``model.to_json()``, a ``.keras`` file, or a params layer list) onto
dpaudit's trials-at-once model families (:mod:`dpaudit.training.models`).

A user audits *their* architecture: the mapping reads the Keras model's configuration — never
executing code from it — and builds the equivalent :class:`~dpaudit.training.models.Model`, whose
forward pass on the same weights gives the same logits (see :func:`params_from_keras_weights`).

What maps:

- ``InputLayer`` (the input shape), ``Dense`` (flat input), ``Conv2D`` (square kernel, stride 1,
  ``valid`` padding — or ``same`` for a 1×1 kernel, where the two coincide; no dilation or groups),
  ``MaxPooling2D`` (square, stride = pool size, ``valid`` padding, or ``same`` where the input
  divides evenly), ``Flatten`` (channels last);
- activations ``relu`` and ``linear``, as a layer argument, an ``Activation`` layer or a default
  ``ReLU`` layer. A standalone relu is folded into the last Dense/Conv2D before it, across any
  MaxPool/Flatten in between (relu is monotone, so it commutes with max pooling and reshaping);
- ``softmax`` on the **last** layer only: dpaudit's models emit logits and train with softmax
  cross-entropy, which is exactly a softmax output layer with the cross-entropy loss, so the softmax
  is taken as part of the loss and the mapped model's outputs are its logits;
- ``Dropout`` with ``rate = 0`` (the identity).

What is refused, naming the layer, its class and the reason (:class:`UnsupportedLayerError`):

- ``BatchNormalization``: batch statistics mix the examples of a batch, so one example's output and
  gradient depend on the others; per-example clipping then no longer bounds one record's influence
  and the DP-SGD sensitivity argument breaks.
- ``LayerNormalization``, ``GroupNormalization``, ``UnitNormalization``: per-example, hence
  compatible with per-example clipping, but not supported yet (the model families have no
  normalisation layer).
- ``Dropout`` with ``rate > 0``: the trainer has no dropout, so the audited model would be trained
  differently from the user's; set ``rate=0`` for the audit or remove the layer.
- Activations other than relu/linear (``models.py`` has only those two), softmax before the last
  layer, ``use_bias=False`` (the families always train a bias), regularisers and constraints (the
  trainer's loss has none), strides, dilation, ``same`` padding where it differs from ``valid``, any
  other layer class, nested models, and functional models that are not a single chain.

The config allow-list lives in :mod:`dpaudit.training.keras_safety`, the per-layer mapping in
:mod:`dpaudit.training.keras_layers`; every public name stays importable from here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.config import ParamsError
from dpaudit.training.keras_layers import (
    REFUSED,
    SUPPORTED,
    Entry,
    UnsupportedLayerError,
    _build,
)
from dpaudit.training.keras_safety import (
    ALLOWED_MODULES,
    CODE_CLASSES,
    MODEL_CLASSES,
    KerasImportError,
    UnsafeKerasConfigError,
    _read_keras_config,
    check_keras_config,
    load_keras_model,
)
from dpaudit.training.models import Model

__all__ = [
    "ALLOWED_MODULES",
    "CODE_CLASSES",
    "MODEL_CLASSES",
    "REFUSED",
    "SUPPORTED",
    "Entry",
    "KerasImportError",
    "UnsafeKerasConfigError",
    "UnsupportedLayerError",
    "check_keras_config",
    "load_keras_model",
    "model_from_keras",
    "model_from_keras_config",
    "model_from_keras_file",
    "model_from_keras_json",
    "model_from_layer_list",
    "params_from_keras_weights",
]


def _input_shape(entry_config: Mapping[str, Any]) -> tuple[int, ...] | None:
    shape = entry_config.get("batch_input_shape") or entry_config.get("batch_shape")
    if shape is None:
        return None
    if any(s is None for s in shape[1:]):
        raise KerasImportError(f"input shape {list(shape)} has unknown dimensions; give every dimension")
    return tuple(int(s) for s in shape[1:])


def _inbound(node: Any) -> list[str]:
    """Names of the layers feeding one inbound node (Keras 2 list form, or Keras 3 ``keras_history``)."""
    if isinstance(node, list):
        return [str(item[0]) for item in node if isinstance(item, list) and item]
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            if "keras_history" in value:
                found.append(str(value["keras_history"][0]))
            else:
                for v in value.values():
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(node)
    return found


def model_from_keras_config(config: Mapping[str, Any]) -> Model:
    """Map a Keras model configuration (the parsed ``model.to_json()``) onto a :class:`Model`."""
    cls = config.get("class_name")
    inner = config.get("config")
    if cls not in ("Sequential", "Functional", "Model") or not isinstance(inner, Mapping):
        raise KerasImportError(
            f"not a Keras Sequential or functional model configuration (class_name {cls!r}); subclassed "
            f"models have no configuration to map"
        )
    name = str(inner.get("name", "keras"))
    raw = inner.get("layers")
    if not isinstance(raw, list):
        raise KerasImportError(f"model '{name}': its configuration lists no layers")
    entries: list[Entry] = []
    for layer in raw:
        lcfg = layer.get("config", {})
        entries.append((str(lcfg.get("name", layer.get("name", "?"))), str(layer.get("class_name")), lcfg))
    if cls != "Sequential":
        _check_chain(name, inner, raw)
    input_shape: tuple[int, ...] | None = None
    if entries and entries[0][1] == "InputLayer":
        input_shape = _input_shape(entries[0][2])
        entries = entries[1:]
    elif entries:
        input_shape = _input_shape(entries[0][2])
    if input_shape is None and inner.get("build_input_shape"):
        input_shape = _input_shape({"batch_input_shape": inner["build_input_shape"]})
    if input_shape is None:
        raise KerasImportError(
            f"model '{name}' has no input shape: start it with keras.Input(shape=...) or build it"
        )
    return _build(name, input_shape, entries)


def _check_chain(name: str, inner: Mapping[str, Any], raw: list[Mapping[str, Any]]) -> None:
    """A functional model maps only if it is one chain: each layer fed by the one before it."""
    inputs, outputs = inner.get("input_layers", []), inner.get("output_layers", [])
    if len(inputs) != 1 or len(outputs) != 1:
        raise KerasImportError(
            f"model '{name}' has {len(inputs)} inputs and {len(outputs)} outputs; only a single chain maps"
        )
    names = [str(layer.get("name", layer.get("config", {}).get("name"))) for layer in raw]
    for i, layer in enumerate(raw[1:], start=1):
        nodes = layer.get("inbound_nodes", [])
        feeds = [n for node in nodes for n in _inbound(node)]
        if len(nodes) != 1 or feeds != [names[i - 1]]:
            raise UnsupportedLayerError(
                names[i], str(layer.get("class_name")),
                f"takes its input from {feeds}, not from the previous layer '{names[i - 1]}': only a single "
                f"chain of layers (no branches, merges or shared layers) maps onto dpaudit's models",
            )
    if outputs[0][0] != names[-1]:
        raise KerasImportError(f"model '{name}': its output is '{outputs[0][0]}', not its last layer")


def model_from_keras(keras_model: Any) -> Model:
    """Map a live ``tf.keras`` Sequential or functional model (through its configuration)."""
    try:
        text = keras_model.to_json()
    except RuntimeError as exc:  # Keras: subclassed models have no config (a RuntimeError subclass)
        raise KerasImportError(
            f"model '{getattr(keras_model, 'name', '?')}' is a subclassed model without a configuration; "
            f"write it as a Sequential or functional model"
        ) from exc
    return model_from_keras_json(text)


def model_from_keras_json(json_text: str) -> Model:
    """Map a Keras model definition as written by ``model.to_json()``."""
    try:
        config = json.loads(json_text)
    except json.JSONDecodeError as exc:
        raise KerasImportError(f"not a Keras model JSON: {exc}") from exc
    if not isinstance(config, Mapping):
        raise KerasImportError("not a Keras model JSON: the top level is not an object")
    check_keras_config(config)
    return model_from_keras_config(config)


def model_from_keras_file(path: str | Path) -> Model:
    """Map the architecture stored in a ``.keras`` file (its ``config.json``; nothing is executed).

    The whole config is checked against the allow-list first (:func:`check_keras_config`), so a file
    this accepts is safe to hand to Keras' loader (:func:`load_keras_model`)."""
    path = Path(path)
    text = _read_keras_config(path)
    try:
        return model_from_keras_json(text)
    except UnsupportedLayerError as exc:
        raise UnsupportedLayerError(exc.layer, exc.class_name, f"{exc.reason} (in {path})") from None
    except UnsafeKerasConfigError as exc:
        raise UnsafeKerasConfigError(f"{path}: {exc}") from None
    except KerasImportError as exc:
        raise KerasImportError(f"{path}: {exc}") from None


# ------------------------------------------------------------------------------------- layer list

#: Layer-list types and their keys (params form) → Keras class and config key names.
_LIST_TYPES: dict[str, tuple[str, dict[str, str]]] = {
    "dense": ("Dense", {"units": "units", "activation": "activation"}),
    "conv2d": ("Conv2D", {"filters": "filters", "kernel": "kernel_size", "activation": "activation",
                          "padding": "padding"}),
    "maxpool": ("MaxPooling2D", {"size": "pool_size"}),
    "flatten": ("Flatten", {}),
    "activation": ("Activation", {"activation": "activation"}),
    "dropout": ("Dropout", {"rate": "rate"}),
}
_LIST_ALIASES = {
    "maxpooling2d": "maxpool", "max_pooling2d": "maxpool", "relu": "relu", "batchnorm": "BatchNormalization",
    "batch_normalization": "BatchNormalization", "batchnormalization": "BatchNormalization",
    "layernorm": "LayerNormalization", "layer_normalization": "LayerNormalization",
    "layernormalization": "LayerNormalization", "groupnorm": "GroupNormalization",
}
_REQUIRED = {"dense": ("units",), "conv2d": ("filters",)}


def model_from_layer_list(
    layers: Sequence[Mapping[str, Any]],
    input_shape: Sequence[int],
    num_classes: int,
    name: str = "custom",
    where: str = "model.layers",
) -> Model:
    """The params form: ``[{"type": "dense", "units": 64, "activation": "relu"}, …]`` → :class:`Model`.

    Types: ``dense`` (units, activation), ``conv2d`` (filters, kernel = 3, activation, padding),
    ``maxpool`` (size = 2), ``flatten``, ``activation`` (activation), ``dropout`` (rate). Hidden
    layers default to relu. The list describes the hidden layers: the output layer
    ``Dense(num_classes)`` giving the logits is appended, unless the last entry already is a dense
    layer with ``activation: softmax`` (then its units must equal ``num_classes``). Keys are checked
    like params (:class:`~dpaudit.config.ParamsError` naming ``<where>[i].<key>``); layers the model
    families cannot train are refused as in :func:`model_from_keras`, named ``<where>[i]``.
    """
    entries: list[Entry] = []
    for i, item in enumerate(layers):
        key = f"{where}[{i}]"
        if not isinstance(item, Mapping) or "type" not in item:
            raise ParamsError(f"params: '{key}' = {item!r} must be a mapping with a 'type'")
        kind = str(item["type"]).lower()
        kind = _LIST_ALIASES.get(kind, kind)
        if kind in REFUSED:
            raise UnsupportedLayerError(key, kind, REFUSED[kind])
        if kind not in _LIST_TYPES and kind != "relu":
            raise ParamsError(
                f"params: '{key}.type' = {item['type']!r} must be one of {sorted(_LIST_TYPES)}"
            )
        if kind == "relu":
            kind, item = "activation", {"type": "activation", "activation": "relu"}
        cls, names = _LIST_TYPES[kind]
        unknown = sorted(set(item) - {"type", *names})
        if unknown:
            raise ParamsError(f"params: unknown key '{key}.{unknown[0]}' (known keys: {sorted(names)})")
        for required in _REQUIRED.get(kind, ()):
            if required not in item:
                raise ParamsError(f"params: missing key '{key}.{required}'")
        config: dict[str, Any] = {"name": key}
        if kind in ("dense", "conv2d"):
            config["activation"] = "relu"
        if kind == "conv2d":
            config["kernel_size"] = 3
        for own, keras_key in names.items():
            if own in item:
                config[keras_key] = item[own]
        for own in ("units", "filters", "kernel", "size"):
            value = item.get(own)
            if own in item and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ParamsError(f"params: '{key}.{own}' = {value!r} must be an integer >= 1")
        entries.append((key, cls, config))
    last = entries[-1] if entries else None
    if not (last and last[1] == "Dense" and str(last[2].get("activation")).lower() == "softmax"):
        entries.append((f"{where}[output]", "Dense", {"units": int(num_classes), "activation": "linear"}))
    model = _build(name, input_shape, entries)
    if model.num_classes != int(num_classes):
        raise ParamsError(
            f"params: '{where}[{len(layers) - 1}].units' = {model.num_classes} must equal the number of "
            f"classes ({num_classes}) for the softmax output layer"
        )
    return model


# ------------------------------------------------------------------------------------------ weights


def params_from_keras_weights(keras_model: Any, model: Model, trials: int = 1) -> list[np.ndarray]:
    """The Keras model's Dense/Conv2D weights as dpaudit parameters ``[trials, ...]`` (float32).

    Keras stores a Dense kernel as ``[in, out]`` and a Conv2D kernel as ``[k, k, c_in, filters]``,
    the layouts :mod:`dpaudit.training.models` uses, so each weight is broadcast to the trial axis
    unchanged; every trial starts from the same weights. Shapes are checked against ``model``.
    """
    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    weights: list[np.ndarray] = []
    for layer in keras_model.layers:
        if type(layer).__name__ in ("Dense", "Conv2D"):
            weights.extend(np.asarray(w, dtype=np.float32) for w in layer.get_weights())
    if len(weights) != len(model.param_shapes):
        raise KerasImportError(
            f"model '{model.name}': the Keras model has {len(weights)} Dense/Conv2D weight arrays, "
            f"the mapped model {len(model.param_shapes)}; map this Keras model with model_from_keras first"
        )
    for i, (w, shape) in enumerate(zip(weights, model.param_shapes, strict=True)):
        if tuple(w.shape) != tuple(shape):
            raise KerasImportError(
                f"model '{model.name}': weight {i} has shape {w.shape} in Keras, {shape} in the mapped model"
            )
    return [np.broadcast_to(w, (trials, *w.shape)).copy() for w in weights]
