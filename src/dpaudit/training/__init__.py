"""Models and instrumented DP-SGD that train many trials at once (see :mod:`dpaudit.training.dpsgd`)."""

from dpaudit.training.dpsgd import (
    DPSGDConfig,
    InjectedGradient,
    StepState,
    TrackedRecords,
    TrainResult,
    loss_observer,
    train_trials,
)
from dpaudit.training.models import Model, cnn, mlp, model_for_dataset

__all__ = [
    "DPSGDConfig",
    "InjectedGradient",
    "Model",
    "StepState",
    "TrackedRecords",
    "TrainResult",
    "cnn",
    "loss_observer",
    "mlp",
    "model_for_dataset",
    "train_trials",
]
