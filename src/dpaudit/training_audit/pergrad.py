"""Per-example gradients for the observer: each canary's gradient on the canary rows and its norm, and the
batch's correctly clipped sum Σ_i clip_C(g_i), both at the current weights.

Two paths with the same results. Any Keras model: ``GradientTape.jacobian`` (TF's vectorised
per-example gradients). A chain of ``Dense`` layers (the usual DP-SGD MLP): the per-example gradient of
a dense layer is the outer product a_{l−1} ⊗ δ_l of its input and the loss' gradient at its
pre-activation, so norms and clipped sums need only those two per layer (Goodfellow 2015, "Efficient
per-example gradient computations"; the same identity as TF Privacy's fast clipping registry, which has
no entry for these two quantities on their own, hence written here). The chain path is checked against
the jacobian path on the canaries when the audit starts and used only where they agree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["dense_chain", "jacobian_functions", "chain_functions"]

PASSTHROUGH = ("InputLayer", "Flatten")

Functions = tuple[Callable[[Any, Any], Any], Callable[[Any, Any], list[Any]]]


def _graph_layers(model: Any) -> list[Any] | None:
    """The layers of a Sequential or functional model in order, nested ones of the same kind flattened;
    ``None`` where any model on the way is subclassed (its ``call`` may do anything)."""
    import tensorflow as tf

    if not getattr(model, "_is_graph_network", False):
        return None
    out: list[Any] = []
    for layer in model.layers:
        if isinstance(layer, tf.keras.Model):
            inner = _graph_layers(layer)
            if inner is None:
                return None
            out.extend(inner)
        elif type(layer).__name__ not in PASSTHROUGH:
            out.append(layer)
    return out


def dense_chain(model: Any) -> list[Any] | None:
    """The model's Dense layers if it is a plain chain of them (whose trainable variables are their
    kernels and biases, in order; Sequential or functional models nested in one another count), else
    ``None`` (a subclassed model's ``call`` is not read: the jacobian path serves it)."""
    import tensorflow as tf

    layers = _graph_layers(model)
    if not layers or not all(type(layer) is tf.keras.layers.Dense for layer in layers):
        return None
    expected = [
        v for layer in layers for v in ((layer.kernel, layer.bias) if layer.use_bias else (layer.kernel,))
    ]
    actual = list(model.trainable_variables)
    if len(expected) != len(actual) or any(a.ref() != b.ref() for a, b in zip(actual, expected, strict=True)):
        return None
    return layers


def _per_example_losses(loss: Any, y: Any, out: Any) -> Any:
    import tensorflow as tf

    n = tf.shape(out)[0]
    return tf.reduce_mean(tf.reshape(loss(y, out), [n, -1]), axis=1)


def jacobian_functions(model: Any, loss: Any, kernel_index: int, rows: Any, clip: float) -> Functions:
    """(canary, clipped_sum) through ``tape.jacobian``: works for any model."""
    import tensorflow as tf

    variables = list(model.trainable_variables)

    def jacobians(x: Any, y: Any) -> tuple[list[Any], Any]:
        n = tf.shape(x)[0]
        with tf.GradientTape() as tape:
            losses = _per_example_losses(loss, y, model(x, training=False))
        jac = tape.jacobian(losses, variables, unconnected_gradients="zero")
        sq = tf.add_n([tf.reduce_sum(tf.reshape(tf.square(j), [n, -1]), axis=1) for j in jac])
        return jac, tf.sqrt(sq)

    def canary(x: Any, y: Any) -> Any:
        jac, norms = jacobians(x, y)
        return tf.reshape(tf.gather(jac[kernel_index], rows, axis=1), [tf.shape(x)[0], -1]), norms

    def clipped_sum(x: Any, y: Any) -> list[Any]:
        jac, norms = jacobians(x, y)
        factor = tf.minimum(1.0, clip / tf.maximum(norms, 1e-30))
        return [tf.tensordot(factor, tf.cast(j, tf.float32), axes=1) for j in jac]

    return canary, clipped_sum


def chain_functions(model: Any, layers: list[Any], loss: Any, rows: Any, clip: float) -> Functions:
    """(canary, clipped_sum) for a chain of Dense layers (first layer's kernel holds the canary rows)."""
    import tensorflow as tf

    def forward(x: Any, y: Any) -> tuple[list[Any], list[Any], Any]:
        inputs, deltas_of = [], []
        with tf.GradientTape() as tape:
            h = tf.reshape(tf.cast(x, layers[0].kernel.dtype), [tf.shape(x)[0], -1])
            for layer in layers:
                inputs.append(h)
                z = tf.matmul(h, layer.kernel)
                if layer.use_bias:
                    z = z + layer.bias
                deltas_of.append(z)
                h = layer.activation(z)
            total = tf.reduce_sum(_per_example_losses(loss, y, h))
        deltas = tape.gradient(total, deltas_of)
        sq = tf.add_n(
            [
                tf.reduce_sum(tf.square(a), 1) * tf.reduce_sum(tf.square(d), 1)
                + (tf.reduce_sum(tf.square(d), 1) if layer.use_bias else 0.0)
                for a, d, layer in zip(inputs, deltas, layers, strict=True)
            ]
        )
        return inputs, deltas, tf.sqrt(sq)

    def canary(x: Any, y: Any) -> Any:
        inputs, deltas, norms = forward(x, y)
        on_rows = tf.gather(inputs[0], rows, axis=1)[:, :, None] * deltas[0][:, None, :]
        return tf.reshape(on_rows, [tf.shape(x)[0], -1]), norms

    def clipped_sum(x: Any, y: Any) -> list[Any]:
        inputs, deltas, norms = forward(x, y)
        factor = tf.minimum(1.0, clip / tf.maximum(norms, 1e-30))[:, None]
        out: list[Any] = []
        for a, d, layer in zip(inputs, deltas, layers, strict=True):
            out.append(tf.matmul(a * factor, d, transpose_a=True))
            if layer.use_bias:
                out.append(tf.reduce_sum(d * factor, axis=0))
        return out

    return canary, clipped_sum
