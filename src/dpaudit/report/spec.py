"""What an experiment hands to the report: a section of summary rows, tables and figures.

Each audit's ``bounds`` stage writes ``data/bounds/<audit>/section.json`` (a
:class:`ReportSection`). The report stage renders every section it finds without knowing the
experiment, so new experiments slot in by writing one more section. Figures are declarative:
they name a CSV under ``plots/`` and the columns to draw; the report renders them with
matplotlib and ``dvc.yaml``'s top-level ``plots:`` can point at the same CSV files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dpaudit.io import read_json, write_json

FigureKind = Literal["line", "scatter", "bar", "histogram", "step"]


@dataclass(frozen=True)
class FigureSpec:
    """A plot of columns of one CSV file.

    ``y`` may name several columns (one series each); ``group`` splits rows into series by a
    column's value; ``facet`` draws one panel per value of a column. ``highlight`` names a
    boolean column whose true rows are drawn as a connected, emphasised series (e.g. a Pareto
    frontier). ``diagonal`` adds the line y = x (e.g. empirical vs. target epsilon).
    ``hlines`` adds labelled horizontal reference lines, e.g. ``{"rho_beta": 0.9}``.
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
    apply is ``None``. ``utility`` is the model's utility under ``utility_name``.
    """

    setting: str
    epsilon_upper: dict[str, float]
    epsilon_lower: float | None
    epsilon_lower_estimator: str | None
    scores: dict[str, float | None] = field(default_factory=dict)
    utility_name: str | None = None
    utility: float | None = None
    epsilon_lower_assumes: str | None = None  # last: positional construction stays as it was

    @property
    def epsilon_star(self) -> float | None:
        """Negoescu et al.'s Epsilon* of this setting, when the section reports it."""
        return self.scores.get("epsilon_star")


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
            figures=[FigureSpec(**f) for f in raw["figures"]],
            scores=dict(raw.get("scores", {})),
            timings={str(k): float(v) for k, v in raw.get("timings", {}).items()},
        )
