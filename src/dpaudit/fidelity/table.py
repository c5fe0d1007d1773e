"""The fidelity table: every paper headline beside dpaudit's number, with a computed verdict.

:func:`fidelity_rows` evaluates :data:`~dpaudit.fidelity.claims.CLAIMS` against the committed
results (one row per claim and dpaudit estimator); the verdict is ``reproduced`` (the claim's
:class:`~dpaudit.fidelity.claims.Rule` holds), ``qualitatively`` (only its weaker statement holds),
``differs`` or ``missing`` (no committed result, or no number in the paper). Rows are written as
CSV (``results/fidelity.csv``), as a Markdown page (``docs/fidelity.md``) with the profiles'
findings, and as a report section.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from dpaudit.fidelity.claims import CLAIMS, Claim
from dpaudit.fidelity.evidence import Evidence, Observed
from dpaudit.fidelity.profiles import PROFILE_MODULES
from dpaudit.io import atomic_path
from dpaudit.references import PAPER_RESULTS, REFERENCES, PaperResult

__all__ = [
    "FIDELITY_CSV",
    "FIDELITY_PAGE",
    "MARKDOWN_COLUMNS",
    "VERDICTS",
    "counts_text",
    "markdown_cells",
    "FidelityRow",
    "build_fidelity",
    "fidelity_markdown",
    "fidelity_rows",
    "read_fidelity_csv",
    "write_fidelity_csv",
]

#: Where the fidelity stage writes the table and the page (relative to the repository root).
FIDELITY_CSV = Path("results/fidelity.csv")
FIDELITY_PAGE = Path("docs/fidelity.md")

VERDICTS: tuple[str, ...] = ("reproduced", "qualitatively", "differs", "missing")


@dataclass(frozen=True)
class FidelityRow:
    """One line of the table: a paper's number, dpaudit's, the estimator of each and the verdict."""

    result: str
    paper: str
    where: str
    claim: str
    quantity: str
    paper_value: float | None
    paper_estimator: str
    paper_setting: str
    dpaudit_value: float | None
    dpaudit_low: float | None
    dpaudit_high: float | None
    dpaudit_estimator: str
    same_estimator: str
    dpaudit_setting: str
    tolerance: str
    qualitative: str
    verdict: str
    source: str


def _verdict(claim: Claim, paper: float | None, observed: Observed | None) -> str:
    if paper is None or observed is None:
        return "missing"
    if claim.rule.holds(paper, observed):
        return "reproduced"
    if claim.holds_qualitatively is not None and claim.holds_qualitatively(observed):
        return "qualitatively"
    return "differs"


def _row(result: PaperResult, claim: Claim, observed: Observed | None, paper: float | None) -> FidelityRow:
    reference = REFERENCES[result.paper]
    return FidelityRow(
        result=result.key,
        paper=f"{reference.authors.split(',')[0].split()[-1]} {reference.year}",
        where=result.where,
        claim=result.claim,
        quantity=claim.quantity,
        paper_value=paper,
        paper_estimator=result.estimator,
        paper_setting=result.setting,
        dpaudit_value=None if observed is None else observed.value,
        dpaudit_low=None if observed is None else observed.low,
        dpaudit_high=None if observed is None else observed.high,
        dpaudit_estimator="" if observed is None else observed.estimator,
        same_estimator="" if observed is None else ("yes" if observed.same_estimator else "no"),
        dpaudit_setting="" if observed is None else observed.setting,
        tolerance=claim.rule.text(),
        qualitative=claim.qualitative,
        verdict=_verdict(claim, paper, observed),
        source="" if observed is None else observed.source,
    )


def fidelity_rows(evidence: Evidence) -> list[FidelityRow]:
    """One row per claim and dpaudit source, in the order of :data:`PAPER_RESULTS`."""
    claims = {c.result: c for c in CLAIMS}
    missing = [r.key for r in PAPER_RESULTS if r.key not in claims]
    if missing:
        raise KeyError(f"paper results without a fidelity claim: {', '.join(missing)}")
    rows = []
    for result in PAPER_RESULTS:
        claim = claims[result.key]
        paper = None if result.value is None else result.value / claim.paper_scale
        observed = [source(evidence) for source in claim.sources] or [None]
        present = [o for o in observed if o is not None]
        for item in present or [None]:
            rows.append(_row(result, claim, item, paper))
    return rows


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def write_fidelity_csv(rows: Sequence[FidelityRow], path: str | Path) -> None:
    """``results/fidelity.csv``: one line per row, numbers at three significant digits."""
    names = [f.name for f in fields(FidelityRow)]
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            record = asdict(row)
            for key in ("paper_value", "dpaudit_value", "dpaudit_low", "dpaudit_high"):
                record[key] = _number(record[key])
            writer.writerow(record)


def read_fidelity_csv(path: str | Path) -> list[FidelityRow]:
    """Rows back from ``results/fidelity.csv`` (what the report renders), naming the file when it is bad."""
    path = Path(path)
    numeric = {"paper_value", "dpaudit_value", "dpaudit_low", "dpaudit_high"}
    with open(path, newline="") as handle:
        records = list(csv.DictReader(handle))
    try:
        return [
            FidelityRow(**{k: (float(v) if v else None) if k in numeric else v for k, v in r.items()})
            for r in records
        ]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a fidelity table ({exc})") from exc


def _dpaudit_cell(row: FidelityRow) -> str:
    if row.dpaudit_value is None:
        return "—"
    text = _number(row.dpaudit_value)
    if row.dpaudit_low is not None and row.dpaudit_high is not None:
        text += f" [{_number(row.dpaudit_low)}, {_number(row.dpaudit_high)}]"
    return text


def _scaled_paper(row: FidelityRow) -> str:
    return "—" if row.paper_value is None else _number(row.paper_value)


def counts_text(rows: Sequence[FidelityRow]) -> str:
    best: dict[str, int] = {}
    for row in rows:
        rank = VERDICTS.index(row.verdict)
        best[row.result] = min(best.get(row.result, len(VERDICTS)), rank)
    tally = {v: sum(1 for r in best.values() if VERDICTS[r] == v) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in tally.items())


MARKDOWN_COLUMNS = (
    "paper", "result", "quantity", "paper's", "paper's estimator", "dpaudit", "dpaudit's estimator",
    "same estimator", "tolerance", "verdict",
)  # fmt: skip


def markdown_cells(row: FidelityRow) -> list[str]:
    return [
        f"{row.paper} {row.where}", row.claim, row.quantity, _scaled_paper(row), row.paper_estimator,
        _dpaudit_cell(row), row.dpaudit_estimator, row.same_estimator or "—", row.tolerance, row.verdict,
    ]  # fmt: skip


def fidelity_markdown(rows: Sequence[FidelityRow], evidence: Evidence) -> str:
    """The ``docs/fidelity.md`` page: how to read it, the table, the profiles and their findings."""
    escape = str.maketrans({"|": "\\|"})
    lines = [
        "# Fidelity to the papers",
        "",
        "<!-- Generated by `dvc repro fidelity` (stages/fidelity.py): do not edit by hand. -->",
        "",
        "Each paper's headline result beside dpaudit's number, the estimator of each, and a verdict "
        "computed from the committed results: **reproduced** (within the tolerance written beside it, "
        "or the paper's number inside dpaudit's interval), **qualitatively** (only the weaker statement "
        "in the last column holds), **differs**, or **missing** (no committed result, or no number in "
        "the paper). ε lower bounds are compared as ε_LB / ε where the paper's ε and dpaudit's differ. "
        f"Claims: {counts_text(rows)} (the best row of each claim).",
        "",
        "| " + " | ".join(MARKDOWN_COLUMNS) + " | qualitative statement |",
        "|" + " --- |" * (len(MARKDOWN_COLUMNS) + 1),
    ]
    for row in rows:
        cells = [*markdown_cells(row), row.qualitative or "—"]
        lines.append("| " + " | ".join(c.translate(escape) for c in cells) + " |")
    lines += ["", "## Reproduction profiles", ""]
    lines.append(
        "Each profile runs one paper's protocol in its own regime, or the closest setting two CPU cores "
        "allow, and writes `reproductions/<profile>.json`. Rerun one with "
        "`python -m dpaudit.fidelity run <profile>`, then `dvc repro fidelity`."
    )
    for name in sorted(PROFILE_MODULES):
        result = evidence.profile(name)
        lines += ["", f"### {name}", ""]
        if result is None:
            lines.append("Not run: no committed result.")
            continue
        lines.append(f"- Setting: {result.setting}")
        lines.append(f"- Differs from the paper: {result.differs}")
        lines.append(f"- Command: `{result.command}`")
        lines.extend(f"- Finding: {finding}" for finding in result.findings)
    sources = sorted({r.source for r in rows if r.source})
    lines += ["", "## Where each number comes from", ""]
    lines.extend(f"- `{source}`" for source in sources)
    return "\n".join(lines) + "\n"


def build_fidelity(root: str | Path, csv_path: str | Path, markdown_path: str | Path) -> list[FidelityRow]:
    """Evaluate every claim against the results under ``root`` (audits read from ``data/bounds``, the
    stage's declared input) and write the CSV and the page."""
    evidence = Evidence(root, from_bounds=True)
    rows = fidelity_rows(evidence)
    write_fidelity_csv(rows, csv_path)
    with atomic_path(markdown_path) as tmp:
        Path(tmp).write_text(fidelity_markdown(rows, evidence))
    return rows
