"""The one place that audits score sets into the results table.

:func:`audit_score_sets` runs each set's registered estimators and splits the confidence once:
the counted bounds of all sets in one headline scope share 1 − confidence equally, so the scope's
headline (:meth:`dpaudit.table.ResultsTable.headline`) holds at ``confidence`` jointly over
everything it maximises over. Importing this module registers every estimator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from dpaudit.bounds.estimators import decision as _decision  # noqa: F401
from dpaudit.bounds.estimators import di_beliefs as _di_beliefs  # noqa: F401
from dpaudit.bounds.estimators import epsilon_star as _epsilon_star  # noqa: F401
from dpaudit.bounds.estimators import lira as _lira  # noqa: F401
from dpaudit.bounds.estimators import loss_threshold as _loss_threshold  # noqa: F401
from dpaudit.bounds.estimators import one_run as _one_run  # noqa: F401
from dpaudit.bounds.estimators import rates as _rates  # noqa: F401
from dpaudit.bounds.estimators import scores as _scores  # noqa: F401 (registers "scores")
from dpaudit.bounds.estimators import stepwise as _stepwise  # noqa: F401
from dpaudit.bounds.estimators import threshold_family as _threshold_family  # noqa: F401
from dpaudit.bounds.registry import get_estimator
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultsTable


def audit_score_sets(
    sets: Sequence[ScoreSet],
    confidence: float,
    scope: Callable[[ScoreSet], str] = lambda s: "",
) -> ResultsTable:
    """Every set's estimators into one table; counted bounds in one ``scope`` split 1 − confidence.

    ``scope(set)`` names the headline a set's counted bounds compete in (default: one headline for
    the whole audit). Each of the k counted bounds of a scope is computed at 1 − (1 − confidence)/k.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    per_scope: dict[str, int] = defaultdict(int)
    for s in sets:
        for name in s.estimators:
            per_scope[scope(s)] += get_estimator(name).counted(s)
    table = ResultsTable()
    for s in sets:
        k = max(per_scope[scope(s)], 1)
        share = 1.0 - (1.0 - confidence) / k
        for name in s.estimators:
            table.extend(get_estimator(name).rows(s, share, confidence))
    return table
