"""Membership audit: DP-SGD at many noise levels vs. loss-threshold membership inference and Epsilon*.

Erlingsson et al. (:data:`dpaudit.references.ERLINGSSON`) train models at fixed noise and compare
accountants' ε upper bounds (naive, advanced, RDP; Table 1) with an attack-based lower bound
(Prop. 3), drawing the "region of privacy" between them (Fig. 2). Negoescu et al.
(:data:`dpaudit.references.NEGOESCU`) score single model instances, DP or not, by Epsilon* (Def. 2)
from member and non-member losses and plot it against utility (Figs. 1–2). Modules:
:mod:`.config`, :mod:`.design` (strategies, splits), :mod:`.train`, :mod:`.losses`,
:mod:`.attack`, :mod:`.bounds` (numbers) and :mod:`.report` (the section's text).
"""

from __future__ import annotations

from dpaudit.experiments import register
from dpaudit.experiments.base import PackagedExperiment
from dpaudit.experiments.membership.config import MembershipConfig, config_from_params

__all__ = ["EXPERIMENT", "MembershipConfig"]

EXPERIMENT = register(PackagedExperiment("membership", __name__, config_from_params))
