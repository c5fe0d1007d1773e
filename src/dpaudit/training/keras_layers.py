"""Layer-by-layer mapping of a chain of Keras layer configs onto :class:`~dpaudit.training.models.Model`.

Each entry is checked (activation, bias, padding, strides, …) and either mapped onto a dpaudit layer
or refused with :class:`UnsupportedLayerError` naming the layer, its class and the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from dpaudit.training.keras_safety import _NESTED, KerasImportError
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

_REGULARISERS = (
    "kernel_regularizer",
    "bias_regularizer",
    "activity_regularizer",
    "kernel_constraint",
    "bias_constraint",
)


class UnsupportedLayerError(KerasImportError):
    """One layer cannot be mapped; names the layer, its class and the reason."""

    def __init__(self, layer: str, class_name: str, reason: str) -> None:
        self.layer, self.class_name, self.reason = layer, class_name, reason
        super().__init__(f"layer '{layer}' ({class_name}) cannot be mapped: {reason}")


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
