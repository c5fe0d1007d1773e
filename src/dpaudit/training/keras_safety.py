"""Allow-list validation of Keras model configs, checked before Keras ever sees a file.

Keras imports every module a serialised config names before its safe mode looks at it, so a
``.keras`` file is handed to Keras only when its whole config passed :func:`check_keras_config`.
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Keras model classes (a nested one is refused by the mapper; these are the only classes the model
#: modules may name in a config).
_NESTED = ("Sequential", "Functional", "Model")


class KerasImportError(ValueError):
    """A Keras model cannot be mapped onto dpaudit's model families."""


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
    check_keras_file(path)
    return tf.keras.models.load_model(path, compile=False, safe_mode=True)


def check_keras_file(path: str | Path) -> None:
    """The allow-list inspection the train stage runs on a model file, without TensorFlow: the config
    of a ``.keras`` archive (its ``config.json``) or of ``model.to_json()`` output (a ``.json`` file)
    is parsed and checked by :func:`check_keras_config`. Every error names the file."""
    path = Path(path)
    if path.suffix == ".json":
        if not path.is_file():
            raise KerasImportError(f"{path}: file does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise KerasImportError(f"{path}: not a Keras model JSON: {exc}") from exc
    else:
        text = _read_keras_config(path)
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KerasImportError(f"{path}: not a Keras model JSON: {exc}") from exc
    if not isinstance(config, Mapping):
        raise KerasImportError(f"{path}: not a Keras model JSON: the top level is not an object")
    check_keras_config(config, str(path))


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
