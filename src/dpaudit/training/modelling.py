"""Model helpers shared by experiments: the trainer's model for a dataset, and batched logits.

An experiment's dataset entry may choose the architecture with ``model:`` (:class:`ModelChoice`):
``{layers: [...]}``, a params layer list, or ``{keras: path}``, a Keras model definition (``.keras``
file or ``model.to_json()`` output in a ``.json`` file), both mapped onto the trials-at-once families
by :mod:`dpaudit.training.keras_import`; without it the dataset's default family is used
(``hidden`` widths). :func:`build_model` is the one place that turns either into a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpaudit.config import ParamsError, from_mapping, require

if TYPE_CHECKING:
    from dpaudit.training.models import Model

__all__ = ["ModelChoice", "build_model", "model_choice", "neural_logits"]


@dataclass(frozen=True)
class ModelChoice:
    """``model:`` of a dataset entry: exactly one of ``layers`` (a params layer list, see
    :func:`dpaudit.training.keras_import.model_from_layer_list`) or ``keras`` (a ``.keras`` or
    ``.json`` Keras model definition; its architecture is used, not its weights)."""

    layers: list[dict[str, Any]] | None = None
    keras: str | None = None

    def __post_init__(self) -> None:
        require((self.layers is None) != (self.keras is None), "layers", self.layers,
                "give exactly one of 'layers' (a layer list) and 'keras' (a .keras or .json file)")
        require(self.keras is None or Path(self.keras).suffix in (".keras", ".json"), "keras", self.keras,
                "must be a .keras file or a .json file written by model.to_json()")
        require(self.layers is None or len(self.layers) >= 1, "layers", self.layers, "must list >= 1 layer")


def model_choice(raw: Mapping[str, Any] | ModelChoice | None, where: str = "model") -> ModelChoice | None:
    """Validate a ``model:`` mapping (errors name ``<where>.<key>``); None stays None."""
    if raw is None or isinstance(raw, ModelChoice):
        return raw
    return from_mapping(ModelChoice, raw, where)


def build_model(
    dataset: str,
    input_shape: Sequence[int],
    num_classes: int,
    hidden: Sequence[int] | None,
    model: Mapping[str, Any] | ModelChoice | None = None,
    where: str = "model",
) -> Model:
    """The model an experiment trains on ``dataset``.

    Without ``model``: the shared trainer's family (MLP, or CNN for mnist / cifar10) with ``hidden``.
    With ``model`` (:class:`ModelChoice` or its params mapping, named ``where`` in errors): the layer
    list or the Keras definition mapped by :mod:`dpaudit.training.keras_import`; an unsupported layer
    is refused with its name and the reason, and a definition whose input shape or class count does
    not fit the dataset is a :class:`ParamsError` naming ``<where>.keras``.
    """
    from dpaudit.training.models import model_for_dataset

    choice = model_choice(model, where)
    if choice is None:
        return model_for_dataset(
            dataset, tuple(input_shape), num_classes, hidden=None if hidden is None else list(hidden)
        )
    from dpaudit.training import keras_import

    if choice.layers is not None:
        return keras_import.model_from_layer_list(
            choice.layers, tuple(input_shape), num_classes, name=dataset, where=f"{where}.layers"
        )
    path = Path(str(choice.keras))
    if path.suffix == ".json":
        if not path.is_file():
            raise ParamsError(f"params: '{where}.keras' = {str(path)!r}: file does not exist")
        mapped = keras_import.model_from_keras_json(path.read_text())
    else:
        mapped = keras_import.model_from_keras_file(path)
    if mapped.input_shape != tuple(input_shape) or mapped.num_classes != int(num_classes):
        raise ParamsError(
            f"params: '{where}.keras' = {str(path)!r} takes inputs {mapped.input_shape} with "
            f"{mapped.num_classes} classes; dataset {dataset} has {tuple(input_shape)} and {num_classes}"
        )
    return mapped


def neural_logits(
    model: Model, params: Sequence[np.ndarray], X: np.ndarray, budget_floats: float = 5e7
) -> np.ndarray:
    """Logits ``[T, N, C]`` (float32) of every trial's model on ``X``.

    Rows go through in batches sized so that all trials' activations stay within about
    ``budget_floats`` floats (CNNs on image data would otherwise need gigabytes at once).
    """
    import tensorflow as tf

    tensors = [tf.convert_to_tensor(p, dtype=tf.float32) for p in params]
    trials = int(tensors[0].shape[0])
    batch = max(1, int(budget_floats // max(1, trials * model.activation_size())))
    outs = []
    for start in range(0, len(X), batch):
        logits, _ = model.forward(tensors, tf.convert_to_tensor(X[start : start + batch], dtype=tf.float32))
        outs.append(logits.numpy())
    if not outs:
        return np.zeros((trials, 0, model.num_classes), dtype=np.float32)
    return np.concatenate(outs, axis=1)
