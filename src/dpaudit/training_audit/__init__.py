"""The training audit: your own Keras DP training, run once under the auditor, and a verdict on its claim.

The evidence is the one-run bound (Steinke et al. 2023; Mahloujifar et al. 2024) and conformance checks.

``TrainingAuditor`` draws canaries and their inclusion from its own seed; with ``kind="inert"`` (the
default) and a :class:`DeclaredDPSGD` it sends input canaries through the user's own batches,
clipping and noise (:meth:`TrainingAuditor.wrap`), observes every step (:meth:`TrainingAuditor.callback`)
and returns a :class:`Verdict` against the claimed ε (:meth:`TrainingAuditor.verdict`);
:func:`audit_runs` pools several independent runs.
"""

from dpaudit.training_audit.auditor import KINDS, OneRunResult, TrainingAuditor
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.verdict import Verdict

__all__ = ["KINDS", "DeclaredDPSGD", "TrainingAuditor", "OneRunResult", "Verdict"]
