"""``dpaudit accountant``, ``calibrate``, ``identifiability`` and ``eps-lower``: the accountants' ε,
noise calibration, Bernau et al.'s identifiability scores and the counts-based ε lower bound."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from dpaudit.cli.args import (
    CliError,
    half_open_unit,
    non_negative_float,
    non_negative_int,
    number,
    open_unit,
    positive_float,
    positive_int,
    unit_from_zero,
)


def _accountant_args(parser: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    parser.add_argument("--delta", type=open_unit, required=True, help="target δ in (0, 1)")
    parser.add_argument(
        "--sampling-rate",
        type=half_open_unit,
        required=True,
        help="Poisson sampling rate q in (0, 1]; 1 = full batch",
    )
    parser.add_argument("--steps", type=positive_int, required=True, help="number of DP-SGD steps T")
    parser.add_argument(
        "--accountant",
        choices=list(choices),
        default="pld",
        help="accountant (default pld, as the audit's declaration and the report use; rdp is looser and "
        "takes any number of steps)",
    )


def _configure_accountant(parser: argparse.ArgumentParser) -> None:
    from dpaudit.bounds.accountants import ACCOUNTANTS

    parser.add_argument(
        "--noise-multiplier", type=positive_float, required=True, help="noise multiplier z > 0"
    )
    _accountant_args(parser, (*ACCOUNTANTS, "all"))


def _check_pld_steps(args: argparse.Namespace) -> None:
    """Refuse PLD compositions too large to hold in memory before any work (names ``--steps``)."""
    from dpaudit.bounds.accountants import PLD_MAX_STEPS

    if args.accountant in ("pld", "all") and args.steps > PLD_MAX_STEPS:
        raise CliError(
            "--steps",
            f"{args.steps} exceeds the PLD accountant's limit of {PLD_MAX_STEPS} steps (the composed "
            "privacy loss distribution would not fit in memory); use --accountant rdp",
        )


def _run_accountant(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds.accountants import all_epsilons, compute_epsilon

    _check_pld_steps(args)
    inputs = (args.noise_multiplier, args.sampling_rate, args.steps, args.delta)
    epsilon: float | dict[str, float]
    try:
        if args.accountant == "all":
            epsilon = all_epsilons(*inputs)
        else:
            epsilon = compute_epsilon(*inputs, args.accountant)
    except (ValueError, ArithmeticError, RuntimeError) as exc:
        message = f"{args.noise_multiplier} is outside what the accountant can evaluate: {exc}"
        raise CliError("--noise-multiplier", message) from exc
    return {
        "epsilon": epsilon,
        "accountant": args.accountant,
        "noise_multiplier": args.noise_multiplier,
        "sampling_rate": args.sampling_rate,
        "steps": args.steps,
        "delta": args.delta,
    }


def _configure_calibrate(parser: argparse.ArgumentParser) -> None:
    from dpaudit.bounds.accountants import ACCOUNTANTS

    parser.add_argument("--target-epsilon", type=positive_float, required=True, help="target ε > 0")
    _accountant_args(parser, ACCOUNTANTS)


def _run_calibrate(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds.accountants import calibrate_noise_multiplier, compute_epsilon

    _check_pld_steps(args)
    try:
        z = calibrate_noise_multiplier(
            args.target_epsilon, args.delta, args.sampling_rate, args.steps, args.accountant
        )
    except (ValueError, ArithmeticError, RuntimeError) as exc:
        raise CliError("--target-epsilon", str(exc)) from exc
    return {
        "noise_multiplier": z,
        "epsilon": compute_epsilon(z, args.sampling_rate, args.steps, args.delta, args.accountant),
        "target_epsilon": args.target_epsilon,
        "accountant": args.accountant,
        "sampling_rate": args.sampling_rate,
        "steps": args.steps,
        "delta": args.delta,
    }


def _configure_identifiability(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--epsilon", type=non_negative_float, help="privacy budget ε >= 0")
    group.add_argument("--rho-beta", type=number, help="posterior-belief bound ρβ in [0.5, 1)")
    group.add_argument("--rho-alpha", type=number, help="expected-advantage bound ρα in [0, 1)")
    parser.add_argument("--delta", type=open_unit, required=True, help="δ in (0, 1)")


def _run_identifiability(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds import identifiability as ident

    if args.epsilon is not None:
        epsilon = args.epsilon
    elif args.rho_beta is not None:
        if not 0.5 <= args.rho_beta < 1.0:
            raise CliError("--rho-beta", f"{args.rho_beta} is outside [0.5, 1)")
        epsilon = ident.epsilon_from_rho_beta(args.rho_beta)
    else:
        if not 0.0 <= args.rho_alpha < 1.0:
            raise CliError("--rho-alpha", f"{args.rho_alpha} is outside [0, 1)")
        epsilon = ident.epsilon_from_rho_alpha(args.rho_alpha, args.delta)
        if not math.isfinite(epsilon):
            raise CliError("--rho-alpha", f"{args.rho_alpha} is too close to 1: the matching ε is infinite")
    return {
        "epsilon": epsilon,
        "rho_beta": ident.rho_beta_from_epsilon(epsilon),
        "rho_alpha": ident.rho_alpha_from_epsilon(epsilon, args.delta),
        "delta": args.delta,
    }


def _configure_eps_lower(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fp", type=non_negative_int, required=True, help="false positives (of the negatives)"
    )
    parser.add_argument(
        "--fn", type=non_negative_int, required=True, help="false negatives (of the positives)"
    )
    parser.add_argument("--negatives", type=positive_int, required=True, help="trials on D′ (negatives)")
    parser.add_argument("--positives", type=positive_int, required=True, help="trials on D (positives)")
    parser.add_argument("--delta", type=unit_from_zero, required=True, help="δ in [0, 1); 0 = pure DP")
    parser.add_argument(
        "--confidence",
        type=open_unit,
        default=0.95,
        help="joint confidence of the bound (default 0.95: each Clopper–Pearson limit at 0.975, "
        "the upper end of a two-sided 95%% interval, as in Nasr et al.)",
    )


def _run_eps_lower(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds.empirical import epsilon_lower_from_counts

    if args.fp > args.negatives:
        raise CliError("--fp", f"{args.fp} exceeds --negatives {args.negatives}")
    if args.fn > args.positives:
        raise CliError("--fn", f"{args.fn} exceeds --positives {args.positives}")
    bound = epsilon_lower_from_counts(
        args.fp, args.fn, args.negatives, args.positives, args.delta, args.confidence
    )
    return {
        "epsilon_lower": bound.epsilon_lower,
        "epsilon_point": bound.epsilon_point,
        "fpr_upper": bound.fpr_upper,
        "fnr_upper": bound.fnr_upper,
        "fpr": bound.fpr,
        "fnr": bound.fnr,
        "confidence": bound.confidence,
        "limit_level": bound.limit_level,
        "delta": args.delta,
    }
