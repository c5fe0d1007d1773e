"""Audit your own Keras DP training in one run (Steinke et al. 2023; Mahloujifar et al. 2024).

``OneRunAuditor`` draws canaries and their inclusion from its own seed; with ``kind="inert"`` (the
default) and a :class:`DeclaredDPSGD` it sends input canaries through the user's own batches,
clipping and noise (:meth:`OneRunAuditor.wrap`), observes every step (:meth:`OneRunAuditor.callback`)
and returns a :class:`Verdict` against the claimed ε (:meth:`OneRunAuditor.verdict`);
:func:`audit_runs` pools several independent runs.
"""

from dpaudit.onerun.auditor import KINDS, OneRunAuditor, OneRunResult
from dpaudit.onerun.declaration import DeclaredDPSGD
from dpaudit.onerun.verdict import Verdict

__all__ = ["KINDS", "DeclaredDPSGD", "OneRunAuditor", "OneRunResult", "Verdict"]
