"""The ``dpaudit`` command line's building blocks: :class:`Command`, :class:`CliError` and the
argument types that refuse bad input with a message naming the argument."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class CliError(Exception):
    """Bad command-line input; ``argument`` is the option to blame (e.g. ``--members``), or ``None``
    when no option is at fault (the project has nothing to compare yet, say)."""

    def __init__(self, argument: str | None, message: str) -> None:
        super().__init__(f"argument {argument}: {message}" if argument else message)
        self.argument = argument


@dataclass(frozen=True)
class Command:
    """One ``dpaudit`` subcommand."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict[str, Any]]
    text: Callable[[dict[str, Any]], list[str]] | None = None  # default: ``key: value`` lines
    #: The exit status of a result (default 0): a verdict a CI job must act on exits non-zero.
    exit_status: Callable[[dict[str, Any]], int] | None = None


# ----------------------------------------------------------------------------------- argument types


def number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("NaN is not allowed")
    return value


def open_unit(text: str) -> float:
    """A number strictly between 0 and 1 (δ, confidence levels)."""
    value = number(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1)")
    return value


def unit_from_zero(text: str) -> float:
    """A number in [0, 1) (δ where pure DP, δ = 0, is meaningful)."""
    value = number(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside [0, 1)")
    return value


def half_open_unit(text: str) -> float:
    """A number in (0, 1] (sampling rates; 1 = full batch)."""
    value = number(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1]")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number > 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    value = number(text)
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
