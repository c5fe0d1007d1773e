"""The fidelity table: every paper headline beside dpaudit's number, with a computed verdict.

:func:`fidelity_rows` evaluates :data:`~dpaudit.fidelity.claims.CLAIMS` against the committed
results, one row per claim and dpaudit reader, by the rules of :mod:`dpaudit.fidelity.claims`
(:func:`judge`): ``reproduced`` (the claim's :class:`~dpaudit.fidelity.claims.Rule` holds),
``qualitatively`` (only the paper's weaker statement holds), ``not reached`` (below the paper's
number at dpaudit's trial count, which the paper's estimator would reach at the count the row
states), ``differs``, ``missing`` (no committed result, or no number in the paper) and, for rows
with another estimator, ``beyond the paper``. Each claim's verdict is that of its one ``decides``
row (the paper's estimator, :func:`counts_text`). Rows are written as CSV (``results/fidelity.csv``),
as a Markdown page (``docs/fidelity.md``) with the rules and the profiles' findings, and as a report
section.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from dpaudit.fidelity.claims import CLAIMS, Claim
from dpaudit.fidelity.evidence import Evidence, Observed
from dpaudit.fidelity.papers import FIDELITY_RESULTS
from dpaudit.fidelity.profiles import PROFILE_MODULES
from dpaudit.io import atomic_path
from dpaudit.references import REFERENCES, PaperResult

__all__ = [
    "FIDELITY_CSV",
    "FIDELITY_PAGE",
    "MARKDOWN_COLUMNS",
    "VERDICTS",
    "claim_verdicts",
    "counts_text",
    "markdown_cells",
    "FidelityRow",
    "build_fidelity",
    "fidelity_markdown",
    "fidelity_rows",
    "judge",
    "read_fidelity_csv",
    "write_fidelity_csv",
]

#: Where the fidelity stage writes the table and the page (relative to the repository root).
FIDELITY_CSV = Path("results/fidelity.csv")
FIDELITY_PAGE = Path("docs/fidelity.md")

#: The verdicts a claim can get (from its deciding row), then the one of rows with another estimator.
VERDICTS: tuple[str, ...] = (
    "reproduced",
    "qualitatively",
    "not reached",
    "differs",
    "missing",
    "beyond the paper",
)
#: How a row enters its claim: ``decides`` (the claim's verdict), ``also`` (the paper's estimator in
#: another setting: its own verdict, never counted), ``beyond`` (another estimator).
ROW_ROLES: tuple[str, ...] = ("decides", "also", "beyond")


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
    interval: str
    dpaudit_estimator: str
    same_estimator: str
    dpaudit_setting: str
    role: str
    tolerance: str
    why: str
    floor: float | None
    qualitative: str
    qualitative_where: str
    verdict: str
    trials: float | None
    needed: float | None
    source: str


def judge(claim: Claim, paper: float | None, observed: Observed | None) -> str:
    """One row's verdict by the rules of :mod:`dpaudit.fidelity.claims` (its role aside: a row with
    another estimator is "beyond the paper" whatever its number)."""
    if observed is None:
        return "missing"
    if observed.role == "beyond":
        return "beyond the paper"
    if paper is None and claim.rule.kind != "statement":
        return "missing"
    at_floor = claim.floor is not None and observed.value <= claim.floor
    if not at_floor and claim.rule.holds(paper, observed):
        return "reproduced"
    needed = observed.needed
    if needed is not None and math.isfinite(needed) and (observed.trials is None or needed > observed.trials):
        return "not reached"
    if not at_floor and claim.holds_qualitatively is not None and claim.holds_qualitatively(observed):
        return "qualitatively"
    return "differs"


def _row(
    result: PaperResult, claim: Claim, observed: Observed | None, paper: float | None, role: str
) -> FidelityRow:
    reference = REFERENCES[result.paper]
    missing = observed is None
    return FidelityRow(
        result=result.key,
        paper=f"{reference.authors.split(',')[0].split()[-1]} {reference.year}",
        where=result.where,
        claim=result.claim,
        quantity=claim.quantity,
        paper_value=paper,
        paper_estimator=result.estimator,
        paper_setting=result.setting,
        dpaudit_value=None if missing else observed.value,  # type: ignore[union-attr]
        dpaudit_low=None if missing else observed.low,  # type: ignore[union-attr]
        dpaudit_high=None if missing else observed.high,  # type: ignore[union-attr]
        interval="" if missing else observed.interval,  # type: ignore[union-attr]
        dpaudit_estimator=(f"needs {claim.needs}" if claim.needs else "") if missing
        else observed.estimator,  # type: ignore[union-attr]
        same_estimator="" if missing else ("yes" if observed.same_estimator else "no"),  # type: ignore[union-attr]
        dpaudit_setting="" if missing else observed.setting,  # type: ignore[union-attr]
        role=role,
        tolerance=claim.rule.text(),
        why=claim.rule.why,
        floor=claim.floor,
        qualitative=claim.qualitative,
        qualitative_where=claim.qualitative_where,
        verdict=judge(claim, paper, observed),
        trials=None if missing or observed.trials is None else float(observed.trials),  # type: ignore[union-attr]
        needed=None if missing else observed.needed,  # type: ignore[union-attr]
        source="" if missing else observed.source,  # type: ignore[union-attr]
    )  # fmt: skip


def fidelity_rows(evidence: Evidence) -> list[FidelityRow]:
    """One row per claim and dpaudit reader present, in the order of :data:`FIDELITY_RESULTS`; each
    claim has exactly one ``decides`` row (a ``missing`` one when no reader with the paper's estimator
    has a committed result)."""
    claims = {c.result: c for c in CLAIMS}
    missing = [r.key for r in FIDELITY_RESULTS if r.key not in claims]
    if missing:
        raise KeyError(f"paper results without a fidelity claim: {', '.join(missing)}")
    rows = []
    for result in FIDELITY_RESULTS:
        claim = claims[result.key]
        paper = None if result.value is None else result.value / claim.paper_scale
        present = [o for o in (source(evidence) for source in claim.sources) if o is not None]
        deciding = next((o for o in present if o.role == "paper"), None)
        if deciding is None:
            rows.append(_row(result, claim, None, paper, "decides"))
        for item in present:
            role = "decides" if item is deciding else ("beyond" if item.role == "beyond" else "also")
            rows.append(_row(result, claim, item, paper, role))
    return rows


_NUMERIC = ("paper_value", "dpaudit_value", "dpaudit_low", "dpaudit_high", "floor", "trials", "needed")


def _number(value: float | None) -> str:
    if value is None:
        return ""
    return "inf" if math.isinf(value) else f"{value:.3g}"


def write_fidelity_csv(rows: Sequence[FidelityRow], path: str | Path) -> None:
    """``results/fidelity.csv``: one line per row, numbers at three significant digits."""
    names = [f.name for f in fields(FidelityRow)]
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=names, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            record = asdict(row)
            for key in _NUMERIC:
                record[key] = _number(record[key])
            writer.writerow(record)


def read_fidelity_csv(path: str | Path) -> list[FidelityRow]:
    """Rows back from ``results/fidelity.csv`` (what the report renders), naming the file when it is bad."""
    path = Path(path)
    with open(path, newline="") as handle:
        records = list(csv.DictReader(handle))
    try:
        return [
            FidelityRow(**{k: (float(v) if v else None) if k in _NUMERIC else v for k, v in r.items()})
            for r in records
        ]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a fidelity table ({exc})") from exc


def _dpaudit_cell(row: FidelityRow) -> str:
    if row.dpaudit_value is None:
        return "—"
    text = _number(row.dpaudit_value)
    if row.dpaudit_low is not None and row.dpaudit_high is not None:
        text += f" [{_number(row.dpaudit_low)}, {_number(row.dpaudit_high)}] ({row.interval})"
    return text


def _scaled_paper(row: FidelityRow) -> str:
    return "—" if row.paper_value is None else _number(row.paper_value)


def _verdict_cell(row: FidelityRow) -> str:
    if row.verdict == "not reached" and row.needed is not None:
        at = "" if row.trials is None else f" at {row.trials:.0f} trials per world"
        return f"not reached{at} (needs ≈ {row.needed:.0f})"
    if row.verdict == "differs" and row.needed is not None and math.isinf(row.needed):
        return "differs (out of reach at any trial count: the held-out Eq. 4 value is below the paper's)"
    return row.verdict


def claim_verdicts(rows: Sequence[FidelityRow]) -> dict[str, str]:
    """Each claim's verdict: that of its one ``decides`` row."""
    verdicts: dict[str, str] = {}
    for row in rows:
        if row.role == "decides":
            if row.result in verdicts:
                raise ValueError(f"claim {row.result} has two deciding rows")
            verdicts[row.result] = row.verdict
    return verdicts


def counts_text(rows: Sequence[FidelityRow]) -> str:
    """The headline: claims by their deciding row's verdict (the paper's own estimator), then how many
    rows are beyond the paper."""
    verdicts = claim_verdicts(rows)
    tally = ", ".join(f"{sum(1 for v in verdicts.values() if v == name)} {name}" for name in VERDICTS[:-1])
    beyond = sum(1 for r in rows if r.verdict == "beyond the paper")
    return f"{len(verdicts)} claims by the paper's own estimator: {tally}; {beyond} rows beyond the paper"


MARKDOWN_COLUMNS = (
    "paper", "result", "quantity", "paper's", "paper's estimator", "dpaudit", "dpaudit's estimator",
    "dpaudit's setting", "row", "tolerance", "verdict",
)  # fmt: skip


def markdown_cells(row: FidelityRow) -> list[str]:
    return [
        f"{row.paper} {row.where}", row.claim, row.quantity, _scaled_paper(row), row.paper_estimator,
        _dpaudit_cell(row), row.dpaudit_estimator or "—", row.dpaudit_setting or "—", row.role, row.tolerance,
        _verdict_cell(row),
    ]  # fmt: skip


_RULES_TEXT = (
    "How to read it. Each claim's verdict comes from its one **decides** row: the paper's own estimator "
    "in the paper's setting, or the closest setting the machine allows (stated in dpaudit's setting "
    "column). Rows marked **also** apply the paper's estimator in another setting and get "
    "a verdict of their own that counts for nothing; rows marked **beyond** use another estimator or a "
    "modified protocol and are shown as *beyond the paper*, never judged against the paper's number. "
    "Verdicts: **reproduced** (the rule in the tolerance column holds; a paper number inside dpaudit's "
    "interval counts only when that interval is a confidence interval), **qualitatively** (only a weaker "
    "statement the paper itself makes holds; it is listed with its place below), **not reached** (below "
    "the paper's number at dpaudit's trial count, where the paper's estimator would reach it at the count "
    "given), **differs**, **missing** (no committed result, or no number in the paper). A lower bound, "
    "rate or advantage the paper reports above a floor (0, or chance for a TPR) is never reproduced or "
    "qualitatively at or below that floor. ε lower bounds are compared as ε_LB / ε where the paper's ε "
    "and dpaudit's differ. Intervals are labelled: 95 % CI, ±1 s.e., min–max over seeds."
)


def fidelity_markdown(rows: Sequence[FidelityRow], evidence: Evidence) -> str:
    """The ``docs/fidelity.md`` page: how to read it, the table, the rules, the profiles, their findings."""
    escape = str.maketrans({"|": "\\|"})
    lines = [
        "# Fidelity to the papers",
        "",
        "<!-- Generated by `dvc repro fidelity` (stages/fidelity.py): do not edit by hand. -->",
        "",
        f"**{counts_text(rows)}.**",
        "",
        _RULES_TEXT,
        "",
        "| " + " | ".join(MARKDOWN_COLUMNS) + " |",
        "|" + " --- |" * len(MARKDOWN_COLUMNS),
    ]
    for row in rows:
        lines.append("| " + " | ".join(c.translate(escape) for c in markdown_cells(row)) + " |")
    lines += ["", "## The rules and why they are that wide", ""]
    lines.append("| result | tolerance | why that wide | floor | the paper's weaker statement (place) |")
    lines.append("| --- | --- | --- | --- | --- |")
    seen: set[str] = set()
    for row in rows:
        if row.result in seen:
            continue
        seen.add(row.result)
        statement = f"{row.qualitative} ({row.qualitative_where})" if row.qualitative else "—"
        floor = "—" if row.floor is None else _number(row.floor)
        cells = [row.result, row.tolerance, row.why, floor, statement]
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


def build_fidelity(
    root: str | Path, csv_path: str | Path, markdown_path: str | Path, *, from_bounds: bool = True
) -> list[FidelityRow]:
    """Evaluate every claim against the results under ``root`` (audits read from ``data/bounds``, the
    stage's declared input, or with ``from_bounds`` False from their git copies under ``results/``)
    and write the CSV and the page."""
    evidence = Evidence(root, from_bounds=from_bounds)
    rows = fidelity_rows(evidence)
    write_fidelity_csv(rows, csv_path)
    with atomic_path(markdown_path) as tmp:
        Path(tmp).write_text(fidelity_markdown(rows, evidence))
    return rows
