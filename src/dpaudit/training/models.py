"""Models as pure functions of parameter lists with a leading trial axis.

Every parameter tensor has shape ``[T, ...]``: T independent models ("trials") are evaluated in
one vectorized computation on a shared set of examples. Each trainable layer also knows how to
compute, from its input activations ``a`` and the per-example gradient ``δ`` of the loss with
respect to its pre-activation output, the squared norm of every example's parameter gradient and
the sum of clipped per-example gradients, without materialising per-example gradients for dense
layers (norm identity ‖a δᵀ‖ = ‖a‖·‖δ‖) and, for convolutions, from input patches (k² shifted
slices) or, for inputs with few channels, one depthwise filter gradient. Forward passes of
convolutions are native convolutions, one per trial for per-trial inputs, up to ``UNROLL_TRIALS``. Sums over
examples run in fixed blocks (:func:`contract_examples`) so that results do not depend on the
number of intra-op threads. :meth:`Model.input_gradients` gives ∇_x ℓ for crafting inputs. Keras and
TF Privacy have no multi-trial layers and no Conv2D fast-clipping entry (0.9.0), hence these layers.
Convolution, pooling and flattening layers live in :mod:`dpaudit.training.models_conv`, the
blocked sums in :mod:`dpaudit.training.layer_ops`; every name stays importable from here.

There is deliberately no batch normalisation: it mixes examples inside a batch, so an example's
gradient would depend on the others and per-example clipping would no longer bound one record's
influence (the DP-SGD sensitivity argument breaks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from dpaudit.training.layer_ops import (
    CONTRACT_BLOCK,
    Activation,
    RowStats,
    _activate,
    _blocks,
    contract_examples,
    shared_rows,
)
from dpaudit.training.models_conv import DEPTHWISE_CHANNELS, UNROLL_TRIALS, Conv2D, Flatten, MaxPool

__all__ = [
    "CONTRACT_BLOCK",
    "DEFAULT_HIDDEN",
    "DEPTHWISE_CHANNELS",
    "UNROLL_TRIALS",
    "Activation",
    "Conv2D",
    "Dense",
    "Flatten",
    "Layer",
    "LayerTrace",
    "MaxPool",
    "Model",
    "RowStats",
    "Trainable",
    "_activate",
    "_blocks",
    "cnn",
    "contract_examples",
    "mlp",
    "model_for_dataset",
    "shared_rows",
]


@dataclass(frozen=True)
class Dense:
    """Fully connected layer ``z = a W + b`` with per-trial ``W: [T, in, out]``, ``b: [T, out]``."""

    units: int
    activation: Activation = "relu"

    def param_shapes(self, in_shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [(in_shape[-1], self.units), (self.units,)]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (self.units,)

    def fans(self, in_shape: tuple[int, ...]) -> tuple[int, int]:
        return in_shape[-1], self.units

    def apply(self, params: Sequence[tf.Tensor], a: tf.Tensor, shared: bool) -> tf.Tensor:
        W, b = params
        z = tf.einsum("ni,tio->tno", a, W) if shared else tf.einsum("tni,tio->tno", a, W)
        return z + b[:, None, :]

    def prepare(self, a: tf.Tensor, delta: tf.Tensor, shared: bool, rows: RowStats | None = None) -> tuple:
        """What :meth:`sq_norms` and :meth:`weighted_sum` share: the inputs and, optionally, the
        input rows' precomputed :class:`~dpaudit.training.layer_ops.RowStats`."""
        return (a, delta, shared, rows)

    def sq_norms(self, prepared: tuple) -> tf.Tensor:
        """Squared per-example gradient norm [T, N]: (‖a_n‖² + 1)·‖δ_n‖² (the +1 is the bias)."""
        a, delta, shared, rows = prepared
        a_sq = tf.reduce_sum(tf.square(a), axis=-1) if rows is None else rows.sq
        d_sq = tf.reduce_sum(tf.square(delta), axis=-1)
        return (a_sq[None, :] if shared else a_sq) * d_sq + d_sq

    def weighted_sum(self, prepared: tuple, c: tf.Tensor) -> list[tf.Tensor]:
        """Σ_n c_n ∂ℓ_n/∂θ as matmuls per trial: [Σ_n c_n a_n δ_nᵀ, Σ_n c_n δ_n] (the sum over n in
        fixed-size blocks, see :func:`contract_examples`)."""
        a, delta, shared, rows = prepared
        cd = delta * c[..., None]
        blocks = None if rows is None else rows.blocks
        return [contract_examples(a, cd, shared, blocks), tf.reduce_sum(cd, axis=1)]

    def per_example(self, a: tf.Tensor, delta: tf.Tensor, shared: bool) -> list[tf.Tensor]:
        """Materialised per-example gradients [T, R, in, out], [T, R, out] (for a few tracked rows)."""
        dW = tf.einsum("ri,tro->trio", a, delta) if shared else tf.einsum("tri,tro->trio", a, delta)
        return [dW, delta]


Layer = Dense | Conv2D | MaxPool | Flatten
Trainable = Dense | Conv2D


@dataclass(frozen=True)
class LayerTrace:
    """What a trainable layer saw in a forward pass: its input and its pre-activation output."""

    layer: Trainable
    inputs: tf.Tensor
    outputs: tf.Tensor
    shared: bool


class Model:
    """A sequential classifier whose parameters carry a leading trial axis.

    ``forward(params, x)`` accepts inputs shared by all trials (``[N, *input_shape]``); the final
    layer emits logits, and the loss is softmax cross-entropy (a softmax output layer).
    """

    def __init__(
        self, name: str, input_shape: Sequence[int], num_classes: int, layers: Sequence[Layer]
    ) -> None:
        self.name = name
        self.input_shape = tuple(int(s) for s in input_shape)
        self.num_classes = int(num_classes)
        self.layers = tuple(layers)
        last = self.layers[-1]
        if not isinstance(last, Dense) or last.units != self.num_classes or last.activation != "linear":
            raise ValueError(
                f"model {name}: last layer must be Dense({num_classes}, 'linear') (the softmax logits)"
            )
        shapes: list[tuple[int, ...]] = []
        fans: list[tuple[int, int]] = []
        in_shapes: list[tuple[int, ...]] = []
        shape = self.input_shape
        for layer in self.layers:
            in_shapes.append(shape)
            if isinstance(layer, Dense | Conv2D):
                if isinstance(layer, Dense) and len(shape) != 1:
                    raise ValueError(
                        f"model {name}: Dense layer needs a flat input, got shape {shape}; add Flatten()"
                    )
                if isinstance(layer, Conv2D) and len(shape) != 3:
                    raise ValueError(f"model {name}: Conv2D needs [h, w, c] input, got shape {shape}")
                shapes.extend(layer.param_shapes(shape))
                fans.append(layer.fans(shape))
            shape = layer.out_shape(shape)
        self.param_shapes: tuple[tuple[int, ...], ...] = tuple(shapes)
        self._fans = tuple(fans)
        self._in_shapes = tuple(in_shapes)

    @property
    def structure(self) -> tuple:
        """What the model computes, without its name: input shape, classes and layers. Two models
        with the same structure share compiled training steps."""
        return (self.input_shape, self.num_classes, self.layers)

    @property
    def num_params(self) -> int:
        return sum(math.prod(s) for s in self.param_shapes)

    def activation_size(self) -> int:
        """Floats of activations per example and trial (for choosing chunk sizes)."""
        total = 0
        shape = self.input_shape
        for layer in self.layers:
            if isinstance(layer, Conv2D):
                total += math.prod(layer.out_shape(shape)[:2]) * layer.kernel**2 * shape[-1]  # patches
            shape = layer.out_shape(shape)
            total += math.prod(shape)
        return total

    def init(self, num_trials: int, seed: int, first_trial: int = 0) -> list[np.ndarray]:
        """Glorot-uniform kernels and zero biases (Keras defaults), drawn per trial from ``(seed, trial)``.

        Seeding each trial separately makes a trial's initial weights independent of how trials
        are chunked.
        """
        out = [np.empty((num_trials, *s), dtype=np.float32) for s in self.param_shapes]
        for t in range(num_trials):
            rng = np.random.default_rng([seed, first_trial + t, 7919])
            for i, (fan_in, fan_out) in enumerate(self._fans):
                limit = math.sqrt(6.0 / (fan_in + fan_out))
                out[2 * i][t] = rng.uniform(-limit, limit, size=self.param_shapes[2 * i])
                out[2 * i + 1][t] = 0.0
        return out

    def forward(
        self, params: Sequence[tf.Tensor], x: tf.Tensor, shared: bool = True
    ) -> tuple[tf.Tensor, list[LayerTrace]]:
        """Logits ``[T, N, C]`` of every trial and the layer traces, on inputs shared by all trials
        (``x: [N, ...]``) or, with ``shared=False``, on per-trial inputs ``x: [T, N, ...]`` (e.g.
        each trial's own Poisson batch)."""
        a = x
        traces: list[LayerTrace] = []
        i = 0
        for layer in self.layers:
            if isinstance(layer, Dense | Conv2D):
                z = layer.apply(params[i : i + 2], a, shared)
                traces.append(LayerTrace(layer, a, z, shared))
                a = _activate(z, layer.activation)
                shared = False
                i += 2
            else:
                a = layer.apply(a, shared)
        return a, traces

    def example_losses(self, logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        """Per-example softmax cross-entropy ``[T, N]`` of logits ``[T, N, C]`` and integer labels
        (``[N]`` shared or ``[T, N]``). Two classes use the identity CE = softplus(z_other − z_label),
        cheaper than the sparse softmax op; more classes use that op. The two logits are taken by
        ``tf.unstack``, whose gradient is one stack: the gradients of two strided slices were each a
        zero-filled ``[T, N, 2]`` tensor (``StridedSliceGrad``, 8–15 % of an adult MLP step)."""
        labels = tf.cast(labels, tf.int32)
        labels = tf.broadcast_to(labels, tf.shape(logits)[:2])
        if self.num_classes == 2:
            z0, z1 = tf.unstack(logits, num=2, axis=-1)
            margin = z1 - z0
            sign = 1.0 - 2.0 * tf.cast(labels, logits.dtype)  # +1 for label 0, −1 for label 1
            return tf.nn.softplus(sign * margin)
        return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)

    def input_gradients(
        self, params: Sequence[np.ndarray | tf.Tensor], X: np.ndarray | tf.Tensor, y: np.ndarray | tf.Tensor
    ) -> tf.Tensor:
        """∇_x ℓ(θ_t; x_n, y_n) ``[T, N, *input_shape]`` for every trial t and example n (for crafting
        poisons by gradient steps on the input, Nasr et al. §IV-B/D).

        ``X`` is ``[N, *input_shape]`` (shared) or ``[T, N, *input_shape]`` (per trial); ``y`` is
        ``[N]`` or ``[T, N]``. Works eagerly (returns a tensor; call ``.numpy()``) and inside a
        compiled step, where it composes with an outer tape (double back-propagation).
        """
        ps = [tf.convert_to_tensor(p, tf.float32) for p in params]
        x = tf.convert_to_tensor(X, tf.float32)
        shared = len(x.shape) == len(self.input_shape) + 1
        if shared:
            x = tf.broadcast_to(x[None], tf.concat([tf.shape(ps[0])[:1], tf.shape(x)], axis=0))
        with tf.GradientTape() as tape:
            tape.watch(x)
            logits, _ = self.forward(ps, x, shared=False)
            total = tf.reduce_sum(self.example_losses(logits, y))
        return tape.gradient(total, x)

    def predict_proba(
        self, params: Sequence[np.ndarray | tf.Tensor], X: np.ndarray, budget_floats: float = 5e7
    ) -> np.ndarray:
        """Softmax probabilities ``[T, N, C]`` of every trial's model on ``X`` (chunked over trials
        and examples so that activations stay within ``budget_floats``)."""
        arrays = [np.asarray(p, dtype=np.float32) for p in params]
        T, N = len(arrays[0]), len(X)
        out = np.zeros((T, N, self.num_classes), dtype=np.float32)
        per = max(1, self.activation_size())
        rows = int(max(1, min(N, budget_floats // per))) if N else 1
        trials = int(max(1, min(T, budget_floats // (per * rows)))) if T else 1
        for t0 in range(0, T, trials):
            chunk = [tf.constant(p[t0 : t0 + trials]) for p in arrays]
            for n0 in range(0, N, rows):
                logits, _ = self.forward(chunk, tf.constant(np.asarray(X[n0 : n0 + rows], dtype=np.float32)))
                out[t0 : t0 + trials, n0 : n0 + rows] = tf.nn.softmax(logits).numpy()
        return out

    def losses(self, params: Sequence[np.ndarray | tf.Tensor], X: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Per-example cross-entropy ``[T, N]`` of every trial's model (for loss-threshold attacks)."""
        probs = self.predict_proba(params, X)
        picked = np.take_along_axis(probs, np.asarray(y, dtype=np.int64)[None, :, None], axis=2)[..., 0]
        return -np.log(np.clip(picked, 1e-30, None))


# Default hidden sizes per dataset (Bernau et al. §6: adult 104-6-6-2, purchase100 600-128-100;
# digits is our choice: one hidden layer of 32 for the 8×8 images).
DEFAULT_HIDDEN: dict[str, tuple[int, ...]] = {
    "adult": (6, 6),
    "digits": (32,),
    "purchase100": (128,),
    "mnist": (16, 32),
    "cifar10": (32, 64),
}


def mlp(name: str, input_dim: int, num_classes: int, hidden: Sequence[int]) -> Model:
    """Multi-layer perceptron: relu hidden layers and a softmax output layer."""
    layers: list[Layer] = [Dense(int(h), "relu") for h in hidden]
    layers.append(Dense(num_classes, "linear"))
    return Model(name, (input_dim,), num_classes, layers)


def cnn(name: str, input_shape: Sequence[int], num_classes: int, filters: Sequence[int]) -> Model:
    """Bernau et al. §6 MNIST network without batch normalisation: per conv layer a 3×3 relu
    convolution followed by 2×2 max pooling, then a softmax dense layer."""
    layers: list[Layer] = []
    for f in filters:
        layers += [Conv2D(int(f), 3, "relu"), MaxPool(2)]
    layers += [Flatten(), Dense(num_classes, "linear")]
    return Model(name, input_shape, num_classes, layers)


def model_for_dataset(
    name: str, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] | None = None
) -> Model:
    """The model used for ``name``: CNN for mnist/cifar10 (``hidden`` = conv filters), else an MLP.

    Image data of other datasets (digits, 8×8) is flattened into an MLP.
    """
    sizes = tuple(hidden) if hidden is not None else DEFAULT_HIDDEN.get(name, (32,))
    if name in ("mnist", "cifar10"):
        return cnn(name, input_shape, num_classes, sizes)
    if len(input_shape) == 1:
        return mlp(name, int(input_shape[0]), num_classes, sizes)
    flat = [Flatten()] if len(input_shape) > 1 else []
    layers: list[Layer] = [*flat, *(Dense(int(h), "relu") for h in sizes), Dense(num_classes, "linear")]
    return Model(name, input_shape, num_classes, layers)
