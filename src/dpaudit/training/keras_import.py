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
"""

from __future__ import annotations

import dataclasses
import json
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpaudit.config import ParamsError
from dpaudit.training.models import Conv2D, Dense, Flatten, Layer, MaxPool, Model

#: One Keras layer as the mapper sees it: (layer name, class name, layer config).
Entry = tuple[str, str, Mapping[str, Any]]

SUPPORTED = (
    "InputLayer, Dense, Conv2D (valid, stride 1), MaxPooling2D, Flatten, Activation/ReLU (relu, linear; "
    "softmax on the last layer) and Dropout(rate=0)"
)

_BATCH_NORM = (
    "it normalises with statistics of the whole batch, so one example's output and gradient depend on "
    "the other examples; per-example clipping then no longer bounds one record's influence and the "
    "DP-SGD sensitivity argument breaks. Remove it (or use a per-example normalisation when supported)"
)
_PER_EXAMPLE_NORM = (
    "not supported yet: it normalises each example on its own, so it is compatible with per-example "
    "clipping, but dpaudit's model families have no normalisation layer"
)

#: Layer classes refused with a specific reason (others get the generic "not supported").
REFUSED: dict[str, str] = {
    "BatchNormalization": _BATCH_NORM,
    "SyncBatchNormalization": _BATCH_NORM,
    "LayerNormalization": _PER_EXAMPLE_NORM,
    "GroupNormalization": _PER_EXAMPLE_NORM,
    "UnitNormalization": _PER_EXAMPLE_NORM,
}

_NESTED = ("Sequential", "Functional", "Model")
_REGULARISERS = (
    "kernel_regularizer",
    "bias_regularizer",
    "activity_regularizer",
    "kernel_constraint",
    "bias_constraint",
)


class KerasImportError(ValueError):
    """A Keras model cannot be mapped onto dpaudit's model families."""


class UnsupportedLayerError(KerasImportError):
    """One layer cannot be mapped; names the layer, its class and the reason."""

    def __init__(self, layer: str, class_name: str, reason: str) -> None:
        self.layer, self.class_name, self.reason = layer, class_name, reason
        super().__init__(f"layer '{layer}' ({class_name}) cannot be mapped: {reason}")


# -------------------------------------------------------------------------------------- allow-list

#: Modules a serialised Keras object may name. Keras imports the ``module`` of every object in a
#: model's config before safe mode looks at it (the class of CVE-2025-1550: ``"module": "os"`` or
#: ``"keras.config"`` runs code on load), so dpaudit checks the whole tree against this list first.
ALLOWED_MODULES: frozenset[str] = frozenset({
    "keras", "keras.layers", "keras.models", "keras.initializers", "keras.regularizers",
    "keras.constraints", "keras.activations", "keras.losses", "keras.metrics", "keras.optimizers",
    "keras.optimizers.experimental", "keras.optimizers.legacy", "keras.optimizers.schedules",
    "keras.src.engine.functional", "keras.src.engine.sequential", "keras.src.engine.training",
    "keras.src.models.functional", "keras.src.models.sequential", "keras.src.models.model",
})

#: Model classes (of ``keras``, ``keras.models`` and the engine modules above).
MODEL_CLASSES: frozenset[str] = frozenset(_NESTED)

#: Layer classes that carry Python code (a serialised function or op): never passed to Keras.
CODE_CLASSES: frozenset[str] = frozenset({"Lambda", "TFOpLambda", "SlicingOpLambda"})

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODEL_MODULES = frozenset({"keras", "keras.models"} | {m for m in ALLOWED_MODULES if ".src." in m})


class UnsafeKerasConfigError(KerasImportError):
    """A Keras config names a module or class outside dpaudit's allow-list; nothing was imported."""


def check_keras_config(config: Any, where: str = "model") -> None:
    """Refuse a Keras model config unless every serialised object in it is on the allow-list.

    Every mapping in the tree that has a ``module``, ``class_name`` or ``registered_name`` is a
    serialised object, and must have: ``module`` null or in :data:`ALLOWED_MODULES` (exactly; a prefix
    is not enough, ``keras.config`` can switch safe mode off); ``class_name`` a plain identifier, one of
    :data:`MODEL_CLASSES` for a model module, and not one of :data:`CODE_CLASSES`; ``registered_name``
    null or equal to ``class_name`` (a custom object registers ``package>Name``). Raises
    :class:`UnsafeKerasConfigError` naming the path in the tree and the offending value. Pure: it reads
    the parsed JSON and imports nothing.
    """

    def refuse(path: str, field: str, value: Any, why: str) -> None:
        raise UnsafeKerasConfigError(
            f"{where}: {path}.{field} = {value!r} is not allowed ({why}); dpaudit passes a Keras file to "
            f"Keras only when every module and class in it is one of Keras' own built-ins"
        )

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping):
            if {"module", "class_name", "registered_name"} & set(node):
                module, cls = node.get("module"), node.get("class_name")
                registered = node.get("registered_name")
                if module is not None and module not in ALLOWED_MODULES:
                    refuse(path, "module", module, f"allowed modules: {sorted(ALLOWED_MODULES)}")
                if not isinstance(cls, str) or not _IDENTIFIER.match(cls):
                    refuse(path, "class_name", cls, "must be a plain class name")
                if cls in CODE_CLASSES:
                    refuse(path, "class_name", cls, "a layer that carries Python code")
                if module in _MODEL_MODULES and cls not in MODEL_CLASSES and cls != "function":
                    refuse(path, "class_name", cls, f"{module!r} provides only {sorted(MODEL_CLASSES)}")
                if registered is not None and registered != cls:
                    refuse(path, "registered_name", registered, "custom (registered) objects are not allowed")
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(config, "config")


def load_keras_model(path: str | Path) -> Any:
    """``tf.keras.models.load_model`` (safe mode, not compiled) of a ``.keras`` file whose config first
    passed :func:`check_keras_config`: Keras never sees a module or class outside the allow-list."""
    import tensorflow as tf

    path = Path(path)
    check_keras_config(json.loads(_read_keras_config(path)), str(path))
    return tf.keras.models.load_model(path, compile=False, safe_mode=True)


# ---------------------------------------------------------------------------------------- config


def _pair(value: Any) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    first, second = value
    return int(first), int(second)


def _activation(value: Any, name: str, cls: str) -> str:
    """``relu``, ``linear`` or ``softmax`` from a Keras activation config (string or serialised dict)."""
    if value is None:
        return "linear"
    if isinstance(value, Mapping):
        inner = value.get("config")
        named = isinstance(inner, Mapping) and "name" in inner
        value = inner["name"] if named else value.get("class_name")  # type: ignore[index]
    text = str(value).lower()
    if text in ("relu", "linear", "softmax"):
        return text
    raise UnsupportedLayerError(
        name, cls, f"activation {value!r} is not supported yet: dpaudit's layers have relu and linear "
        f"(and softmax on the last layer, taken as the logits' loss)"
    )


class _Builder:
    """Accumulates mapped layers while tracking the activation shape and each layer's Keras origin."""

    def __init__(self, input_shape: tuple[int, ...]) -> None:
        self.shape = input_shape
        self.layers: list[Layer] = []
        self.origin: list[tuple[str, str]] = []
        self.softmax = False

    def add(self, layer: Layer, name: str, cls: str) -> None:
        try:
            out = layer.out_shape(self.shape)
        except ValueError as exc:
            raise UnsupportedLayerError(name, cls, f"input shape {self.shape} does not fit: {exc}") from exc
        if any(s < 1 for s in out):
            raise UnsupportedLayerError(name, cls, f"input shape {self.shape} gives an empty output {out}")
        self.layers.append(layer)
        self.origin.append((name, cls))
        self.shape = out

    def fold_relu(self, name: str, cls: str) -> None:
        """Apply relu to the output so far: set it on the last trainable layer, across pool/flatten."""
        for i in range(len(self.layers) - 1, -1, -1):
            layer = self.layers[i]
            if isinstance(layer, Dense | Conv2D):
                self.layers[i] = dataclasses.replace(layer, activation="relu")  # relu∘relu = relu
                return
        raise UnsupportedLayerError(name, cls, "a relu on the model's inputs has no counterpart in dpaudit")


def _channels_last(name: str, cls: str, config: Mapping[str, Any]) -> None:
    if config.get("data_format") not in (None, "channels_last"):
        raise UnsupportedLayerError(name, cls, f"data_format={config['data_format']!r}: channels_last only")


def _check_common(name: str, cls: str, config: Mapping[str, Any]) -> None:
    if config.get("use_bias", True) is False:
        raise UnsupportedLayerError(name, cls, "use_bias=False: dpaudit's Dense and Conv2D train a bias")
    for key in _REGULARISERS:
        if config.get(key) is not None:
            raise UnsupportedLayerError(
                name, cls, f"{key} is set: the DP-SGD trainer's loss has no regularisation terms"
            )
    _channels_last(name, cls, config)


def _map_entry(b: _Builder, entry: Entry, is_last: bool) -> None:
    name, cls, config = entry
    if b.softmax:
        raise UnsupportedLayerError(name, cls, "follows a softmax, which must be the model's last operation")
    if cls in REFUSED:
        raise UnsupportedLayerError(name, cls, REFUSED[cls])
    if cls in _NESTED:
        raise UnsupportedLayerError(name, cls, "a nested model: put its layers directly in the outer model")
    if cls == "InputLayer":
        raise UnsupportedLayerError(name, cls, "an input layer in the middle of the model")
    if cls == "Dense":
        _check_common(name, cls, config)
        act = _activation(config.get("activation"), name, cls)
        if len(b.shape) != 1:
            raise UnsupportedLayerError(
                name, cls, f"needs a flat input, got shape {b.shape} (Keras would apply it to the last axis "
                f"only): add Flatten before it"
            )
        if act == "softmax" and not is_last:
            raise UnsupportedLayerError(name, cls, "softmax is allowed on the last layer only")
        b.add(Dense(int(config["units"]), "relu" if act == "relu" else "linear"), name, cls)
        b.softmax = act == "softmax"
    elif cls == "Conv2D":
        _check_common(name, cls, config)
        act = _activation(config.get("activation"), name, cls)
        if act == "softmax":
            raise UnsupportedLayerError(name, cls, "softmax is allowed on the last (Dense) layer only")
        k, k2 = _pair(config["kernel_size"])
        padding = str(config.get("padding", "valid")).lower()
        problems = []
        if k != k2:
            problems.append(f"kernel_size {(k, k2)} is not square")
        if _pair(config.get("strides", 1)) != (1, 1):
            problems.append(f"strides {config.get('strides')} (only 1)")
        if _pair(config.get("dilation_rate", 1)) != (1, 1):
            problems.append(f"dilation_rate {config.get('dilation_rate')} (only 1)")
        if int(config.get("groups", 1)) != 1:
            problems.append(f"groups={config.get('groups')} (only 1)")
        if padding != "valid" and not (padding == "same" and k == 1):
            problems.append(f"padding={padding!r} (only 'valid', or 'same' with a 1×1 kernel)")
        if len(b.shape) != 3:
            problems.append(f"needs an [h, w, c] input, got shape {b.shape}")
        if problems:
            raise UnsupportedLayerError(name, cls, "not supported yet: " + "; ".join(problems))
        b.add(Conv2D(int(config["filters"]), k, "relu" if act == "relu" else "linear"), name, cls)
    elif cls == "MaxPooling2D":
        _channels_last(name, cls, config)
        s, s2 = _pair(config.get("pool_size", 2))
        strides = config.get("strides")
        padding = str(config.get("padding", "valid")).lower()
        if len(b.shape) != 3:
            raise UnsupportedLayerError(name, cls, f"needs an [h, w, c] input, got shape {b.shape}")
        divides = b.shape[0] % s == 0 and b.shape[1] % s == 0
        if s != s2 or (strides is not None and _pair(strides) != (s, s)) or not (
            padding == "valid" or (padding == "same" and divides)
        ):
            raise UnsupportedLayerError(
                name, cls, f"not supported yet: pool_size {(s, s2)}, strides {strides}, padding {padding!r} "
                f"on input {b.shape} (only square pools with strides = pool size and valid padding)"
            )
        b.add(MaxPool(s), name, cls)
    elif cls == "Flatten":
        _channels_last(name, cls, config)
        b.add(Flatten(), name, cls)
    elif cls in ("Activation", "ReLU"):
        if cls == "ReLU":
            extras = {k: config.get(k) for k in ("max_value", "negative_slope", "threshold")}
            shifted = float(extras["negative_slope"] or 0) != 0 or float(extras["threshold"] or 0) != 0
            if extras["max_value"] is not None or shifted:
                raise UnsupportedLayerError(name, cls, f"only the plain relu is supported yet, got {extras}")
            act = "relu"
        else:
            act = _activation(config.get("activation"), name, cls)
        if act == "relu":
            b.fold_relu(name, cls)
        elif act == "softmax":
            last = b.layers[-1] if b.layers else None
            if not is_last or not isinstance(last, Dense) or last.activation != "linear":
                raise UnsupportedLayerError(
                    name, cls, "softmax is allowed only as the last layer, right after a linear Dense layer"
                )
            b.softmax = True
    elif cls == "Dropout":
        rate = float(config.get("rate", 0.0))
        if rate != 0.0:
            raise UnsupportedLayerError(
                name, cls, f"rate={rate}: dpaudit's DP-SGD trainer has no dropout, so the audited model "
                f"would be trained differently from yours; set rate=0 for the audit or remove the layer"
            )
    else:
        raise UnsupportedLayerError(name, cls, f"not supported: dpaudit maps {SUPPORTED}")


def _build(name: str, input_shape: Sequence[int], entries: Sequence[Entry]) -> Model:
    """Map a chain of layer entries (input layer excluded) onto a :class:`Model`."""
    if not entries:
        raise KerasImportError(f"model '{name}' has no layers")
    b = _Builder(tuple(int(s) for s in input_shape))
    for i, entry in enumerate(entries):
        _map_entry(b, entry, is_last=i == len(entries) - 1)
    last = b.layers[-1] if b.layers else None
    where, cls = b.origin[-1] if b.origin else (entries[-1][0], entries[-1][1])
    if not isinstance(last, Dense):
        raise UnsupportedLayerError(where, cls, "the model must end in a Dense layer giving the class logits")
    if last.activation != "linear":
        raise UnsupportedLayerError(
            where, cls, f"the last Dense layer has activation {last.activation!r}; it must be linear or "
            f"softmax (its outputs are the logits of dpaudit's softmax cross-entropy)"
        )
    if last.units < 2:
        raise UnsupportedLayerError(
            where, cls, f"{last.units} output unit: use Dense(2) with softmax for a binary task (the loss is "
            f"softmax cross-entropy over at least two classes)"
        )
    return Model(name, input_shape, last.units, b.layers)


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


def _read_keras_config(path: Path) -> str:
    """The ``config.json`` text of a ``.keras`` archive (a zip file), or a :class:`KerasImportError`."""
    if path.suffix != ".keras":
        raise KerasImportError(f"{path}: expected a .keras file (Keras' `model.save('name.keras')`)")
    if not path.is_file():
        raise KerasImportError(f"{path}: file does not exist")
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.read("config.json").decode("utf-8")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as exc:
        raise KerasImportError(f"{path}: not a .keras archive with a config.json: {exc}") from exc


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
