"""One-run audit (Steinke, Nasr & Jagielski 2023, :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`):
audit a declared DP-SGD configuration with ONE training run of dpaudit's trainer.

m canaries (white-box gradient canaries on inert coordinates, or black-box mislabeled input records),
each included with probability ½; the ε lower bound of the Steinke et al. analysis and of the f-DP
analysis with the Gaussian family (Mahloujifar et al. 2024) beside the accountants' ε of the declared
configuration, each analysis' ceiling on the ideal Gaussian canary game, and ε_LB against m. A
deliberately broken pipeline (noise/10, or an unclipped layer) shows that the audit catches it.
Modules: :mod:`.config`, :mod:`.design`, :mod:`.train`, :mod:`.losses`, :mod:`.attack`, :mod:`.bounds`
and :mod:`.report`.
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.onerun.config import OneRunConfig, config_from_params

__all__ = ["EXPERIMENT", "OneRunConfig"]

EXPERIMENT = register(PackagedExperiment("onerun", __name__, config_from_params))
