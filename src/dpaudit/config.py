"""Typed, validated configuration built from ``params.yaml`` sections.

Stages read their section of ``params.yaml`` and turn it into frozen dataclasses with
:func:`from_mapping`. Every error names the full key path and the offending value, so a user
who mistypes ``identifiability.trails`` learns exactly which key is wrong. Range checks live in
each dataclass's ``__post_init__`` and use :func:`require` so they read the same everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from dpaudit.lazy import lazy_exports

T = TypeVar("T")

#: A name the user chooses that becomes part of a path (a dataset, a target model, an audit): it
#: starts with a letter or digit and holds only letters, digits, ``_``, ``.`` and ``-``, and never
#: ``..``. So ``data/prepared/<name>.npz``, ``metrics/<audit>.json`` and the stage names stay inside
#: the repository and two different names can never resolve to the same directory.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

#: Mappings whose keys are such names: ``<experiment>.datasets``, ``target.datasets``, ``data.custom``.
NAME_KEYED = ("datasets", "custom")


class ParamsError(ValueError):
    """A params.yaml key is unknown, missing, of the wrong type, or out of range."""


class _RangeError(ParamsError):
    """Raised by :func:`require`; :func:`from_mapping` prefixes the key with its section path."""

    def __init__(self, key: str, value: Any, expectation: str) -> None:
        self.key, self.value, self.expectation = key, value, expectation
        super().__init__(f"params: '{key}' = {value!r} is invalid: {expectation}")


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Read a params file; an unreadable or non-mapping file is a :class:`ParamsError`."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError as exc:
        raise ParamsError(f"params file {path} does not exist") from exc
    except yaml.YAMLError as exc:
        raise ParamsError(f"params file {path} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise ParamsError(f"params file {path} must hold a mapping at top level, got {type(data).__name__}")
    return data


def section(params: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """Return ``params[key]`` as a mapping, or raise naming the missing/mistyped key."""
    if key not in params:
        raise ParamsError(f"params: missing section '{key}'")
    value = params[key]
    if not isinstance(value, Mapping):
        raise ParamsError(f"params: '{key}' must be a mapping, got {value!r}")
    return value


def is_safe_name(name: Any) -> bool:
    """Whether ``name`` matches :data:`SAFE_NAME` and contains no ``..``."""
    return isinstance(name, str) and bool(SAFE_NAME.match(name)) and ".." not in name


def require_safe_name(name: Any, key: str) -> None:
    """Refuse a user-chosen name that would become an unsafe path component, naming ``key``.

    Dataset names, target-model names and audit keys name files and directories
    (``data/prepared/<name>.npz``, ``data/train/<dataset>/<experiment>/``, ``metrics/<audit>.json``);
    ``../../esc`` would write outside the repository and ``a/../b`` would share ``b``'s directory.
    """
    if not is_safe_name(name):
        raise ParamsError(
            f"params: '{key}' = {name!r} is not a safe name: it names files and stages, so it must start "
            f"with a letter or digit and hold only letters, digits, '_', '.' and '-' (no '/', no '..')"
        )


def check_names(params: Mapping[str, Any]) -> None:
    """Every user-chosen name of ``params`` that becomes a path, checked with :func:`require_safe_name`.

    The ``check`` stage calls this first: the keys of ``data.custom``, ``target.datasets`` and every
    ``<section>.datasets`` mapping, the ``audits`` keys and the dataset and experiment each names.
    """
    for top, value in params.items():
        if not isinstance(value, Mapping):
            continue
        for sub in NAME_KEYED:
            names = value.get(sub)
            if isinstance(names, Mapping):
                for name in names:
                    require_safe_name(name, f"{top}.{sub}.{name}")
    audits = params.get("audits")
    if isinstance(audits, Mapping):
        for key, entry in audits.items():
            require_safe_name(key, f"audits.{key}")
            if isinstance(entry, Mapping):
                for field_ in ("dataset", "experiment"):
                    if field_ in entry:
                        require_safe_name(entry[field_], f"audits.{key}.{field_}")


def dataset_entry(datasets: Mapping[str, T], where: str, name: str) -> T:
    """``datasets[name]`` of the ``<where>.datasets`` section, or a :class:`ParamsError` naming the
    missing key and the datasets that are there. ``name`` must be a safe name (it names files)."""
    require_safe_name(name, f"{where}.datasets.{name}")
    if name not in datasets:
        have = ", ".join(sorted(datasets))
        raise ParamsError(f"params: missing key '{where}.datasets.{name}' (have: {have})")
    return datasets[name]


def require(condition: bool, key: str, value: Any, expectation: str) -> None:
    """Raise a :class:`ParamsError` naming ``key`` and ``value`` unless ``condition`` holds."""
    if not condition:
        raise _RangeError(key, value, expectation)


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against the type hint ``tp`` and convert containers; raise naming ``key``."""
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        options = get_args(tp)
        if value is None and type(None) in options:
            return None
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if float in options and numeric and not math.isfinite(value):
            allowed = " or null" if type(None) in options else ""
            raise ParamsError(f"params: '{key}' = {value!r} must be a finite number{allowed} (not NaN or "
                              f"infinite)")
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option, key)
            except ParamsError:
                continue
        raise ParamsError(f"params: '{key}' = {value!r} does not match {_type_name(tp)}")
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ParamsError(f"params: '{key}' = {value!r} must be one of {list(allowed)}")
        return value
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ParamsError(f"params: '{key}' = {value!r} must be a list")
        args = get_args(tp)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            item_types = [args[0]] * len(value)
        elif origin is tuple and args:
            if len(args) != len(value):
                raise ParamsError(f"params: '{key}' = {value!r} must have {len(args)} items")
            item_types = list(args)
        else:
            item_types = [args[0] if args else Any] * len(value)
        pairs = enumerate(zip(value, item_types, strict=True))
        items = [_convert(v, t, f"{key}[{i}]") for i, (v, t) in pairs]
        return tuple(items) if origin is tuple else items
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise ParamsError(f"params: '{key}' = {value!r} must be a mapping")
        args = get_args(tp) or (str, Any)
        if key.rsplit(".", 1)[-1] in NAME_KEYED:
            for name in value:
                require_safe_name(name, f"{key}.{name}")
        return {_convert(k, args[0], f"{key}"): _convert(v, args[1], f"{key}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, Mapping):
            raise ParamsError(f"params: '{key}' must be a mapping, got {value!r}")
        return from_mapping(tp, value, key)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(f"params: '{key}' = {value!r} must be a number")
        if not math.isfinite(value):
            raise ParamsError(f"params: '{key}' = {value!r} must be a finite number (not NaN or infinite)")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(f"params: '{key}' = {value!r} must be an integer")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"params: '{key}' = {value!r} must be true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ParamsError(f"params: '{key}' = {value!r} must be a string")
        return value
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ParamsError(f"params: '{key}' = {value!r} must be of type {_type_name(tp)}")
    return value


def _full_key(where: str, key: str) -> str:
    """The full path of ``key`` raised inside the dataclass at ``where``.

    ``__post_init__`` checks name a field relative to their own dataclass (``hidden``); those get
    ``where`` in front (``identifiability.datasets.digits.hidden``). A key that already spells a
    path from the top (``data.prepare.adult.train_size``, the older convention) is kept as it is,
    so that nothing is printed twice.
    """
    if not where or key == where or key.startswith(f"{where}."):
        return key
    top = where.split(".", 1)[0]
    if key.split(".", 1)[0] == top:
        return key
    return f"{where}.{key}"


def param_key(field: dataclasses.Field[Any]) -> str:
    """The params.yaml key of a config field: its name, or ``metadata["key"]`` where the key is not a
    valid Python name (e.g. ``break``, read into a field ``break_``)."""
    return str(field.metadata.get("key", field.name))


def from_mapping(cls: type[T], mapping: Mapping[str, Any], where: str) -> T:
    """Build dataclass ``cls`` from ``mapping``, checking keys and types.

    ``where`` is the key path of ``mapping`` in params.yaml (e.g. ``"identifiability"``); it
    prefixes every error. Unknown keys and missing required keys are errors; fields with
    defaults may be omitted. ``__post_init__`` of ``cls`` then checks ranges.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    if not isinstance(mapping, Mapping):
        raise ParamsError(f"params: '{where}' must be a mapping, got {mapping!r}")
    hints = typing.get_type_hints(cls)
    fields = {param_key(f): f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(mapping) - set(fields))
    if unknown:
        raise ParamsError(
            f"params: unknown key '{where}.{unknown[0]}' (known keys: {', '.join(sorted(fields))})"
        )
    kwargs: dict[str, Any] = {}
    for name, field in fields.items():
        key = f"{where}.{name}" if where else name
        if name not in mapping:
            no_default = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            if no_default:
                raise ParamsError(f"params: missing key '{key}'")
            continue
        kwargs[field.name] = _convert(mapping[name], hints[field.name], key)
    try:
        return cls(**kwargs)
    except _RangeError as exc:
        raise _RangeError(_full_key(where, exc.key), exc.value, exc.expectation) from None
    except ParamsError:
        raise
    except (TypeError, ValueError) as exc:
        raise ParamsError(f"params: '{where}': {exc}") from exc


# The check stage's own helpers live in :mod:`dpaudit.pipeline.check` (they import the experiments
# and the datasets, which every module importing this one would otherwise load too); these names
# stay importable from here.
_LAZY: dict[str, str] = {
    "MODELS_DIR": "dpaudit.layout",
    "MODEL_RECORDS_DIR": "dpaudit.layout",
    "check_limits": "dpaudit.pipeline.check",
    "model_records": "dpaudit.pipeline.check",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
