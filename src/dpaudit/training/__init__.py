"""Models and instrumented DP-SGD that train many trials at once (see :mod:`dpaudit.training.dpsgd`).

Every name below is importable from ``dpaudit.training`` and is loaded from its module on first use
(:data:`_LAZY`, :func:`dpaudit.lazy.lazy_exports`): importing a light module of the package
(:mod:`dpaudit.training.accounting`, which the report-side accountants re-export) loads no
TensorFlow.
"""

from __future__ import annotations

from dpaudit.lazy import lazy_exports

#: Where each public name lives (read by :mod:`dpaudit.deps` too, to follow these imports).
_LAZY: dict[str, str] = {
    "DPSGDConfig": "dpaudit.training.dpsgd",
    "InjectedGradient": "dpaudit.training.dpsgd",
    "Injector": "dpaudit.training.dpsgd",
    "StepState": "dpaudit.training.dpsgd",
    "Strategy": "dpaudit.training.dpsgd",
    "TrackedRecords": "dpaudit.training.dpsgd",
    "TrainResult": "dpaudit.training.dpsgd",
    "loss_observer": "dpaudit.training.dpsgd",
    "privatized_sum_observer": "dpaudit.training.dpsgd",
    "select_strategy": "dpaudit.training.dpsgd",
    "train_trials": "dpaudit.training.dpsgd",
    "Model": "dpaudit.training.models",
    "cnn": "dpaudit.training.models",
    "mlp": "dpaudit.training.models",
    "model_for_dataset": "dpaudit.training.models",
}

__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
