"""The results contract: what an experiment hands to the report (summary rows, tables, figures).

Each audit's ``bounds`` stage writes ``data/bounds/<audit>/section.json`` (a
:class:`ReportSection`). The report stage renders every section it finds without knowing the
experiment, so new experiments slot in by writing one more section. Figures are declarative:
they name a CSV under ``plots/`` and the columns to draw; the report renders them with
matplotlib and ``dvc.yaml``'s top-level ``plots:`` can point at the same CSV files.

This module is the only thing experiments import to describe their results: it depends on no
part of :mod:`dpaudit.report`, so the report may import experiments' types and never the reverse
(``tests/report/test_layering.py`` checks it). Besides the types it holds the small vocabulary
every experiment's ``report.py`` shares: :func:`short_number` and :func:`interval` for table cells,
:func:`annotate` for what a summary row tried, and :func:`audit_section` for the section itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.io import read_json, write_json

if TYPE_CHECKING:  # types only: the experiment contract imports this module
    from dpaudit.experiments.base import TrainManifest
    from dpaudit.layout import Audit

FigureKind = Literal["line", "scatter", "bar", "histogram", "step"]


@dataclass(frozen=True)
class FigureSpec:
    """A plot of columns of one CSV file.

    ``y`` may name several columns (one series each); ``group`` splits rows into series by a
    column's value; ``facet`` draws one panel per value of a column. ``highlight`` names a
    boolean column whose true rows are drawn as a connected, emphasised series (e.g. a Pareto
    frontier). ``diagonal`` adds the line y = x (e.g. empirical vs. target epsilon).
    ``hlines`` adds labelled horizontal reference lines, e.g. ``{"rho_beta": 0.9}``.
    ``x_limits`` / ``y_limits`` fix an axis' range, e.g. ``(0, 1)`` for rates (None: that end free).
    ``intervals`` names two columns (low, high) drawn as vertical error bars on a scatter's points.
    Column names in legends are spelled for people by the report (``rho_beta`` → ρβ).
    """

    id: str
    title: str
    kind: FigureKind
    data: str
    x: str
    y: list[str]
    x_label: str
    y_label: str
    group: str | None = None
    facet: str | None = None
    x_log: bool = False
    y_log: bool = False
    diagonal: bool = False
    highlight: str | None = None
    hlines: dict[str, float] = field(default_factory=dict)
    caption: str = ""
    x_limits: tuple[float | None, float | None] | None = None
    y_limits: tuple[float | None, float | None] | None = None
    intervals: tuple[str, str] | None = None


@dataclass(frozen=True)
class TableSpec:
    """A table: column headers and rows of cells (numbers or short strings)."""

    id: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    caption: str = ""


@dataclass(frozen=True)
class SummaryRow:
    """One line of the report's summary table for an audit setting.

        ``epsilon_upper`` maps accountant name to ε; ``epsilon_lower`` is a *valid* lower bound on the
        mechanism's ε (never an estimate such as ε′, Epsilon* or the naive sweep), stated at its joint
        confidence, with ``epsilon_lower_estimator`` naming the estimator that gave it and
        ``epsilon_lower_assumes`` what that estimator assumes about the mechanism ("none" for the
        threshold sweeps). ``scores`` holds the interpretable scores of this
        setting under the keys the section declares in :attr:`ReportSection.scores` (e.g. ``rho_beta``,
        ``rho_alpha`` of Bernau et al., ``epsilon_star`` of Negoescu et al.); a score that does not
        apply is ``None``. ``utility`` is the utility of the audited model (never an attack's auxiliary
    model) under ``utility_name``. ``tried`` says in one short phrase what the attack tried (estimators,
    trials), so that a lower bound of 0 reads as "nothing proven by these attempts"; ``confidence`` is
    the lower bound's joint confidence level (e.g. 0.95) where the estimator's text does not state it.
    """

    setting: str
    epsilon_upper: dict[str, float]
    epsilon_lower: float | None
    epsilon_lower_estimator: str | None
    scores: dict[str, float | None] = field(default_factory=dict)
    utility_name: str | None = None
    utility: float | None = None
    epsilon_lower_assumes: str | None = None  # from here on: positional construction stays as it was
    tried: str | None = None
    confidence: float | None = None

    @property
    def epsilon_star(self) -> float | None:
        """Negoescu et al.'s Epsilon* of this setting, when the section reports it."""
        return self.scores.get("epsilon_star")


def _figure_spec(raw: dict[str, Any]) -> FigureSpec:
    """A :class:`FigureSpec` from JSON, its axis limits back to tuples."""
    limits = {k: tuple(raw[k]) for k in ("x_limits", "y_limits") if raw.get(k) is not None}
    return FigureSpec(**{**raw, **limits})


@dataclass(frozen=True)
class ReportSection:
    """Everything one audit (dataset × experiment) contributes to the report.

    ``scores`` declares the headline scores of this experiment, score key → column label, in the
    order the summary shows them; the report's summary row and ``metrics/summary.json`` take exactly
    these from :attr:`headline`. ``timings`` holds the run time of the audit's stages that its
    inputs record (the train manifest's ``seconds``).
    """

    dataset: str
    experiment: str
    title: str
    description: str
    headline: SummaryRow
    rows: list[SummaryRow]
    tables: list[TableSpec]
    figures: list[FigureSpec]
    scores: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def save(self, path: str | Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: str | Path) -> ReportSection:
        raw = read_json(path)
        return cls(
            dataset=raw["dataset"],
            experiment=raw["experiment"],
            title=raw["title"],
            description=raw["description"],
            headline=SummaryRow(**raw["headline"]),
            rows=[SummaryRow(**r) for r in raw["rows"]],
            tables=[TableSpec(**t) for t in raw["tables"]],
            figures=[_figure_spec(f) for f in raw["figures"]],
            scores=dict(raw.get("scores", {})),
            timings={str(k): float(v) for k, v in raw.get("timings", {}).items()},
        )


@dataclass(frozen=True)
class AuditBlocks:
    """Builds one audit's figures and tables, so that a report builder states only what they show.

    Ids are ``<audit>-<key>`` and figure data is ``plots/<audit>/<csv>``; every other argument is
    the :class:`FigureSpec` / :class:`TableSpec` field of the same name.
    """

    audit: str

    def figure(
        self, key: str, title: str, kind: FigureKind, csv: str, x: str, y: Sequence[str], x_label: str,
        y_label: str, **options: Any,
    ) -> FigureSpec:  # fmt: skip
        """A :class:`FigureSpec` of ``plots/<audit>/<csv>``."""
        return FigureSpec(
            id=f"{self.audit}-{key}", title=title, kind=kind, data=f"plots/{self.audit}/{csv}", x=x,
            y=list(y), x_label=x_label, y_label=y_label, **options,
        )  # fmt: skip

    def roc(self, key: str, title: str, csv: str, *, log: bool = False, **options: Any) -> FigureSpec:
        """An ROC curve (columns ``fpr``, ``tpr``) with the chance diagonal, both rates kept in [0, 1]
        (on log axes only the upper end is fixed)."""
        limits = (None, 1.0) if log else (0.0, 1.0)
        return self.figure(
            key, title, "line", csv, "fpr", ["tpr"], "false-positive rate", "true-positive rate",
            x_log=log, y_log=log, diagonal=True, x_limits=limits, y_limits=limits, **options,
        )  # fmt: skip

    def table(
        self, key: str, title: str, columns: Sequence[str], rows: list[list[Any]], caption: str = ""
    ) -> TableSpec:
        """A :class:`TableSpec` with id ``<audit>-<key>``."""
        return TableSpec(
            id=f"{self.audit}-{key}", title=title, columns=list(columns), rows=rows, caption=caption
        )


def percent(level: float) -> str:
    """A rate as a percentage label: 0.01 → "1%"."""
    return f"{100 * level:g}%"


def short_number(value: Any) -> Any:
    """A table number to 3 significant digits: "–" when missing or NaN, "∞" for infinity and for
    the 1e308 that stands for it in metrics files; anything not a number is returned as it is."""
    if value is None:
        return "–"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    value = float(value)
    if math.isnan(value):
        return "–"
    if value >= 1e300:
        return "∞"
    return float(f"{value:.3g}")


def interval(low: Any, high: Any, value: Any = None) -> str:
    """ "[low, high]", or "value [low, high]" when ``value`` is given, each by :func:`short_number`."""
    limits = f"[{short_number(low)}, {short_number(high)}]"
    return limits if value is None else f"{short_number(value)} {limits}"


def annotate(rows: Sequence[SummaryRow], tried: str, confidence: float | None = None) -> list[SummaryRow]:
    """``rows`` with :attr:`SummaryRow.tried` (and the lower bound's joint ``confidence``) filled in.

    Rows without a lower bound are returned unchanged: nothing was tried for a bound there.
    """
    return [
        row if row.epsilon_lower is None else replace(row, tried=tried, confidence=confidence) for row in rows
    ]


def audit_section(
    audit: Audit,
    manifest: TrainManifest,
    *,
    title: str,
    description: str,
    headline: SummaryRow,
    rows: list[SummaryRow],
    tables: list[TableSpec],
    figures: list[FigureSpec],
    scores: dict[str, str],
) -> ReportSection:
    """The :class:`ReportSection` of one audit: its dataset and experiment, and the train stage's time."""
    return ReportSection(
        dataset=audit.dataset,
        experiment=audit.experiment,
        title=title,
        description=description,
        headline=headline,
        rows=rows,
        tables=tables,
        figures=figures,
        scores=dict(scores),
        timings={"train": manifest.seconds},
    )
