"""``dpaudit`` command line: the bounds library without the pipeline.

Every subcommand is a :class:`Command` (name, help, argument set-up, run function returning a flat
or nested dict of results) listed in :data:`COMMANDS`; new subcommands are added there (or through
:func:`register`) and nothing else changes. ``--json`` prints the result as one JSON object,
otherwise ``key: value`` lines. Bad input exits with status 2 and a message naming the argument.
Heavy libraries (dp_accounting, pandas) are imported inside the commands that need them, so
``import dpaudit.cli`` stays fast; TensorFlow is never imported here. The commands live in
:mod:`.accounting`, :mod:`.scores`, :mod:`.one_run` and :mod:`.compare`, their building blocks in
:mod:`.args`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import Any

from dpaudit.cli.accounting import (
    _configure_accountant,
    _configure_calibrate,
    _configure_eps_lower,
    _configure_identifiability,
    _run_accountant,
    _run_calibrate,
    _run_eps_lower,
    _run_identifiability,
)
from dpaudit.cli.args import CliError, Command
from dpaudit.cli.compare import COMPARE
from dpaudit.cli.one_run import _configure_one_run, _one_run_text, _run_one_run, one_run_exit_status
from dpaudit.cli.scores import (
    _configure_epsilon_star,
    _configure_scores,
    _epsilon_star_text,
    _run_epsilon_star,
    _run_scores,
    _scores_text,
    load_losses,
)

__all__ = ["COMMANDS", "CliError", "Command", "build_parser", "load_losses", "main", "register"]

COMMANDS: dict[str, Command] = {}
#: Old spellings still accepted, never listed in ``--help``: alias -> command name.
HIDDEN_ALIASES = {"one-run": "one-run-bound"}


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
        _epsilon_star_text,
    ),
    Command(
        "scores",
        "ε lower bounds, TPR at fixed FPR, AUROC and advantage from your attack's scores",
        _configure_scores,
        _run_scores,
        _scores_text,
    ),
    Command(
        "one-run-bound",
        "the one-run ε lower bounds from one training run's canary scores (Steinke et al.; Mahloujifar et "
        "al.); to audit your own training, see docs/training-audit.md",
        _configure_one_run,
        _run_one_run,
        _one_run_text,
        exit_status=one_run_exit_status,
    ),
    COMPARE,
):
    register(_command)


# -------------------------------------------------------------------------------------------- driver


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser and one subparser per registered command."""
    from dpaudit import __version__

    parser = argparse.ArgumentParser(
        prog="dpaudit",
        description="Audit differentially private ML: ε upper bounds from the accountants, ε lower bounds "
        "that attacks prove, and the verdict on your own DP-SGD training.",
        epilog="The whole pipeline: `make run` (dvc repro), then reports/index.html. Docs: docs/ in the "
        "repository (start with README.md; your own training: docs/training-audit.md). Python API: "
        "`import dpaudit` (e.g. dpaudit.training_audit.TrainingAuditor, dpaudit.bounds).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpaudit {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    children = {}
    for command in COMMANDS.values():
        child = subparsers.add_parser(command.name, help=command.help, description=command.help)
        command.configure(child)
        child.add_argument("--json", action="store_true", help="print one JSON object")
        children[command.name] = child
    for alias, name in HIDDEN_ALIASES.items():  # no help= : argparse then leaves it out of the listing
        child = subparsers.add_parser(alias, description=COMMANDS[name].help)
        COMMANDS[name].configure(child)
        child.add_argument("--json", action="store_true", help="print one JSON object")
        children[alias] = child
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
    command = COMMANDS[HIDDEN_ALIASES.get(args.command, args.command)]
    try:
        result = command.run(args)
    except CliError as exc:
        if exc.argument is None:  # nothing the user typed is wrong: no usage line
            print(f"{children[args.command].prog}: error: {exc}", file=sys.stderr)
            sys.exit(2)
        children[args.command].error(str(exc))  # prints usage + message, exits with status 2
    text = (
        json.dumps(_jsonable(result))
        if args.json
        else "\n".join(command.text(result) if command.text else _format_text(result))
    )
    try:
        print(text, flush=True)
    except BrokenPipeError:  # the reader stopped early (`dpaudit compare | head`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit flush cannot fail
    return command.exit_status(result) if command.exit_status else 0


if __name__ == "__main__":
    sys.exit(main())
