"""The verdict of an audit of someone's DP-SGD code, against the ε it claims.

Three outcomes, each at the audit's joint level (1 − α with α split once: α/2 for the ε lower bound,
α/2 shared by every stochastic conformance check of every run; exact checks cost nothing), so the
chance that a correct DP-SGD gets either of the first two is at most α:

* ``VIOLATION PROVEN``: the one-run ε lower bound (Steinke, Nasr & Jagielski 2023, on the transcript
  scores) exceeds the claimed ε. It assumes only the audit's own inclusion of canaries when the scores
  come from the released weights (``source="iterates"``); when they come from the gradient handed to
  ``apply_gradients`` it also assumes that gradient is the released update, and says whether the tap
  check confirmed it at every step (:func:`bound_assumption`);
* ``DOES NOT MATCH ITS DECLARED DP-SGD``: a conformance check rejected (the code is not the mechanism
  the claim was computed for; this is not an ε bound);
* ``no violation found``, with the power statement, and — when a check could not run — ``but N
  check(s) could not run``: a skipped check is never reported as passed.

Every check is listed under its status (rejected, skipped with its reason and the bug classes it
leaves unseen, passed, not applicable), and every verdict ends with what to do next.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit.bounds.onerun import DEFAULT_GUESS_FRACTIONS, OneRunAudit, audit_one_run
from dpaudit.training_audit.check import NOT_APPLICABLE, PASSED, SKIPPED, TAP, CheckResult, unseen
from dpaudit.training_audit.conformance import run_checks
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.power_transcript import EPSILON_CAP, audit_power
from dpaudit.training_audit.residual import mixing_warnings
from dpaudit.training_audit.transcript import Transcript, transcript_scores

__all__ = ["MISMATCH", "NO_VIOLATION", "POWER", "VIOLATION", "Verdict", "bound_assumption", "decide"]

VIOLATION = "VIOLATION PROVEN"
MISMATCH = "DOES NOT MATCH ITS DECLARED DP-SGD"
NO_VIOLATION = "no violation found"
POWER = 0.8
#: Where a user reads how to raise the audit's power.
DOCS = "docs/training-audit.md"


@dataclass(frozen=True)
class Verdict:
    """What one audit (one or several pooled runs) says about the claim; ``str()`` is the report.
    ``scores``: every canary's transcript score, runs in order (what ``bound`` was computed from)."""

    status: str
    claimed_epsilon: float
    delta: float
    confidence: float
    bound: OneRunAudit
    detectable_epsilon: float
    runs: int
    included: int
    checks: tuple[CheckResult, ...]
    warnings: tuple[str, ...]
    declaration: str
    scores: np.ndarray = dataclasses.field(repr=False, compare=False)
    #: What the ε lower bound assumes besides the audit's random inclusion (:func:`bound_assumption`).
    assumption: str = "assumes nothing about the mechanism"

    @property
    def caught(self) -> bool:
        """True for a violation or a mismatch: the code does not deliver its claim as declared."""
        return self.status != NO_VIOLATION

    @property
    def epsilon_lower(self) -> float:
        return self.bound.epsilon_lower

    @property
    def mismatches(self) -> tuple[CheckResult, ...]:
        return tuple(c for c in self.checks if c.kind == "mismatch" and c.rejected)

    def _named(self, status: str) -> list[str]:
        return sorted({c.name for c in self.checks if c.status == status})

    @property
    def skipped(self) -> tuple[CheckResult, ...]:
        """Checks that apply but could not run (first of each name over the runs)."""
        first = {c.name: c for c in reversed(self.checks) if c.status == SKIPPED}
        return tuple(first[n] for n in sorted(first))

    def next_step(self) -> str:
        """What to do next, for this status."""
        if self.status == VIOLATION:
            return (
                "the code leaks more than its claim: do not publish the claimed ε; find the cause (the "
                "rejected checks, if any, point at it), fix it and audit again"
            )
        if self.status == MISMATCH:
            return (
                "the claimed ε was computed for another mechanism and does not hold for this code: fix what "
                "the rejected check names (or the declaration, if its numbers are wrong) and audit again"
            )
        if self.skipped:
            return (
                "the bugs of the skipped checks are unseen: make them run (each line above says how) and "
                "audit again, or state the claim with that gap"
            )
        return (
            f"nothing found at this power; to see smaller leaks, raise it as {DOCS} (How much an audit can "
            "see) says: more canaries, more audit-only input columns, or pooled runs"
        )

    def headline(self) -> str:
        """The verdict's first line."""
        pct = f"{100 * self.confidence:g} %"
        if self.status == VIOLATION:
            return (
                f"{VIOLATION}: ε ≥ {self.epsilon_lower:.3g} > claimed {self.claimed_epsilon:.3g} "
                f"({pct}, {self.assumption})"
            )
        if self.status == MISMATCH:
            names = ", ".join(sorted({c.name for c in self.mismatches}))
            return f"{MISMATCH}: {names} ({pct})"
        reach = (
            f"this audit's bound exceeds the claim with {100 * POWER:g} % power from true ε ≥ "
            f"{self.detectable_epsilon:.3g} (estimated by simulating this run's own bound, m = "
            f"{self.bound.canaries}; 73–85 % of simulated audits exceeded the claim at the stated ε)"
            if math.isfinite(self.detectable_epsilon)
            else f"this run's bound cannot prove a violation of a claim of {self.claimed_epsilon:.3g} (not "
            f"with {100 * POWER:g} % power up to true ε {EPSILON_CAP:g}); only the checks can flag it — to "
            "give the bound power: more audit-only columns, more canaries, pooled runs (runs=…)"
        )
        skipped = self.skipped
        if skipped:
            names = ", ".join(c.name for c in skipped)
            return f"{NO_VIOLATION}, but {len(skipped)} check(s) could not run: {names}; {reach}"
        return f"{NO_VIOLATION}; {reach}, and every check that applies ran and passed"

    def __str__(self) -> str:
        lines = [self.headline(), f"  declared: {self.declaration}"]
        lines.append(
            f"  ε lower bound {self.epsilon_lower:.3g} (steinke, {100 * self.bound.confidence:g} % "
            "share of the "
            f"joint level; {self.assumption}) from {self.bound.canaries} canaries ({self.included} included) "
            f"in {self.runs} run(s)"
        )
        lines += [f"  mismatch: {c.name}: {c.message}" for c in self.mismatches]
        lines += [f"  skipped: {c.name}: {c.message.removeprefix('skipped: ')}; unseen: {unseen(c.name)}"
                  for c in self.skipped]  # fmt: skip
        listed = [f"{s}: {', '.join(self._named(s))}" for s in (PASSED, NOT_APPLICABLE) if self._named(s)]
        if listed:
            lines.append(f"  {'; '.join(listed)}")
        lines += [f"  WARNING: {w}" for w in self.warnings]
        lines.append(f"  next: {self.next_step()}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """Plain values for JSON (the CLI's and the benchmarks' record)."""
        return {
            "status": self.status,
            "caught": self.caught,
            "claimed_epsilon": self.claimed_epsilon,
            "delta": self.delta,
            "confidence": self.confidence,
            "epsilon_lower": self.epsilon_lower,
            "detectable_epsilon": self.detectable_epsilon,
            "runs": self.runs,
            "canaries": self.bound.canaries,
            "included": self.included,
            "assumption": self.assumption,
            "mismatches": [c.name for c in self.mismatches],
            "skipped": [c.name for c in self.skipped],
            "warnings": list(self.warnings),
            "next": self.next_step(),
            "checks": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "status": c.status,
                    "level": c.level,
                    "p_value": c.p_value,
                    "statistic": c.statistic,
                    "message": c.message,
                }
                for c in self.checks
            ],  # fmt: skip
        }


def decide(
    transcripts: Sequence[Transcript],
    included: Sequence[np.ndarray],
    declared: DeclaredDPSGD,
    *,
    confidence: float = 0.95,
    seed: int = 0,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
) -> Verdict:
    """Pool the runs' canaries into one ε lower bound, run every check of every run, and decide.

    Independent runs with independent canaries pool soundly: each canary takes part in one run only,
    so the joint mechanism is as private for it as its own run.
    """
    if not transcripts or len(transcripts) != len(included):
        raise ValueError("decide() needs one inclusion vector per transcript, and at least one transcript")
    if not 0.5 <= confidence < 1.0:
        raise ValueError(f"confidence must lie in [0.5, 1), got {confidence!r}")
    alpha = 1.0 - confidence
    bound_confidence = 1.0 - alpha / 2.0
    check_level = alpha / 2.0 / len(transcripts)
    q = declared.sampling_rate
    scores = np.concatenate([transcript_scores(t, q) for t in transcripts])
    inc = np.concatenate([np.asarray(i, dtype=bool) for i in included])
    bound = audit_one_run(
        scores,
        inc,
        delta=declared.delta,
        confidence=bound_confidence,
        analysis="steinke",
        seed=seed,
        guess_fractions=guess_fractions,
    )
    checks = [
        c for run, t in enumerate(transcripts) for c in run_checks(t, declared, check_level, seed=seed + run)
    ]
    notes = [c.message for c in checks if c.kind == "warning" and c.rejected]
    notes += [w for t in transcripts for w in mixing_warnings(t.stochastic_layers)]
    if any(t.source == "iterates" and t.update_mismatch is None for t in transcripts):
        notes.append(
            "the optimizer's apply_gradients never received the first layer's gradient: the evidence is the "
            "iterates' change, and the noise checks assume a plain SGD update"
        )
    if int(sum(int(t.canary_rows.sum()) for t in transcripts)) == 0:
        notes.append("no canary joined any batch: the ε lower bound and the signal checks had nothing to see")
    claimed = declared.claimed_epsilon
    mismatched = any(c.kind == "mismatch" and c.rejected for c in checks)
    status = VIOLATION if bound.epsilon_lower > claimed else MISMATCH if mismatched else NO_VIOLATION
    detectable = audit_power(
        transcripts, included, declared, confidence=bound_confidence, power=POWER,
        guess_fractions=guess_fractions, seed=seed,
    ).epsilon  # fmt: skip
    return Verdict(
        status=status,
        claimed_epsilon=claimed,
        delta=declared.delta,
        confidence=confidence,
        bound=bound,
        detectable_epsilon=detectable,
        runs=len(transcripts),
        included=int(inc.sum()),
        checks=tuple(checks),
        warnings=tuple(dict.fromkeys(notes)),
        declaration=declared.describe(),
        scores=scores,
        assumption=bound_assumption(transcripts, checks),
    )


def bound_assumption(transcripts: Sequence[Transcript], checks: Sequence[CheckResult]) -> str:
    """What the transcript-score bound assumes about the mechanism (its label).

    Scores computed from the weights' change are functions of the released iterates, which DP-SGD's
    guarantee covers whatever the optimizer: the bound then assumes nothing about the mechanism (only
    the audit's own random inclusion). Scores computed from the gradient handed to ``apply_gradients``
    assume that gradient is the released update (noise or clipping inside the optimizer would be
    missed); the label says whether the tap check confirmed it at every step."""
    if all(t.source == "iterates" for t in transcripts):
        return "assumes nothing about the mechanism: scores from the released weights"
    tap = [c for c in checks if c.name == TAP]
    base = "assumes the gradient passed to apply_gradients is the released update"
    if tap and all(c.status == PASSED for c in tap):
        return f"{base}; checked at every step"
    if any(c.rejected for c in tap):
        return f"{base}; the tap check found it is not"
    return f"{base}; not checked"
