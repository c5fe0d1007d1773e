"""``dpaudit one-run``: ε lower bounds from one training run's canary scores and inclusion bits
(Steinke, Nasr & Jagielski 2023; Mahloujifar et al. 2024), with a verdict against a claimed ε.

Exit status (:data:`EXIT_CODES`): 0 when no violation is proven (or no claim was given), 1 for
``VIOLATION PROVEN``, 2 for bad input; so a CI job fails on a violation. The JSON's verdict uses the
library's names (:meth:`dpaudit.training_audit.verdict.Verdict.as_dict`,
:class:`~dpaudit.bounds.onerun.OneRunAudit`).
δ = 0 (pure DP) is accepted by ``steinke``; ``fdp_gaussian`` and the power statement need δ > 0 (a
Gaussian trade-off curve is (ε, 0)-DP for no finite ε).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from typing import Any

from dpaudit.cli.args import (
    CliError,
    non_negative_int,
    open_unit,
    positive_float,
    unit_from_zero,
)
from dpaudit.cli.scores import _epsilon_text, load_losses

#: The exit status of each outcome (documented in ``--help`` and docs/training-audit.md).
EXIT_CODES = {"no violation found": 0, "VIOLATION PROVEN": 1, "bad input": 2}
EPILOG = (
    "exit status: 0 no violation proven (or no --claimed-epsilon), 1 VIOLATION PROVEN, 2 bad input. "
    "--delta 0 runs steinke only (fdp_gaussian and the power statement need δ > 0)."
)


def _configure_one_run(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--scores", required=True, help="one score per canary (higher = 'in')")
    parser.add_argument(
        "--included", required=True, help="one 0/1 per canary: was it in training (drawn with probability ½)"
    )
    parser.add_argument(
        "--delta", type=unit_from_zero, required=True, help="δ in [0, 1); 0 (pure DP) for steinke only"
    )
    parser.add_argument(
        "--confidence", type=open_unit, default=0.95, help="level of each bound, joint over its guesses"
    )
    parser.add_argument(
        "--analysis",
        choices=["steinke", "fdp_gaussian", "both"],
        default="both",
        help="steinke (assumes nothing about the mechanism), fdp_gaussian (ASSUMES a Gaussian "
        "trade-off curve) or both (default)",
    )
    parser.add_argument(
        "--lower-is-member", action="store_true", help="a lower score means 'in' (losses): negate them"
    )
    parser.add_argument("--column", default=None, help="column to read from .csv/.parquet files")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed that breaks tied scores")
    parser.add_argument(
        "--claimed-epsilon",
        type=positive_float,
        default=None,
        help="the ε the training claims at --delta: the first line becomes a verdict against it "
        "(violation proven, or what this many canaries could have detected with 80 %% power)",
    )


def _run_one_run(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from dpaudit.bounds.onerun import audit_one_run

    scores = load_losses(args.scores, "--scores", args.column, default_column="score")
    included = load_losses(args.included, "--included", args.column, default_column="included")
    if included.size != scores.size:
        raise CliError("--included", f"holds {included.size} values, --scores holds {scores.size}")
    if not np.all(np.isin(included, (0.0, 1.0))):
        raise CliError("--included", "must hold only 0 and 1")
    if args.lower_is_member:
        scores = -scores
    names = ["steinke", "fdp_gaussian"] if args.analysis == "both" else [args.analysis]
    warnings = _inclusion_warnings(int(included.sum()), int(scores.size))
    if args.delta == 0.0:
        if args.analysis == "fdp_gaussian":
            raise CliError(
                "--delta",
                "fdp_gaussian needs δ > 0: a Gaussian trade-off curve is (ε, 0)-DP for no finite ε; give "
                "a δ > 0 or --analysis steinke",
            )
        if "fdp_gaussian" in names:
            names = ["steinke"]
            warnings.append("--delta 0: fdp_gaussian left out (it needs δ > 0); steinke holds for pure DP")
    audits = {
        name: audit_one_run(
            scores,
            included.astype(bool),
            delta=args.delta,
            confidence=args.confidence,
            analysis=name,
            seed=args.seed,
        )
        for name in names
    }
    verdict = None
    if args.claimed_epsilon is not None:
        from dpaudit.training_audit.power import detectable_epsilon
        from dpaudit.training_audit.verdict import NO_VIOLATION, VIOLATION

        head = audits["steinke" if "steinke" in audits else "fdp_gaussian"]
        caught = bool(head.epsilon_lower > args.claimed_epsilon)
        verdict = {
            "status": VIOLATION if caught else NO_VIOLATION,
            "caught": caught,
            "claimed_epsilon": args.claimed_epsilon,
            "delta": args.delta,
            "confidence": head.confidence,
            "epsilon_lower": head.epsilon_lower,
            "estimator": head.estimator,
            "assumption": head.assumption,
            "detectable_epsilon": detectable_epsilon(
                args.claimed_epsilon, args.delta, int(scores.size), confidence=args.confidence, seed=args.seed
            )
            if args.delta > 0
            else None,
            "canaries": int(scores.size),
            "included": int(included.sum()),
            "next": _next_step(caught),
        }
    return {
        "canaries": int(scores.size),
        "included": int(included.sum()),
        "warnings": warnings,
        "delta": args.delta,
        **({"verdict": verdict} if verdict is not None else {}),
        "bounds": {name: asdict(a) for name, a in audits.items()},
    }


def _next_step(caught: bool) -> str:
    if caught:
        return (
            "the mechanism leaks more than its claim: do not publish the claimed ε; find the cause (audit "
            "the training code itself with dpaudit.training_audit.TrainingAuditor) and audit again"
        )
    return "nothing proven at this power: more canaries (or pooled runs) raise it; see docs/training-audit.md"


def one_run_exit_status(result: dict[str, Any]) -> int:
    """1 for a proven violation of --claimed-epsilon, else 0 (:data:`EXIT_CODES`)."""
    verdict = result.get("verdict")
    return EXIT_CODES["VIOLATION PROVEN"] if verdict is not None and verdict["caught"] else 0


#: Two-sided p-value of the included count under Binomial(m, ½) below which the CLI warns.
INCLUSION_WARNING_P = 1e-3


def _inclusion_warnings(included: int, canaries: int) -> list[str]:
    """A warning when the included count is implausible for independent fair coins (the draw every
    one-run bound assumes, Steinke et al. 2023): e.g. an all-ones vector from code that never drew."""
    from scipy.stats import binomtest

    p = binomtest(included, canaries, 0.5).pvalue
    if p >= INCLUSION_WARNING_P:
        return []
    return [
        f"--included: {included} of {canaries} canaries included; the bound assumes each was included "
        f"independently with probability 1/2, and a fair draw is this far from {canaries / 2:g} with "
        f"probability {p:.2g}: no bound holds for another inclusion rule (draw the vector with a fair coin "
        f"before training)"
    ]


def _one_run_text(result: dict[str, Any]) -> list[str]:
    """The verdict comes from steinke (no assumption on the mechanism) whenever it was run."""
    bounds = result["bounds"]
    name = "steinke" if "steinke" in bounds else "fdp_gaussian"
    head = bounds[name]
    level = f"{100 * head['confidence']:g} %"
    if head["epsilon_lower"] > 0:
        verdict = (
            f"PROVEN: ε ≥ {_epsilon_text(head['epsilon_lower'])} at δ = {result['delta']:g}, {level} "
            f"confidence ({name}; {head['assumption']})"
        )
    else:
        verdict = f"NOTHING PROVEN at {level} ({name}): the canaries' scores do not separate included ones"
    lines = [verdict, f"canaries: {result['canaries']}, {result['included']} included"]
    lines += [f"warning: {w}" for w in result.get("warnings", [])]
    claim = result.get("verdict")
    if claim is not None:
        eps, claimed = _epsilon_text(head["epsilon_lower"]), f"{claim['claimed_epsilon']:g}"
        if claim["caught"]:
            first = f"VIOLATION PROVEN: ε ≥ {eps} > claimed {claimed} ({level}, {name}; {head['assumption']})"
        else:
            detectable = claim["detectable_epsilon"]
            reach = (
                "no power statement at δ = 0 (the ideal Gaussian game is never pure DP)"
                if detectable is None
                else f"a perfect attack (ideal Gaussian game) detects true ε ≥ {detectable:.3g} at 80 % power"
                if math.isfinite(detectable)
                else "not even a perfect attack could prove more than the claim: add canaries"
            )
            first = (
                f"no violation found: ε ≥ {eps} does not exceed the claimed {claimed}; with "
                f"{result['canaries']} canaries {reach} ({name})"
            )
        lines.insert(0, first)
        lines.insert(1, f"next: {claim['next']}")
    for key, b in bounds.items():
        lines.append(
            f"  {key:<13} ε ≥ {_epsilon_text(b['epsilon_lower']):>7} at {100 * b['confidence']:g} % "
            f"({b['correct']}/{b['guesses']} guesses correct); {b['assumption']}"
        )
    lines.append("--json prints every number")
    return lines
