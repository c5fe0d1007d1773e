"""Trace cache: compiled steps reused across chunks and calls with the same baked-in key.
In: the model object, the configuration's scalars, the chunk size, tracked rows and hooks.
Out: a :class:`~dpaudit.training.dpsgd.step._StepFunction` from a small LRU cache."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from dpaudit.training.dpsgd.config import DPSGDConfig
from dpaudit.training.dpsgd.step import _StepFunction
from dpaudit.training.models import Model


def _callable_key(fn: Callable) -> Any:
    """A cache key for an observer or injector: its code and closure values when they are
    hashable (so that two ``loss_observer([0, 5])`` share a trace), else its identity."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ("id", id(fn))
    cells = []
    for cell in getattr(fn, "__closure__", None) or ():
        v = cell.cell_contents
        if isinstance(v, tf.Tensor):
            v = ("tensor", v.dtype.name, tuple(v.shape), v.numpy().tobytes())
        elif isinstance(v, np.ndarray):
            v = ("array", v.dtype.str, v.shape, v.tobytes())
        try:
            hash(v)
        except TypeError:
            return ("id", id(fn))
        cells.append(v)
    return ("code", code, tuple(cells))


_CACHE: OrderedDict[Any, _StepFunction] = OrderedDict()
# Each compiled step holds its graph and kernels (≈ 20 MB for the adult MLP, ≈ 40 MB for the mnist
# CNN). A train stage of the default pipeline uses at most 7 distinct steps, and audits that
# release other coordinates (threat model F) never share one, so a long run of audits in one
# process keeps at most 8 rather than growing by one per audit.
_CACHE_SIZE = 8


def _get_step_function(model: Model, cfg: DPSGDConfig, chunk: int, **kw: Any) -> _StepFunction:
    """A compiled step from a small LRU cache, keyed by everything that is baked into its trace:
    the model's structure (so that audits which rebuild the same model reuse one trace and a long
    run's memory stays flat), the configuration's scalars, the chunk size (static trial count), the
    tracked rows and the hooks. Seeds, sizes and data are tensor arguments, so repeated calls with
    the same key (e.g. one per noise level) reuse one trace instead of retracing (0.9–1.8 s each)."""
    key = (
        model.structure,
        cfg.clip_norm,
        bool(np.all(np.asarray(cfg.noise_multiplier) == 0)),
        cfg.learning_rate,
        cfg.sampling_rate,
        cfg.noise_scale,
        cfg.sensitivity_factor,
        chunk,
        kw["tracked_rows"],
        kw["has_difference"],
        tuple((k, _callable_key(v)) for k, v in sorted(kw["observers"].items())),
        kw["jit_compile"],
        kw["injected"],
        None if kw["injector"] is None else _callable_key(kw["injector"]),
        kw["gathered"],
        kw.get("released"),
        kw.get("shared_params", False),
    )
    fn = _CACHE.get(key)
    if fn is None:
        fn = _StepFunction(model, cfg, **kw)
        _CACHE[key] = fn
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return fn
