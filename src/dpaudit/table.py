"""The results table: one row per group × quantity, fixed columns, for every experiment.

The bounds stage of every audit turns its score sets (:mod:`dpaudit.scores`) and its accountants
into :class:`ResultRow` s; ``results/<audit>.csv`` is that audit's part of the table. The metrics
JSON, the plot CSVs and the report's summary rows are *selections* from it, so a quantity has one
name across experiments (:data:`QUANTITIES`) and :func:`headline` is the one rule that picks what
an audit claims (in the spirit of TF Privacy's ``AttackResults`` data frame).

Columns (:data:`COLUMNS`): ``group`` (the score set's canonical key, "" for the whole audit),
``quantity``, ``value`` with a two-sided interval ``low``/``high`` where one exists, ``level``
(the confidence the value or interval holds at; for a bound, its own share), ``assumes`` (a tag of
:data:`dpaudit.scores.ASSUMES`), ``estimator``, ``kind`` (:data:`KINDS`) and ``counted`` (the
headline may maximise over this bound: its assumption is guaranteed for the data at hand).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from dpaudit.io import atomic_path
from dpaudit.precision import exact, measured
from dpaudit.scores import ASSUMES, parse_group

COLUMNS = ("group", "quantity", "value", "low", "high", "level", "assumes", "estimator", "kind", "counted")

#: Every quantity the table may hold, with what it means. One spelling per quantity in every
#: experiment's metrics; the FPR of a TPR is part of the name (``0p01`` = 1 %).
QUANTITIES: dict[str, str] = {
    "epsilon_lower": "ε lower bound: exceeds the true ε with probability ≤ 1 − level when `assumes` holds",
    "epsilon_estimate": "ε point estimate (not a bound)",
    "epsilon_upper": "ε upper bound of an accountant (estimator: pld, rdp, naive, advanced)",
    "tpr_at_fpr_0p001": "attack TPR at 0.1 % FPR",
    "tpr_at_fpr_0p01": "attack TPR at 1 % FPR",
    "tpr_at_fpr_0p05": "attack TPR at 5 % FPR",
    "tpr_at_fpr_0p1": "attack TPR at 10 % FPR",
    "auroc": "area under the attack's ROC curve",
    "advantage": "membership advantage max(TPR − FPR)",
    "epsilon_star": "Epsilon* (Negoescu et al.), a point estimate",
    "rho_beta": "posterior belief bound ρβ (Bernau et al.)",
    "rho_alpha": "expected membership advantage ρα (Bernau et al.)",
    "delta_prime": "share of trials whose posterior belief in the true world exceeds ρβ (Bernau et al. δ′)",
    "utility": "the audited model's utility (estimator names the measure)",
}
KINDS = ("bound", "estimate", "rate", "accountant", "utility")
#: What the headline reports when no counted bound exists.
NO_BOUND = "none"


def versioned_row(row: ResultRow) -> ResultRow:
    """``row`` at the precision its statistics support (:mod:`dpaudit.precision`): an accountant's
    ε at exact precision rounded up, a lower bound rounded down, an interval rounded outward."""
    if row.kind == "accountant":
        value = exact(row.value, "up")
    else:
        value = measured(row.value, "down" if row.quantity == "epsilon_lower" else "nearest")
    return replace(row, value=value, low=measured(row.low, "down"), high=measured(row.high, "up"))


def fpr_tag(fpr: float) -> str:
    """``0.01`` → ``0p01``: the FPR part of a ``tpr_at_fpr_*`` name."""
    return f"{fpr:g}".replace(".", "p").replace("-", "m")


@dataclass(frozen=True)
class ResultRow:
    """One quantity of one group (see the module docstring for the columns)."""

    group: str
    quantity: str
    value: float
    estimator: str
    kind: str
    level: float = math.nan
    low: float = math.nan
    high: float = math.nan
    assumes: str = "none"
    counted: bool = False

    def __post_init__(self) -> None:
        if self.quantity not in QUANTITIES:
            raise ValueError(f"unknown quantity {self.quantity!r}; add it to dpaudit.table.QUANTITIES")
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}; one of {KINDS}")
        if self.assumes not in ASSUMES:
            raise ValueError(f"unknown assumption tag {self.assumes!r}; one of {sorted(ASSUMES)}")
        if self.counted and (self.kind != "bound" or self.quantity != "epsilon_lower"):
            raise ValueError("only an ε lower bound can be counted in a headline")
        if math.isnan(float(self.value)):
            raise ValueError(f"{self.group}/{self.quantity}/{self.estimator}: value is NaN")


def headline(rows: Iterable[ResultRow], group: str = "") -> ResultRow:
    """The one headline rule: the largest counted ε lower bound, at the joint level of all counted.

    Each counted bound ``i`` holds at its own ``level_i``; their maximum holds with probability at
    least 1 − Σᵢ (1 − level_i) (union bound), whatever the bounds are and however they were
    computed, so experiments may split their level any way they like. Uncounted bounds (an
    assumption nobody guaranteed) and estimates never enter. With no counted bound the headline is
    0 with estimator :data:`NO_BOUND`. The headline's ``assumes`` is the winner's (the weakest
    assumption that the claim rests on); ``estimator`` names the winner.
    """
    counted = [r for r in rows if r.counted]
    if not counted:
        return ResultRow(group, "epsilon_lower", 0.0, NO_BOUND, "bound", level=math.nan, counted=False)
    joint = round(1.0 - sum(1.0 - r.level for r in counted), 12)  # no float dust in the stated level
    if not joint > 0.0:
        raise ValueError(
            f"headline of {group or 'the audit'}: the counted bounds' levels leave no joint level"
        )
    best = max(counted, key=lambda r: (r.value, -(1.0 - r.level)))
    return replace(best, group=group, level=joint)


class ResultsTable:
    """An audit's rows, with the selections that metrics, plots and summaries are made of."""

    def __init__(self, rows: Iterable[ResultRow] = ()) -> None:
        self.rows: list[ResultRow] = list(rows)

    def add(self, *rows: ResultRow) -> None:
        self.rows.extend(rows)

    def extend(self, rows: Iterable[ResultRow]) -> None:
        self.rows.extend(rows)

    def select(self, quantity: str | None = None, group: str | None = None, **match: Any) -> list[ResultRow]:
        """Rows whose quantity, group and other columns equal the given values."""
        out = []
        for r in self.rows:
            if quantity is not None and r.quantity != quantity:
                continue
            if group is not None and r.group != group:
                continue
            if any(getattr(r, k) != v for k, v in match.items()):
                continue
            out.append(r)
        return out

    def one(self, quantity: str, group: str, **match: Any) -> ResultRow:
        """The single row that matches, with an error naming what is missing or ambiguous."""
        found = self.select(quantity, group, **match)
        if len(found) != 1:
            raise KeyError(
                f"results table: {len(found)} rows for {quantity!r} in group {group!r} {match or ''}"
            )
        return found[0]

    def groups(self) -> list[str]:
        return list(dict.fromkeys(r.group for r in self.rows))

    def groups_where(self, **match: str) -> list[str]:
        """The groups whose parts include every ``name=value`` of ``match`` (:func:`parse_group`)."""
        return [g for g in self.groups() if match.items() <= parse_group(g).items()]

    def headline(self, groups: Sequence[str] | None = None) -> ResultRow:
        """:func:`headline` over the counted bounds of ``groups`` (all groups by default)."""
        chosen = self.rows if groups is None else [r for r in self.rows if r.group in set(groups)]
        return headline(r for r in chosen if r.quantity == "epsilon_lower")

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(r) for r in self.rows], columns=list(COLUMNS))

    def save(self, path: str | Path) -> None:
        """The table as CSV, every number at its versioned precision (:func:`versioned_row`)."""
        frame = pd.DataFrame([asdict(versioned_row(r)) for r in self.rows], columns=list(COLUMNS))
        with atomic_path(path) as tmp:
            frame.to_csv(tmp, index=False)

    @classmethod
    def load(cls, path: str | Path) -> ResultsTable:
        frame = pd.read_csv(path, keep_default_na=False, na_values=[""], float_precision="round_trip")
        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            raise ValueError(f"{path}: not a results table (missing columns {missing})")
        rows = []
        for rec in frame.to_dict("records"):
            rec["group"] = "" if pd.isna(rec["group"]) else str(rec["group"])
            rec["counted"] = bool(rec["counted"])
            rows.append(ResultRow(**{c: rec[c] for c in COLUMNS}))
        return cls(rows)

    def metrics(self) -> dict[str, dict[str, float | str]]:
        """Every row as ``{group: {name: number}}`` with one spelling per quantity.

        A row is named by its quantity, suffixed ``_<estimator>`` when the group holds that
        quantity from several estimators; its interval and level follow as ``<name>_low``,
        ``<name>_high``, ``<name>_level`` and a bound's assumption as ``<name>_assumes``.
        """
        out: dict[str, dict[str, float | str]] = {}
        for group in self.groups():
            rows = [r for r in self.rows if r.group == group]
            per_quantity: dict[str, int] = {}
            for r in rows:
                per_quantity[r.quantity] = per_quantity.get(r.quantity, 0) + 1
            entry: dict[str, float | str] = {}
            for r in rows:
                name = r.quantity if per_quantity[r.quantity] == 1 else f"{r.quantity}_{r.estimator}"
                entry[name] = _finite(r.value)
                for suffix in ("low", "high", "level"):
                    value = getattr(r, suffix)
                    if not math.isnan(value):
                        entry[f"{name}_{suffix}"] = _finite(value)
                if r.kind == "bound":
                    entry[f"{name}_assumes"] = r.assumes
            out[group or "audit"] = entry
        return out


def headline_metrics(best: ResultRow) -> dict[str, float | str]:
    """The headline as the summary's four fixed names: value, level, assumption, estimator."""
    return {
        "epsilon_lower": _finite(best.value),
        "epsilon_lower_level": 0.0 if math.isnan(best.level) else best.level,
        "epsilon_lower_assumes": best.assumes,
        "epsilon_lower_estimator": best.estimator,
    }


def _finite(x: float) -> float:
    x = float(x)
    return max(-1e308, min(1e308, x))
