"""``dpaudit`` command line: the bounds library without the pipeline.

Every subcommand is a :class:`Command` (name, help, argument set-up, run function returning a flat
or nested dict of results) listed in :data:`COMMANDS`; new subcommands are added there (or through
:func:`register`) and nothing else changes. ``--json`` prints the result as one JSON object,
otherwise ``key: value`` lines. Bad input exits with status 2 and a message naming the argument.
Heavy libraries (dp_accounting, pandas) are imported inside the commands that need them, so
``import dpaudit.cli`` stays fast; TensorFlow is never imported here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS", "CliError", "Command", "build_parser", "main", "register"]


class CliError(Exception):
    """Bad command-line input; ``argument`` is the option to blame (e.g. ``--members``)."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(f"argument {argument}: {message}")
        self.argument = argument


@dataclass(frozen=True)
class Command:
    """One ``dpaudit`` subcommand."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict[str, Any]]


# ----------------------------------------------------------------------------------- argument types


def _number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("NaN is not allowed")
    return value


def open_unit(text: str) -> float:
    """A number strictly between 0 and 1 (δ, confidence levels)."""
    value = _number(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1)")
    return value


def unit_from_zero(text: str) -> float:
    """A number in [0, 1) (δ where pure DP, δ = 0, is meaningful)."""
    value = _number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside [0, 1)")
    return value


def half_open_unit(text: str) -> float:
    """A number in (0, 1] (sampling rates; 1 = full batch)."""
    value = _number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1]")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return value


def _integer(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text} must be >= {minimum}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (counts)."""
    return _integer(text, 0)


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _integer(text, 1)


# ------------------------------------------------------------------------------------------ commands


def _accountant_args(parser: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    parser.add_argument("--delta", type=open_unit, required=True, help="target δ in (0, 1)")
    parser.add_argument(
        "--sampling-rate",
        type=half_open_unit,
        required=True,
        help="Poisson sampling rate q in (0, 1]; 1 = full batch",
    )
    parser.add_argument("--steps", type=positive_int, required=True, help="number of DP-SGD steps T")
    parser.add_argument("--accountant", choices=list(choices), default="rdp", help="accountant (default rdp)")


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
    group.add_argument("--rho-beta", type=_number, help="posterior-belief bound ρβ in [0.5, 1)")
    group.add_argument("--rho-alpha", type=_number, help="expected-advantage bound ρα in [0, 1)")
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


def load_losses(
    path: str, argument: str, column: str | None = None, minimum: int = 2, default_column: str = "loss"
) -> Any:
    """Read a 1-D array of numbers from .npy, .csv or .parquet; every problem names ``argument``.

    CSV and Parquet files need exactly one column, a column named ``column`` if given, or one named
    ``default_column`` (``loss``; ``score`` for the scores command); a CSV may have a header row
    or none. Refused, with exit 2: a missing path, a directory, an empty (0-byte) file, an
    unreadable or unsupported file, a 2-D array, a missing column, fewer than ``minimum`` values,
    NaN or infinite values.
    """
    import numpy as np

    file = Path(path)
    if file.is_dir():
        raise CliError(argument, f"{path} is a directory, not a file")
    if not file.exists():
        raise CliError(argument, f"file {path} does not exist")
    if not file.is_file():
        raise CliError(argument, f"{path} is not a regular file")
    if file.stat().st_size == 0:
        raise CliError(argument, f"{path} is empty (0 bytes)")
    suffix = file.suffix.lower()
    try:
        if suffix == ".npy":
            values = np.load(file, allow_pickle=False)
        elif suffix in (".csv", ".parquet"):
            values = _load_table(file, suffix, argument, column, default_column)
        else:
            raise CliError(argument, f"{path}: unsupported file type {suffix!r} (use .npy, .csv or .parquet)")
        values = np.asarray(values, dtype=np.float64)
    except CliError:
        raise
    except (ValueError, TypeError, OSError, EOFError, KeyError, ImportError) as exc:
        raise CliError(argument, f"cannot read numbers from {path}: {exc}") from exc
    if values.ndim != 1 and not (values.ndim == 2 and 1 in values.shape):
        raise CliError(argument, f"{path} must hold a 1-D array, got shape {values.shape}")
    values = values.ravel()
    if values.size == 0:
        raise CliError(argument, f"{path} holds no values")
    if values.size < minimum:
        raise CliError(argument, f"{path} holds {values.size} values; at least {minimum} are needed")
    if not np.all(np.isfinite(values)):
        bad = int(np.sum(~np.isfinite(values)))
        raise CliError(argument, f"{path} contains {bad} NaN or infinite values")
    return values


def _load_table(file: Path, suffix: str, argument: str, column: str | None, default_column: str) -> Any:
    import pandas as pd

    if suffix == ".parquet":
        frame = pd.read_parquet(file)
    else:
        try:
            frame = pd.read_csv(file, header=None)
        except pd.errors.EmptyDataError:
            raise CliError(argument, f"{file} holds no values") from None
        try:
            frame.iloc[0].astype(float)
        except (ValueError, TypeError):
            frame = pd.read_csv(file)
        except IndexError:
            raise CliError(argument, f"{file} holds no values") from None
    wanted = column or default_column
    if column is not None and column not in frame.columns:
        raise CliError(
            argument, f"{file} has no column {column!r} (columns: {list(map(str, frame.columns))})"
        )
    if column is None and frame.shape[1] == 1:
        series = frame.iloc[:, 0]
    elif wanted in frame.columns:
        series = frame[wanted]
    else:
        raise CliError(
            argument, f"{file} has {frame.shape[1]} columns; expected one, or one named {wanted!r} (--column)"
        )
    return pd.to_numeric(series, errors="raise").to_numpy(dtype=float)


def _configure_epsilon_star(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--members", required=True, help="member (training) losses: .npy, .csv or .parquet")
    parser.add_argument("--non-members", required=True, help="non-member losses: .npy, .csv or .parquet")
    parser.add_argument(
        "--delta", type=open_unit, default=None, help="δ (default 1/(n ln n), n = member count)"
    )
    parser.add_argument(
        "--method",
        choices=["parametric", "empirical"],
        default="parametric",
        help="parametric (App. B, default) or empirical CDFs (Eq. 7)",
    )


def _run_epsilon_star(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds.epsilon_star import epsilon_star_empirical, epsilon_star_parametric

    members = load_losses(args.members, "--members")
    nonmembers = load_losses(args.non_members, "--non-members")
    if args.delta is not None and args.delta >= 0.5:
        raise CliError("--delta", f"{args.delta} is outside (0, 0.5)")
    estimator = epsilon_star_parametric if args.method == "parametric" else epsilon_star_empirical
    try:
        result = estimator(members, nonmembers, args.delta)
    except ValueError as exc:
        # e.g. 2 members: the default δ = 1/(n ln n) is 0.72, outside (0, 0.5).
        if args.delta is None and "members" in str(exc):
            raise CliError("--members", f"{args.members}: {exc}; give --delta") from exc
        raise CliError("--delta" if args.delta is not None else "--members", str(exc)) from exc
    return {
        "epsilon_star": result.epsilon_star,
        "delta": result.delta,
        "method": result.method,
        "ks_pvalue": result.ks_pvalue,
        "threshold": result.threshold,
        "fpr": result.fpr,
        "fnr": result.fnr,
        "n_members": result.n_members,
        "n_nonmembers": result.n_nonmembers,
    }


def _configure_scores(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="in_path", required=True, help="scores of 'in' trials (D, members)")
    parser.add_argument("--out", dest="out_path", required=True, help="scores of 'out' trials (D′)")
    parser.add_argument("--delta", type=unit_from_zero, required=True, help="δ in [0, 1); 0 = pure DP")
    parser.add_argument(
        "--confidence", type=open_unit, default=0.95, help="joint confidence of every bound (default 0.95)"
    )
    parser.add_argument(
        "--column", default=None, help="column to read from .csv/.parquet files with several columns"
    )
    parser.add_argument(
        "--mechanism",
        choices=["gaussian", "subsampled"],
        default=None,
        help="mechanism family to assume besides the assumption-free sweeps: 'gaussian' (full batch: "
        "the GDP bound is valid) or 'subsampled' (Poisson-subsampled Gaussian with --q and --steps)",
    )
    parser.add_argument(
        "--q", type=half_open_unit, default=None, help="sampling rate for --mechanism subsampled"
    )
    parser.add_argument("--steps", type=positive_int, default=None, help="steps T for --mechanism subsampled")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the threshold splits")


def _run_scores(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds.accountants import PLD_MAX_STEPS
    from dpaudit.bounds.auditor import audit_scores
    from dpaudit.bounds.tradeoff import SubsampledGaussian

    mechanism = None
    if args.mechanism == "subsampled":
        for flag, value in (("--q", args.q), ("--steps", args.steps)):
            if value is None:
                raise CliError(flag, "is required with --mechanism subsampled")
        if args.steps > PLD_MAX_STEPS:
            raise CliError("--steps", f"{args.steps} exceeds the PLD limit of {PLD_MAX_STEPS} steps")
        mechanism = SubsampledGaussian(args.q, args.steps)
    elif args.q is not None or args.steps is not None:
        raise CliError("--mechanism", "--q and --steps need --mechanism subsampled")
    in_scores = load_losses(args.in_path, "--in", args.column, default_column="score")
    out_scores = load_losses(args.out_path, "--out", args.column, default_column="score")
    audit = audit_scores(
        in_scores,
        out_scores,
        delta=args.delta,
        confidence=args.confidence,
        mechanism=mechanism,
        seed=args.seed,
    )
    valid_for = {
        None: "sweep_split, sweep_bonferroni (gdp assumes a full-batch Gaussian mechanism)",
        "gaussian": "sweep_split, sweep_bonferroni, gdp",
        "subsampled": "sweep_split, sweep_bonferroni, subsampled_gaussian (not gdp)",
    }[args.mechanism]
    bounds = {
        name: {
            "epsilon": bound.epsilon,
            "valid": bound.valid,
            "confidence": bound.confidence,
            "assumption": bound.assumption,
            **dict(bound.details),
        }
        for name, bound in audit.lower_bounds.items()
    }
    return {
        "lower_bounds": bounds,
        "applicable_bounds": valid_for,
        "metrics": audit.metrics(),
        "in": args.in_path,
        "out": args.out_path,
    }


COMMANDS: dict[str, Command] = {}


def register(command: Command) -> Command:
    """Add a subcommand (name must be new); returns it so modules can register at import time."""
    if command.name in COMMANDS:
        raise ValueError(f"dpaudit command {command.name!r} is already registered")
    COMMANDS[command.name] = command
    return command


for _command in (
    Command(
        "accountant", "ε upper bound of DP-SGD under an accountant", _configure_accountant, _run_accountant
    ),
    Command("calibrate", "noise multiplier that meets a target (ε, δ)", _configure_calibrate, _run_calibrate),
    Command(
        "identifiability", "ε ↔ ρβ, ρα (Bernau et al.)", _configure_identifiability, _run_identifiability
    ),
    Command(
        "eps-lower", "ε lower bound from FP/FN counts (Clopper–Pearson)", _configure_eps_lower, _run_eps_lower
    ),
    Command(
        "epsilon-star",
        "Epsilon* of one model from member / non-member losses",
        _configure_epsilon_star,
        _run_epsilon_star,
    ),
    Command(
        "scores",
        "ε lower bounds, TPR at fixed FPR, AUROC and advantage from your attack's scores",
        _configure_scores,
        _run_scores,
    ),
):
    register(_command)


# -------------------------------------------------------------------------------------------- driver


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and one subparser per registered command."""
    parser = argparse.ArgumentParser(prog="dpaudit", description="Audit differentially private ML.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    children = {}
    for command in COMMANDS.values():
        child = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.configure(child)
        child.add_argument("--json", action="store_true", help="print one JSON object")
        children[command.name] = child
    return parser, children


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no inf/nan
    return value


def _format_text(result: dict[str, Any], prefix: str = "") -> list[str]:
    lines = []
    for key, value in result.items():
        if isinstance(value, dict):
            lines.extend(_format_text(value, f"{prefix}{key}."))
        elif isinstance(value, float):
            lines.append(f"{prefix}{key}: {value:.6g}")
        else:
            lines.append(f"{prefix}{key}: {value}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpaudit`` console script; returns the exit status."""
    parser, children = build_parser()
    args = parser.parse_args(argv)
    command = COMMANDS[args.command]
    try:
        result = command.run(args)
    except CliError as exc:
        children[args.command].error(str(exc))  # prints usage + message, exits with status 2
    if args.json:
        print(json.dumps(_jsonable(result)))
    else:
        print("\n".join(_format_text(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
