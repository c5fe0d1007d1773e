"""Find the layer that reads the raw input, in the models people write, and refuse with a remedy that fits.

The inert-canary audit needs a ``Dense`` layer whose kernel rows are the raw (flattened) input's
features: the rows of features that are 0 in every real record are then moved only by canaries and
noise (:mod:`dpaudit.training_audit.canaries`). Models hide that layer in many ways: a ``Sequential`` inside a
``Model`` subclass that overrides ``train_step`` (the DP-SGD tutorials' pattern), a functional model
inside a subclass, layers held as attributes. So the layer is found by *calling* the model once and
recording which layer runs first on the input (each layer's ``call`` is wrapped for that one call),
and then verified: on an input that is 0 on the audited features, the gradient of the model's output
must be exactly 0 on their kernel rows (a subclass' ``call`` may transform the input before any layer).
Where there is no such layer, the refusal names the layer found and a remedy for that kind of layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.training_audit.canaries import REMEDY

__all__ = ["PASSTHROUGH_LAYERS", "first_dense_kernel", "input_reader", "remedy_for"]

#: Layers that pass the input on unchanged in value (0 stays 0 at the same feature, up to reshaping).
PASSTHROUGH_LAYERS = ("InputLayer", "Flatten", "Reshape", "Dropout")

#: What runs the audit today on the same DP-SGD code, for a model whose first layer is not Dense.
DENSE_VARIANT = (
    "the audit checks your training step (sampling, clipping, noise), which does not depend on the first "
    "layer: run it once on a variant of the model whose first layer after Flatten is Dense"
)
CONV_REMEDY = (
    "a convolution shares each kernel weight across every pixel, so no weight of it is moved only by "
    "pixels that are 0 in every image. An extra input channel that is 0 in every real record would give "
    "such weights (kernel[:, :, that channel, :]), but this version reads only a Dense layer on the raw "
    f"input: {DENSE_VARIANT}; pixels that are 0 in every image, or audit-only pixels you add (e.g. "
    "x = tf.pad(x, [[0, 0], [0, 0], [0, 2], [0, 0]]) in your loader), are then its inert features"
)
EMBEDDING_REMEDY = (
    "an Embedding looks its rows up by token id, so its inert weights would be the rows of audit-only "
    "token ids (vocabulary entries that no real record uses); this version inserts canaries as feature "
    f"vectors and reads only a Dense layer on the raw input: {DENSE_VARIANT} on a vector encoding of the "
    "tokens (e.g. counts or one-hot columns) with two or more audit-only vocabulary columns no record uses"
)
NORMALIZATION_REMEDY = (
    "a normalisation layer moves every feature by statistics of the data or the batch, so a feature that "
    "is 0 in every record is no longer 0 after it and no weight stays inert. Normalise in your loader "
    "instead (or exclude the audit-only columns from it) so that the first Dense layer reads them as 0; "
    f"then {REMEDY}"
)
OTHER_REMEDY = (
    f"the audit needs a Dense layer that reads the raw (flattened) input: {DENSE_VARIANT}, and {REMEDY}"
)


def remedy_for(layer_type: str) -> str:
    """The remedy that fits a model whose first layer on the input is of type ``layer_type``."""
    if "Conv" in layer_type:
        return CONV_REMEDY
    if layer_type == "Embedding":
        return EMBEDDING_REMEDY
    if "Normalization" in layer_type:
        return NORMALIZATION_REMEDY
    if layer_type == "Dense":
        return REMEDY
    return OTHER_REMEDY


def _layers(model: Any) -> list[Any]:
    """Every layer inside ``model`` that is not itself a model (nested models are looked through)."""
    import tensorflow as tf

    layer, nested = tf.keras.layers.Layer, tf.keras.Model
    return [m for m in model.submodules if isinstance(m, layer) and not isinstance(m, nested)]


def input_reader(model: Any, sample: Any) -> tuple[Any | None, Any]:
    """(the first layer other than :data:`PASSTHROUGH_LAYERS` that runs when ``model`` is called on
    ``sample``, or ``None``; the model's output). Each layer's ``call`` is wrapped for this call only."""
    order: list[Any] = []
    patched: list[Any] = []

    def recorder(layer: Any, original: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            order.append(layer)
            return original(*args, **kwargs)

        return call

    try:
        for layer in _layers(model):
            if "call" in vars(layer):
                continue  # a call already set on the instance: leave it alone
            object.__setattr__(layer, "call", recorder(layer, layer.call))
            patched.append(layer)
        output = model(sample, training=False)
    finally:
        for layer in patched:
            object.__delattr__(layer, "call")
    reader = next((layer for layer in order if type(layer).__name__ not in PASSTHROUGH_LAYERS), None)
    return reader, output


def _structural_reader(model: Any) -> Any | None:
    """The first non-passthrough layer in ``model.layers`` order, looking into nested models."""
    import tensorflow as tf

    for layer in model.layers:
        if type(layer).__name__ in PASSTHROUGH_LAYERS:
            continue
        if isinstance(layer, tf.keras.Model):
            return _structural_reader(layer)
        return layer
    return None


def _check_inert_rows(model: Any, kernel: Any, sample: np.ndarray, rows: np.ndarray, where: str) -> None:
    """Refuse unless an input that is 0 on ``rows`` leaves the kernel's ``rows`` with zero gradient."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=sample.shape).astype(sample.dtype).reshape(sample.shape[0], -1)
    x[:, rows] = 0
    x = tf.constant(x.reshape(sample.shape))
    with tf.GradientTape() as tape:
        outputs = tf.nest.flatten(model(x, training=False))
        total = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float32)) for o in outputs])
    grad = tape.gradient(total, kernel)
    leaked = 0.0 if grad is None else float(np.max(np.abs(np.asarray(grad)[rows])))
    if leaked != 0.0:
        raise ValueError(
            f"{where}: its weights from input features {rows.tolist()[:8]}{'…' if rows.size > 8 else ''}, "
            "which are 0 in every record, still receive a gradient from an input that is 0 on them (largest "
            f"{leaked:.3g}): the model changes the input before that layer (e.g. subtracts a mean in "
            "call()), so no weight is moved only by canaries. Make that transformation keep 0 at 0 on those "
            f"features, or apply it in your loader instead; {REMEDY}"
        )


def first_dense_kernel(model: Any, features: int, sample: np.ndarray | None = None, rows: Any = None) -> Any:
    """The kernel [features, units] of the Dense layer that reads the raw input, or a ``ValueError``
    naming the layer found and the remedy that fits it.

    With ``sample`` (a few inputs of the dataset's shape) the layer is found by calling the model
    (:func:`input_reader`), which sees through nested and subclassed models, and a model with several
    outputs is refused; with ``rows`` too, the kernel's ``rows`` are verified inert. Without ``sample``
    the layers are read in ``model.layers`` order, nested models included.
    """
    import tensorflow as tf

    if sample is not None:
        layer, output = input_reader(model, sample)
        outputs = tf.nest.flatten(output)
        if len(outputs) != 1:
            raise ValueError(
                f"the model returns {len(outputs)} outputs ({type(output).__name__}): the audit scores each "
                "canary by the per-example loss of one output against one label. Audit your training code on "
                "a single-output version of the model (one output, one label tensor, one loss)"
            )
    else:
        layer = _structural_reader(model)
    if layer is None:
        raise ValueError(
            "no layer of the model reads the input (calling it ran only pass-through layers); "
            f"the audit needs a Dense layer on the raw input: {REMEDY}"
        )
    name = type(layer).__name__
    where = f"the first layer that reads the input is {name} {layer.name!r}"
    if not (isinstance(layer, tf.keras.layers.Dense) and int(layer.kernel.shape[0]) == features):
        detail = (
            f", a Dense layer on {int(layer.kernel.shape[0])} inputs, not on all {features} input features"
            if isinstance(layer, tf.keras.layers.Dense)
            else ", not a Dense layer on the raw input"
        )
        raise ValueError(
            f"{where}{detail}: no parameters that only canaries move. Remedy: {remedy_for(name)}"
        )
    if layer.kernel_regularizer is not None:
        raise ValueError(
            f"layer {layer.name!r} has a kernel regularizer: real records' gradients then move every "
            "first-layer weight and no parameter is inert; audit without it"
        )
    if not any(v.ref() == layer.kernel.ref() for v in model.trainable_variables):
        raise ValueError(
            f"{where}, but its kernel is not among the model's trainable variables (frozen?): nothing of it "
            "is trained, so canaries leave no trace there; make that layer trainable for the audit"
        )
    if sample is not None and rows is not None:
        _check_inert_rows(model, layer.kernel, np.asarray(sample), np.asarray(rows), where)
    return layer.kernel
