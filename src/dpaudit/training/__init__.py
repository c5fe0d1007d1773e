"""Models and instrumented DP-SGD that train many trials at once (see :mod:`dpaudit.training.dpsgd`)."""

from dpaudit.training.dpsgd import (
    DPSGDConfig,
    InjectedGradient,
    Injector,
    StepState,
    Strategy,
    TrackedRecords,
    TrainResult,
    loss_observer,
    privatized_sum_observer,
    select_strategy,
    train_trials,
)
from dpaudit.training.models import Model, cnn, mlp, model_for_dataset

__all__ = [
    "DPSGDConfig",
    "InjectedGradient",
    "Injector",
    "Model",
    "StepState",
    "Strategy",
    "TrackedRecords",
    "TrainResult",
    "cnn",
    "loss_observer",
    "mlp",
    "model_for_dataset",
    "privatized_sum_observer",
    "select_strategy",
    "train_trials",
]
