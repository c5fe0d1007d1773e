"""Estimators ``one_run_steinke`` and ``one_run_fdp_gaussian``: ε lower bounds from ONE training run.

Both read a score set of m canaries (``member`` = the canary was included, drawn independently with
probability ½ by the audit before training; params ``delta``, ``inclusion_probability`` = 0.5 and
``seed``, which breaks score ties) and call :func:`dpaudit.bounds.onerun.audit_one_run`:

- ``one_run_steinke`` (Steinke, Nasr & Jagielski 2023, Thm. 5.2) assumes only the audit's own ½
  inclusion: always counted (tag ``one-run``).
- ``one_run_fdp_gaussian`` (Mahloujifar et al. 2024, f-DP with the Gaussian trade-off family)
  assumes the mechanism's curve is Gaussian: counted only when the set declares ``assumes =
  "gaussian"`` (full-batch DP-SGD); otherwise reported at the audit's confidence, uncounted.
"""

from __future__ import annotations

from dpaudit.bounds.onerun import OneRunAudit, audit_one_run
from dpaudit.bounds.registry import estimator, pre_registered
from dpaudit.scores import ScoreSet
from dpaudit.table import ResultRow

#: Analysis → the assumption tag its bound rests on (beside the audit's own ½ inclusion).
ANALYSIS_ASSUMES = {"steinke": "one-run", "fdp_gaussian": "gaussian"}
#: The prefix of the registered estimators (``one_run_<analysis>``), also the rows' estimator name.
PREFIX = "one_run_"


def analysis_counted(s: ScoreSet, analysis: str) -> bool:
    """Whether the headline may count ``analysis`` on ``s``: its assumption is guaranteed for ``s``
    and the attack registered it."""
    tag = ANALYSIS_ASSUMES[analysis]
    allowed = [PREFIX + analysis] if tag == "one-run" or s.assumes == tag else []
    return bool(pre_registered(s, allowed, [PREFIX + analysis]))


def one_run_audit(s: ScoreSet, analysis: str, level: float) -> OneRunAudit:
    """:func:`audit_one_run` of ``analysis`` on ``s`` at ``level`` (refuses sets of another game)."""
    if s.param("inclusion_probability") != 0.5:
        raise ValueError(f"score set {s.key}: one-run analyses need canaries included with probability 1/2")
    return audit_one_run(
        s.scores,
        s.member,
        delta=s.param("delta"),
        confidence=level,
        analysis=analysis,
        seed=int(s.param("seed")),
    )


def analysis_level(s: ScoreSet, analysis: str, counted_level: float, confidence: float) -> float:
    """The level ``analysis`` runs at: the counted share if counted, else the audit's confidence."""
    return counted_level if analysis_counted(s, analysis) else confidence


def _register(analysis: str) -> None:
    def rows(s: ScoreSet, counted_level: float, confidence: float) -> list[ResultRow]:
        level = analysis_level(s, analysis, counted_level, confidence)
        result = one_run_audit(s, analysis, level)
        return [
            ResultRow(
                s.key,
                "epsilon_lower",
                float(result.epsilon_lower),
                PREFIX + analysis,
                "bound",
                level=level,
                assumes=ANALYSIS_ASSUMES[analysis],
                counted=analysis_counted(s, analysis),
            )
        ]

    estimator(PREFIX + analysis, counted=lambda s: int(analysis_counted(s, analysis)))(rows)


for _analysis in ANALYSIS_ASSUMES:
    _register(_analysis)
