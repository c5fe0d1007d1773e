"""Which dpaudit result answers each paper claim, and the rule its verdict uses.

One :class:`Claim` per paper result (:data:`dpaudit.fidelity.papers.FIDELITY_RESULTS`): the quantity
compared (ε lower bounds are compared as ε_LB / ε when the paper's ε and dpaudit's differ), the readers
of dpaudit's committed results, each with its role, and the :class:`Rule` that makes a number
"reproduced". The rules a reviewer signs (:mod:`dpaudit.fidelity.table` applies them):

- **The paper's estimator decides.** The first present reader with role ``paper`` (the paper's own
  estimator in the paper's setting, or the closest the machine allows, stated in its setting) gives
  the claim's verdict. Rows with role ``also`` (the paper's estimator elsewhere) get a verdict of their
  own that counts for nothing; rows with role ``beyond`` (another estimator, a modified protocol) are
  shown as "beyond the paper" and never judged against the paper's number.
- **No null result passes.** ``floor`` is the value the paper reports its quantity above (0 for a
  lower bound, an advantage or a difference; the FPR for a TPR): at or below it a row is neither
  "reproduced" nor "qualitatively", but "not reached" (when the paper's estimator would reach the
  paper's number at a larger trial count, which the row states) or "differs".
- **One-sided rules have two sides.** ``at_most`` refuses degenerate values below ``refuse_below``;
  ``at_least`` has an ``upper`` limit (or states why none).
- **Every tolerance says why it is that wide** (``Rule.why``), and a qualitative statement is one the
  paper makes, with its place (``qualitative_where``).
- **Only confidence intervals contain.** "The paper's number inside dpaudit's interval" counts only for
  a confidence interval (``Observed.interval``), never for ± a standard error or a min–max range.
"""

from __future__ import annotations

from dpaudit.fidelity.claims.bernau import BERNAU
from dpaudit.fidelity.claims.nasr import NASR
from dpaudit.fidelity.claims.others import OTHERS
from dpaudit.fidelity.claims.rules import Claim, Rule, RuleKind

__all__ = ["CLAIMS", "Claim", "Rule", "RuleKind"]

#: Every claim, in the table's order: Nasr, Bernau, then Erlingsson, Negoescu, Aerni and Steinke.
CLAIMS: tuple[Claim, ...] = (*NASR, *BERNAU, *OTHERS)
