"""The verdict of an audit of someone's DP-SGD code, against the ε it claims.

Three outcomes, each at the audit's joint level (1 − α with α split once: α/2 for the ε lower bound,
α/2 shared by every stochastic conformance check of every run; exact checks cost nothing), so the
chance that a correct DP-SGD gets either of the first two is at most α:

* ``VIOLATION PROVEN``: the one-run ε lower bound (Steinke, Nasr & Jagielski 2023, on the transcript
  scores; it assumes nothing about the mechanism) exceeds the claimed ε;
* ``DOES NOT MATCH ITS DECLARED DP-SGD``: a conformance check rejected (the code is not the mechanism
  the claim was computed for; this is not an ε bound);
* ``no violation found``, with the power statement: the smallest true ε this audit would have shown
  above the claim with 80 % probability on the ideal canary game (a perfect attack, m canaries), and
  the checks that passed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpaudit.bounds.onerun import DEFAULT_GUESS_FRACTIONS, OneRunAudit, audit_one_run
from dpaudit.onerun.check import CheckResult
from dpaudit.onerun.conformance import run_checks
from dpaudit.onerun.declaration import DeclaredDPSGD
from dpaudit.onerun.power import detectable_epsilon
from dpaudit.onerun.transcript import Transcript, transcript_scores

__all__ = ["MISMATCH", "NO_VIOLATION", "POWER", "VIOLATION", "Verdict", "decide"]

VIOLATION = "VIOLATION PROVEN"
MISMATCH = "DOES NOT MATCH ITS DECLARED DP-SGD"
NO_VIOLATION = "no violation found"
POWER = 0.8


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

    def headline(self) -> str:
        """The verdict's first line."""
        pct = f"{100 * self.confidence:g} %"
        if self.status == VIOLATION:
            return (
                f"{VIOLATION}: ε ≥ {self.epsilon_lower:.3g} > claimed {self.claimed_epsilon:.3g} "
                f"({pct}, assumes nothing)"
            )
        if self.status == MISMATCH:
            names = ", ".join(sorted({c.name for c in self.mismatches}))
            return f"{MISMATCH}: {names} ({pct})"
        passed = ", ".join(sorted({c.name for c in self.checks if c.kind == "mismatch"}))
        reach = (
            f"this audit detects true ε ≥ {self.detectable_epsilon:.3g} with {100 * POWER:g} % power at "
            f"m = {self.bound.canaries}"
            if math.isfinite(self.detectable_epsilon)
            else f"at m = {self.bound.canaries} not even a perfect attack could prove ε above the claim"
        )
        return f"{NO_VIOLATION}; {reach}, and these checks passed: {passed}"

    def __str__(self) -> str:
        lines = [self.headline(), f"  declared: {self.declaration}"]
        lines.append(
            f"  ε lower bound {self.epsilon_lower:.3g} (steinke, {100 * self.bound.confidence:g} % "
            "share of the "
            f"joint level, assumes nothing) from {self.bound.canaries} canaries ({self.included} included) "
            f"in {self.runs} run(s)"
        )
        lines += [f"  mismatch: {c.message}" for c in self.mismatches]
        lines += [f"  WARNING: {w}" for w in self.warnings]
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
            "mismatches": [c.name for c in self.mismatches],
            "warnings": list(self.warnings),
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
    if any(t.source == "iterates" for t in transcripts):
        notes.append(
            "the optimizer's apply_gradients never received the first layer's gradient: the evidence is the "
            "iterates' change, and the noise checks assume a plain SGD update"
        )
    if int(sum(int(t.canary_rows.sum()) for t in transcripts)) == 0:
        notes.append("no canary joined any batch: the ε lower bound and the signal checks had nothing to see")
    claimed = declared.claimed_epsilon
    mismatched = any(c.kind == "mismatch" and c.rejected for c in checks)
    status = VIOLATION if bound.epsilon_lower > claimed else MISMATCH if mismatched else NO_VIOLATION
    detectable = detectable_epsilon(
        claimed,
        declared.delta,
        int(inc.size),
        confidence=bound_confidence,
        power=POWER,
        guess_fractions=guess_fractions,
        seed=seed,
    )
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
    )
