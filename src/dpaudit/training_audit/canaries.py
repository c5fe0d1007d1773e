"""Input canaries that travel the user's whole DP-SGD path and are seen on parameters real data never moves.

Design (the place a one-run audit of someone's DP code should look): input features that are zero in
every real record make the first dense layer's weights from those features *inert*: a real record's
gradient there is exactly x_f·δ = 0. A canary is an input that is non-zero only on such features
(a random direction v_j among them, scaled so that its gradient is several times the clip norm C) with
a random label. It enters the user's batches as an ordinary record, so the user's per-example
gradients, clipping, noise and averaging act on it as on any record, and its effect on the inert
weights is not drowned by the data's own gradients. A third of the inert features (at least one) are
kept free of canaries: their weights see only the noise (the *probe*), which calibrates every
statistic of :mod:`dpaudit.training_audit.transcript` without knowing the code's divisor or learning rate.

A model with fewer than two such features (standardised tabular data, a convolution first) has no
inert place: :func:`find_inert_features` says so, and the remedy is an audit-only input column (two
or more constant-zero features appended to every record, widening the first dense layer's input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CanaryDesign", "InertFeatures", "design_canaries", "find_inert_features", "insert_canaries"]

#: Remedy quoted by every "no inert place" error.
REMEDY = (
    "append two or more audit-only input columns that are 0 in every real record (e.g. "
    "x = tf.concat([x, tf.zeros([tf.shape(x)[0], 3])], 1) in your loader, and widen the first Dense "
    "layer's input by 3): their weights are moved only by the canaries and the noise"
)


@dataclass(frozen=True)
class InertFeatures:
    """Flat indices of input features that are 0 in every real record, split into canary and probe sets."""

    input_shape: tuple[int, ...]
    canary: np.ndarray
    probe: np.ndarray
    records: int
    classes: int
    one_hot: bool
    x_dtype: str
    y_dtype: str
    y_shape: tuple[int, ...] = ()

    @property
    def features(self) -> int:
        return int(np.prod(self.input_shape))


def find_inert_features(dataset: Any, num_classes: int | None = None) -> InertFeatures:
    """One pass over a batched ``tf.data`` dataset of (x, y): which features are 0 in every record.

    Raises ``ValueError`` naming the remedy when fewer than two such features exist (one for the
    canaries, one for the probe).
    """
    spec = dataset.element_spec
    if not (isinstance(spec, tuple) and len(spec) == 2):
        raise ValueError("wrap() needs a dataset of (x, y) batches; sample weights are not supported")
    x_spec, y_spec = spec
    _refuse_structures(x_spec, y_spec)
    if x_spec.shape.rank is None or x_spec.shape.rank < 2 or x_spec.shape[0] is not None:
        raise ValueError(
            "wrap() needs the BATCHED dataset you pass to fit() (x of shape [batch, ...]): it adds each "
            "included canary to each batch independently, so your own batching and sampling stay as they are"
        )
    nonzero: np.ndarray | None = None
    records, top_label = 0, -1
    one_hot = y_spec.shape.rank is not None and y_spec.shape.rank == 2 and (y_spec.shape[1] or 0) > 1
    for x, y in dataset:
        xb = np.asarray(x)
        flat = xb.reshape(xb.shape[0], -1)
        seen = np.any(flat != 0, axis=0)
        nonzero = seen if nonzero is None else (nonzero | seen)
        records += flat.shape[0]
        yb = np.asarray(y)
        top_label = max(top_label, int(yb.shape[1] - 1) if one_hot else int(yb.max(initial=-1)))
    if nonzero is None or records == 0:
        raise ValueError("wrap(): the dataset is empty")
    classes = int(num_classes or top_label + 1)
    if classes < 2:
        raise ValueError("canaries need at least 2 classes; pass num_classes")
    inert = np.flatnonzero(~nonzero)
    if inert.size < 2:
        raise ValueError(
            f"no inert place for canaries: {inert.size} of {nonzero.size} input features are 0 in every "
            f"record (at least 2 are needed: canaries and a noise probe). Remedy: {REMEDY}"
        )
    n_probe = max(1, inert.size // 3)
    return InertFeatures(
        input_shape=tuple(int(d) for d in x_spec.shape[1:]),
        canary=inert[n_probe:],
        probe=inert[:n_probe],
        records=records,
        classes=classes,
        one_hot=bool(one_hot),
        x_dtype=x_spec.dtype.name,
        y_dtype=y_spec.dtype.name,
        y_shape=tuple(int(d) for d in y_spec.shape[1:] if d is not None),
    )


def _refuse_structures(x_spec: Any, y_spec: Any) -> None:
    """Refuse inputs or labels that are several tensors (a dict or tuple), naming what was found."""
    import tensorflow as tf

    def named(spec: Any) -> str:
        if isinstance(spec, dict):
            return f"a dict of {len(spec)} tensors (keys {sorted(map(str, spec))})"
        return f"a {type(spec).__name__} of {len(tf.nest.flatten(spec))} tensors"

    if tf.nest.is_nested(x_spec):
        raise ValueError(
            f"the dataset's inputs x are {named(x_spec)}: the audit inserts each canary as one row of a "
            "single input tensor read by a Dense layer. Feed the model one tensor (e.g. tf.concat of your "
            f"features in the loader, and a first Dense layer on it); {REMEDY}"
        )
    if tf.nest.is_nested(y_spec):
        raise ValueError(
            f"the dataset's labels y are {named(y_spec)} (a model with several outputs): the audit scores "
            "each canary by the per-example loss of one output against one label. Audit your training code "
            "on a single-output version of the model (one output, one label tensor, one loss)"
        )


@dataclass(frozen=True)
class CanaryDesign:
    """m canaries: unit directions ``directions`` [m, |canary features|] and class ``labels`` [m].

    A canary's input is ``scale`` · direction on the canary features and 0 elsewhere; ``scale`` is set
    once the model is known (:func:`dpaudit.training_audit.observer.calibrate_scale`), from all m canaries,
    so it never depends on which are included.
    """

    features: InertFeatures
    directions: np.ndarray
    labels: np.ndarray

    def inputs(self, scale: float) -> np.ndarray:
        """[m, *input_shape] canary inputs at ``scale``."""
        m = self.directions.shape[0]
        flat = np.zeros((m, self.features.features), dtype=self.features.x_dtype)
        flat[:, self.features.canary] = scale * self.directions
        return flat.reshape((m, *self.features.input_shape))

    def targets(self) -> np.ndarray:
        """[m] integer labels, or [m, classes] one-hot rows, in the dataset's label dtype."""
        if self.features.one_hot:
            return np.eye(self.features.classes, dtype=self.features.y_dtype)[self.labels]
        labels = self.labels.astype(self.features.y_dtype)
        return labels.reshape((labels.size, *self.features.y_shape))


def design_canaries(features: InertFeatures, canaries: int, seed: int) -> CanaryDesign:
    """Random unit directions among the canary features and uniformly random labels, from ``seed``."""
    rng = np.random.default_rng([seed, 3])
    directions = rng.normal(size=(canaries, features.canary.size))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    labels = rng.integers(0, features.classes, size=canaries)
    return CanaryDesign(features, directions, labels)


def insert_canaries(dataset: Any, table_x: Any, table_y: Any, sampling_rate: float, seed: int) -> Any:
    """Add each row of the included canaries' table to each batch independently with probability q.

    ``table_x`` is a ``tf.Variable`` (its values are set when training starts); the per-batch draws
    come from ``tf.data.Dataset.random`` re-randomised every epoch, so canaries are Poisson-sampled at
    the declared rate and the user's batches of real records are left exactly as the loader made them.
    """
    import tensorflow as tf

    rows = int(table_x.shape[0])
    q = float(sampling_rate)
    draws = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)

    @tf.autograph.experimental.do_not_convert
    def add(batch: Any, draw: Any) -> Any:
        x, y = batch
        if rows == 0:
            return x, y
        key = tf.stack([draw, tf.constant(seed, tf.int64)])
        picked = tf.where(tf.random.stateless_uniform([rows], seed=key) < q)[:, 0]
        cx = tf.cast(tf.gather(table_x, picked), x.dtype)
        cy = tf.cast(tf.gather(table_y, picked), y.dtype)
        return tf.concat([x, cx], 0), tf.concat([y, cy], 0)

    return tf.data.Dataset.zip((dataset, draws)).map(add)
