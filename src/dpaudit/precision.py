"""Versioned numbers at the precision their statistics support, rounded outward for bounds.

A rerun on another CPU sums in another order (TensorFlow runs oneDNN kernels on AVX-512 CPUs and
Eigen's elsewhere), so a deterministic number such as an accountant's ε moves in its last float
digits, and a number computed from trained models by far less than its own sampling error. Writing
every float digit would make ``dvc metrics diff`` and ``git diff`` report that noise as change.

So versioned outputs keep :data:`STATISTIC_DIGITS` significant digits of anything measured (attack
rates, ε lower bounds, estimates, utilities: every audit here has intervals wider than 0.1 % of
their value, so the third digit is already inside the noise) and :data:`EXACT_DIGITS` of anything
computed exactly (accountants' ε). A bound is rounded *outward* (a lower bound or a lower interval
limit down, an upper bound or an upper limit up), so a written bound is still a bound. Written by
hand: no library rounds to significant digits in a direction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any, Literal

#: Significant digits of a measured number (rates, ε lower bounds, estimates, utilities).
STATISTIC_DIGITS = 3
#: Significant digits of an exactly computed number (an accountant's ε upper bound).
EXACT_DIGITS = 6

Direction = Literal["nearest", "down", "up"]
_MODES = {"nearest": ROUND_HALF_EVEN, "down": ROUND_FLOOR, "up": ROUND_CEILING}


def significant(value: float, digits: int, direction: Direction = "nearest") -> float:
    """``value`` to ``digits`` significant digits, towards ``direction``; ±inf and NaN unchanged.

    Decimal arithmetic, so 0.7 stays 0.7 and a value already on the grid never moves."""
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits!r}")
    if direction not in _MODES:
        raise ValueError(f"direction must be one of {sorted(_MODES)}, got {direction!r}")
    value = float(value)
    if value == 0.0 or not math.isfinite(value):
        return value
    exact = Decimal(repr(value))
    step = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return float(exact.quantize(step, rounding=_MODES[direction]))


def measured(value: float, direction: Direction = "nearest") -> float:
    """A measured number at :data:`STATISTIC_DIGITS` (``down`` for a lower bound or limit)."""
    return significant(value, STATISTIC_DIGITS, direction)


def exact(value: float, direction: Direction = "nearest") -> float:
    """An exactly computed number at :data:`EXACT_DIGITS` (``up`` for an upper bound)."""
    return significant(value, EXACT_DIGITS, direction)


def lower_key(key: str) -> bool:
    """Whether a metrics key names a lower bound or a lower limit (rounded down)."""
    return key.startswith("epsilon_lower") or key in ("low", "lower") or key.endswith("_low")


def upper_key(key: str) -> bool:
    """Whether a metrics key names an upper bound or an upper limit (rounded up)."""
    return key.startswith("epsilon_upper") or key in ("high", "upper") or key.endswith(("_high", "_upper"))


def versioned(data: Any, *, key: str = "", exact_keys: tuple[str, ...] = ("epsilon_upper",)) -> Any:
    """A JSON-like tree with every float at its versioned precision, bounds rounded outward.

    A float under a key starting with one of ``exact_keys`` (at any depth: the accountants) keeps
    :data:`EXACT_DIGITS` and is rounded up; a float under a lower key (:func:`lower_key`) is rounded
    down, under an upper key up, any other to nearest, at :data:`STATISTIC_DIGITS`. Levels
    (``*_level``) stay exact."""
    if isinstance(data, Mapping):
        return {k: versioned(v, key=_inherit(key, str(k), exact_keys), exact_keys=exact_keys)
                for k, v in data.items()}  # fmt: skip
    if isinstance(data, list | tuple):
        return [versioned(v, key=key, exact_keys=exact_keys) for v in data]
    if isinstance(data, bool) or not isinstance(data, float):
        return data
    if key.endswith("level") or key == "confidence":
        return data
    if key.startswith("@exact"):
        return exact(data, "up")
    if lower_key(key):
        return measured(data, "down")
    if upper_key(key):
        return measured(data, "up")
    return measured(data)


def _inherit(parent: str, child: str, exact_keys: tuple[str, ...]) -> str:
    """The key a nested value is rounded by: an exact subtree marks itself, else the child's own."""
    if parent.startswith("@exact") or child.startswith(exact_keys):
        return "@exact"
    if lower_key(parent) and not (lower_key(child) or upper_key(child)):
        return parent
    return child
