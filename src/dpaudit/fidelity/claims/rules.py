"""The rule a claim's verdict uses and the claim itself (see :mod:`dpaudit.fidelity.claims`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dpaudit.fidelity.evidence import Observed
from dpaudit.fidelity.sources import (
    Source,
)

__all__ = ["Claim", "Rule", "RuleKind"]

RuleKind = Literal["near", "factor", "at_least", "at_most", "statement", "flag"]


@dataclass(frozen=True)
class Rule:
    """When dpaudit's number reproduces the paper's, and why the tolerance is that wide.

    ``near``: |dpaudit − paper| ≤ tolerance, or the paper's number inside dpaudit's confidence
    interval; ``factor``: dpaudit within a factor ``tolerance`` of the paper (either way), or the paper
    inside the confidence interval; ``at_least``: paper − tolerance ≤ dpaudit ≤ ``upper``;
    ``at_most``: ``refuse_below`` ≤ dpaudit ≤ paper + tolerance; ``statement``: the paper's statement
    ``holds(value)`` (written out in ``statement_text``), for results stated without a number or whose
    number is a bound the paper states (δ′ ≤ δ); ``flag``: equal.
    """

    kind: RuleKind
    tolerance: float
    why: str
    upper: float | None = None
    refuse_below: float | None = None
    statement: Callable[[float], bool] | None = None
    statement_text: str = ""

    def __post_init__(self) -> None:
        if not self.why.strip():
            raise ValueError("every rule says why its tolerance is that wide")
        if self.kind == "statement" and (self.statement is None or not self.statement_text):
            raise ValueError("a statement rule needs the statement and its text")

    def holds(self, paper: float | None, observed: Observed) -> bool:
        value = observed.value
        if self.kind == "statement":
            return bool(self.statement(value))  # type: ignore[misc]
        if paper is None or not math.isfinite(value):
            return False
        inside = observed.confidence_interval and observed.low <= paper <= observed.high  # type: ignore[operator]
        if self.kind == "near":
            return bool(inside) or abs(value - paper) <= self.tolerance
        if self.kind == "factor":
            if value <= 0 or paper <= 0:
                return False
            return bool(inside) or max(value / paper, paper / value) <= self.tolerance
        if self.kind == "at_least":
            return value >= paper - self.tolerance and (self.upper is None or value <= self.upper)
        if self.kind == "at_most":
            return value <= paper + self.tolerance and (
                self.refuse_below is None or value >= self.refuse_below
            )
        return value == paper

    def text(self) -> str:
        if self.kind == "near":
            return f"±{self.tolerance:g}"
        if self.kind == "factor":
            return f"within ×{self.tolerance:g}"
        if self.kind == "statement":
            return self.statement_text
        if self.kind == "flag":
            return "= paper"
        if self.kind == "at_least":
            low = "≥ paper" + (f" − {self.tolerance:g}" if self.tolerance else "")
            return low + (f", ≤ {self.upper:g}" if self.upper is not None else "")
        high = "≤ paper" + (f" + {self.tolerance:g}" if self.tolerance else "")
        return high + (f", ≥ {self.refuse_below:g}" if self.refuse_below is not None else "")


@dataclass(frozen=True)
class Claim:
    """One paper result, how dpaudit answers it, and what counts as reproducing it.

    ``qualitative`` is a weaker statement the paper itself makes (paraphrased, with its place in
    ``qualitative_where``) and ``holds_qualitatively`` its test; ``floor`` the value the paper reports
    its quantity above (see the module docstring); ``needs`` what would produce the deciding row when
    dpaudit has none (a profile or run and its time).
    """

    result: str
    quantity: str
    sources: tuple[Source, ...]
    rule: Rule
    qualitative: str = ""
    qualitative_where: str = ""
    holds_qualitatively: Callable[[Observed], bool] | None = None
    paper_scale: float = 1.0
    floor: float | None = None
    needs: str = ""

    def __post_init__(self) -> None:
        if bool(self.qualitative) != (self.holds_qualitatively is not None):
            raise ValueError(
                f"{self.result}: a qualitative statement needs its test, and the test its statement"
            )
        if self.qualitative and not self.qualitative_where:
            raise ValueError(f"{self.result}: a qualitative statement must be the paper's, with its place")
