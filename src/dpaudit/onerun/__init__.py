"""Audit your own Keras DP training in one run (Steinke et al. 2023; Mahloujifar et al. 2024).

``OneRunAuditor`` draws canaries and their inclusion from its own seed, mixes input canaries into a
``tf.data`` pipeline (:meth:`OneRunAuditor.wrap`) or adds white-box gradient canaries through a
per-step harness hook (:meth:`OneRunAuditor.callback`), and turns the trained model into ε lower
bounds (:meth:`OneRunAuditor.result`), each labelled with what it assumes.
"""

from dpaudit.onerun.auditor import KINDS, OneRunAuditor, OneRunResult

__all__ = ["KINDS", "OneRunAuditor", "OneRunResult"]
