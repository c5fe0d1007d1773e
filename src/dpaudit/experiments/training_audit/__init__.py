"""Training audit in the pipeline: the user's own DP training function, run under the
:class:`dpaudit.training_audit.TrainingAuditor`, with its verdict against the declared DP-SGD.

Not to be confused with the ``onerun`` experiment, which reproduces Steinke et al.'s one-run estimator on
dpaudit's own trainer: here the training code under test is the user's (``training_audit.train.function``),
and the answer is the library's verdict (violation proven / does not match its declared DP-SGD / no
violation found, each check with its status). Modules: :mod:`.config`, :mod:`.train` (runs the function,
stores every run's transcript), :mod:`.losses` and :mod:`.attack` (nothing to compute: the evidence is the
transcript), :mod:`.bounds` (the verdict, its metrics and per-step plots) and :mod:`.report`.
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.training_audit.config import TrainingAuditConfig, config_from_params

__all__ = ["EXPERIMENT", "TrainingAuditConfig"]

EXPERIMENT = register(PackagedExperiment("training_audit", __name__, config_from_params))
