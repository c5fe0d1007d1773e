"""Target audit: your own trained Keras model, its members and non-members, audited for membership.

The model file (``.keras``, DVC-tracked) and a membership CSV name the audited model and the records
it did and did not train on (``target.datasets.<name>``); ``target-prepare@<name>`` verifies both
against their DVC digests and bundles them with the base dataset's rows. The audit then runs
Yeom et al.'s loss-threshold attack, offline LiRA (Carlini et al. 2022) with shadow models of the
same architecture trained at once on the pool, and reports per-model evidence (TPR at fixed FPR,
AUROC, advantage with intervals; Epsilon* of Negoescu et al. beside its null level), never an ε lower
bound on the training algorithm, plus the accountants' ε of a declared DP configuration. Modules:
:mod:`.config`, :mod:`.design.inputs` (the target-prepare stage), :mod:`.design`, :mod:`.train`,
:mod:`.losses`, :mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.target.config import TargetConfig, check_files, config_from_params

__all__ = ["EXPERIMENT", "TargetConfig"]

EXPERIMENT = register(PackagedExperiment("target", __name__, config_from_params, check_inputs=check_files))
