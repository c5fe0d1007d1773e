"""The report's summary: one headline per audit, in cells short enough to fit the page.

Every row answers the same four questions, in human words:

- **ε proven**: the valid lower bound an attack proved, with a short tag of its joint confidence
  and what it assumes ("95 % · no assumption"); the estimator's full description is the tag's
  tooltip. A bound of 0 says in one phrase what was tried (:attr:`SummaryRow.tried`).
- **ε promised**: the tightest accountant's upper bound, tagged with the accountant; every
  accountant's value is the tooltip.
- **proven / promised**: their ratio (how much of the promise an attack could confirm).
- **utility (audited model)**: the utility of the model under audit, never an attack's model.

The scores a section declares (:attr:`ReportSection.scores`, e.g. ρβ, Epsilon*, attack TPRs) follow
in one column, a short line each. A rate observed as 0 is shown with its interval
("0 [0, 0.0014]") from the score ``<key>_upper``, never as a ratio to a floor.
:func:`summary_metrics` writes the same headline numbers, numbers only, to ``metrics/summary.json``.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dpaudit.bounds.accountants import ACCOUNTANTS
from dpaudit.precision import Direction, measured, versioned
from dpaudit.report.html import Markup, anchor, format_value, html_table, tag
from dpaudit.report.inputs import LoadedSection
from dpaudit.results import ReportSection, SummaryRow
from dpaudit.scores import ASSUMES

#: Column names of the headline cells (:func:`headline_cells`), in order.
HEADLINE_COLUMNS = ("ε proven", "ε promised", "proven / promised", "utility (audited model)")
SCORES_COLUMN = "other headline scores"
#: Share of the page width per summary column (audit, the four headline cells, the scores).
SUMMARY_WIDTHS = (21, 17, 11, 10, 13, 28)
#: Short display of each assumption tag of :data:`dpaudit.scores.ASSUMES`.
ASSUMPTION_SHORT = {
    "none": "no assumption",
    "gaussian": "Gaussian",
    "subsampled-gaussian": "this run's noise",
    "one-run": "random inclusion",
}
#: Short tags for what an estimator assumes, by a phrase of its long description (first match wins).
ASSUMPTION_TAGS = (
    ("gaussian", "Gaussian"),
    ("probability 1/2", "random inclusion"),
    ("included independently", "random inclusion"),
    ("inclusion", "random inclusion"),
)
#: Suffix of a score that holds the upper limit of the score it extends where that was observed as 0.
UPPER_SUFFIX = "_upper"
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_CONFIDENCE = re.compile(r"confidence\s+(0\.\d+)")


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def summary_metrics(sections: Sequence[LoadedSection]) -> dict[str, dict[str, Any]]:
    """Headline numbers per audit (None and non-finite values are left out).

    Per audit: the accountants' ε, the best valid ε lower bound with its joint level
    (``epsilon_lower_level``) and assumption tag (``epsilon_lower_assumes``, a key of
    :data:`dpaudit.scores.ASSUMES`: the one string leaf), the scores the section declares
    (:attr:`ReportSection.scores`, e.g. ρβ and ρα, or Epsilon*), the utility and what it measures
    (``utility_measure``, a string: one key for every audit, so runs compare in one column). Every
    number at its versioned precision (:func:`dpaudit.precision.versioned`: bounds rounded outward).
    """
    out: dict[str, dict[str, Any]] = {}
    for loaded in sections:
        row = loaded.section.headline
        entry: dict[str, Any] = {}
        upper = {name: v for name, value in row.epsilon_upper.items() if (v := _finite(value)) is not None}
        if upper:
            entry["epsilon_upper"] = upper
        lower = _finite(row.epsilon_lower)
        if lower is not None:
            entry["epsilon_lower"] = lower
            level = confidence_level(row)
            if level is not None:
                entry["epsilon_lower_level"] = level
            if row.epsilon_lower_assumes in ASSUMES:
                entry["epsilon_lower_assumes"] = row.epsilon_lower_assumes
        for key in loaded.section.scores:
            value = _finite(row.scores.get(key))
            if value is not None:
                entry[key] = value
        utility = _finite(row.utility)
        if utility is not None:
            entry["utility"] = utility
            entry["utility_measure"] = row.utility_name or "utility"
        out[loaded.audit] = entry
    return versioned(out)


def number(value: float, direction: Direction = "nearest") -> str:
    """A headline number: 3 significant digits (a bound rounded outward: ``down`` for a lower bound,
    ``up`` for an upper one, so the shown bound is still a bound), ∞ for infinity."""
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    return f"{measured(value, direction):.3g}"


def confidence_level(row: SummaryRow) -> float | None:
    """The joint confidence of the row's lower bound: stated, else read from its estimator's text."""
    if row.confidence is not None:
        return float(row.confidence)
    text = row.epsilon_lower_estimator or ""
    if found := _PERCENT.search(text):
        return float(found.group(1)) / 100
    if found := _CONFIDENCE.search(text):
        return float(found.group(1))
    return None


def assumption_tag(assumes: str | None) -> str | None:
    """A short tag for an estimator's assumption ("no assumption", "Gaussian", …); None when unstated."""
    if assumes is None:
        return None
    if assumes in ASSUMPTION_SHORT:
        return ASSUMPTION_SHORT[assumes]
    text = assumes.strip().lower()
    if text in ("", "none") or text.startswith("none "):
        return "no assumption"
    for phrase, short in ASSUMPTION_TAGS:
        if phrase in text:
            return short
    return assumes if len(assumes) <= 24 else assumes[:23].rstrip() + "…"


def tightest_upper(row: SummaryRow) -> tuple[str, float] | None:
    """(accountant, ε) of the smallest finite accountant ε of the row, or None."""
    finite = {k: v for k, v in row.epsilon_upper.items() if _finite(v) is not None}
    if not finite:
        return None
    name = min(finite, key=lambda k: finite[k])
    return name, float(finite[name])


def _proven_cell(row: SummaryRow) -> Markup:
    lower = row.epsilon_lower
    estimator = row.epsilon_lower_estimator or ""
    if lower is None or math.isnan(float(lower)):
        return Markup("—" + tag("no bound", estimator or None))
    level = confidence_level(row)
    short = assumption_tag(row.epsilon_lower_assumes)
    parts = [f"{level * 100:g} %" if level is not None else None, short]
    label = " · ".join(p for p in parts if p) or "level not stated"
    assumes = ASSUMES.get(row.epsilon_lower_assumes or "", row.epsilon_lower_assumes)
    tip = estimator + (f"; assumes: {assumes}" if assumes else "")
    value = html.escape(number(float(lower), "down"))
    if float(lower) == 0.0:
        value += " — " + html.escape(f"tried {row.tried}" if row.tried else "nothing proven above 0")
    elif row.tried:
        tip += f"; tried {row.tried}"
    return Markup(value + tag(label, tip or None))


def _promised_cell(row: SummaryRow) -> Markup:
    tight = tightest_upper(row)
    every = " · ".join(
        f"{k}: {format_value(None if v is None else float(v))}" for k, v in row.epsilon_upper.items()
    )
    if tight is None:
        if row.epsilon_upper:  # accountants that promise nothing finite (e.g. a non-private baseline)
            return Markup("∞" + tag("no finite bound", every))
        return Markup("—" + tag("no accountant"))
    name, value = tight
    return Markup(html.escape(number(value, "up")) + tag(name.upper() if len(name) <= 4 else name, every))


def _ratio(row: SummaryRow) -> float | Markup | None:
    """proven / promised; above 1 it is flagged (a valid bound exceeds its accountant with chance at
    most 1 − confidence each; often, it points to a wrong estimator or accountant)."""
    tight = tightest_upper(row)
    lower = _finite(row.epsilon_lower)
    if tight is None or lower is None or tight[1] <= 0:
        return None
    ratio = float(f"{lower / tight[1]:.3g}")
    if ratio <= 1:
        return ratio
    note = "proven exceeds promised: chance at most 1 − confidence per bound; often, an error"
    return Markup(f'<span class="over" title="{html.escape(note)}">{format_value(ratio)} ⚠</span>')


def _utility_cell(row: SummaryRow) -> Markup | None:
    if row.utility is None:
        return None
    name = row.utility_name or "utility"
    return Markup(html.escape(number(float(row.utility))) + tag(name))


def headline_cells(row: SummaryRow) -> list[Any]:
    """The four headline cells of a row, in :data:`HEADLINE_COLUMNS` order."""
    return [_proven_cell(row), _promised_cell(row), _ratio(row), _utility_cell(row)]


def score_text(row: SummaryRow, key: str) -> str | None:
    """A score as text: 3 digits, and a rate observed as 0 with its interval ``[0, <key>_upper]``."""
    value = row.scores.get(key)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = number(float(value))
    upper = row.scores.get(key + UPPER_SUFFIX)
    if float(value) == 0.0 and upper is not None:
        text += f" [0, {number(float(upper))}]"
    return text


def shown_scores(scores: Mapping[str, str]) -> dict[str, str]:
    """The declared scores to show: an ``<key>_upper`` limit rides in its score's cell instead."""
    return {
        k: v
        for k, v in scores.items()
        if not (k.endswith(UPPER_SUFFIX) and k[: -len(UPPER_SUFFIX)] in scores)
    }


def _scores_cell(row: SummaryRow, scores: Mapping[str, str]) -> Markup:
    lines = [
        f"{html.escape(label)}: <b>{html.escape(text)}</b>"
        for key, label in shown_scores(scores).items()
        if (text := score_text(row, key)) is not None
    ]
    return Markup("<br>".join(lines) if lines else "—", numeric=False)


def accountants(rows: Iterable[SummaryRow]) -> list[str]:
    """Every accountant the rows name, in :data:`ACCOUNTANTS` order first."""
    names = {name for row in rows for name in row.epsilon_upper}
    return [a for a in ACCOUNTANTS if a in names] + sorted(names - set(ACCOUNTANTS))


def _audit_cell(section: ReportSection, audit: str) -> Markup:
    text = f"<b>{html.escape(section.dataset)}</b> · {html.escape(section.experiment)}"
    link = f'<a href="#{anchor(audit)}">'
    return Markup(link + text + "</a>" + tag(section.headline.setting), numeric=False)


def summary_sentence(sections: Sequence[LoadedSection]) -> str:
    """The report's first sentence, one a reader can act on: which audits proved a positive ε lower
    bound (and the largest share of its promise), and which claim is in doubt (proven above promised,
    which a valid bound does with chance at most 1 − its level: most often a bug)."""
    proven: list[tuple[float, str, float]] = []
    doubt: list[str] = []
    for s in sections:
        row, name = s.section.headline, f"{s.section.dataset} {s.section.experiment}"
        lower, tight = _finite(row.epsilon_lower), tightest_upper(row)
        if lower is None or lower <= 0:
            continue
        share = lower / tight[1] if tight is not None and tight[1] > 0 else math.nan
        proven.append((share, name, lower))
        if share > 1:
            doubt.append(f"{name} (proven {number(lower, 'down')} > promised {number(tight[1], 'up')})")
    if not sections:
        return "No audit has results yet."
    if not proven:
        head = f"None of the {len(sections)} audits proved an ε above 0 at its headline setting."
    else:
        share, name, lower = max(proven, key=lambda p: (-math.inf if math.isnan(p[0]) else p[0]))
        best = f"; the closest to its promise is {name}: ε ≥ {number(lower, 'down')}" + (
            f", {100 * share:.0f} % of the accountant's ε" if math.isfinite(share) else ""
        )
        head = f"{len(proven)} of {len(sections)} audits proved a positive ε lower bound{best}."
    tail = (
        " Claim in doubt: " + "; ".join(doubt) + ": check the training and the accounting."
        if doubt
        else " No claim is in doubt: every proven ε lies within its accountant's promise."
    )
    return head + tail


def summary_html(sections: Sequence[LoadedSection]) -> str:
    """The summary table: one headline row per audit (``id="summary"``), sized to fit the page."""
    columns = ["audit · headline setting", *HEADLINE_COLUMNS, SCORES_COLUMN]
    rows = [
        [
            _audit_cell(s.section, s.audit),
            *headline_cells(s.section.headline),
            _scores_cell(s.section.headline, s.section.scores),
        ]
        for s in sections
    ]
    attrs = [f'data-audit="{html.escape(s.audit)}"' for s in sections]
    colgroup = "<colgroup>" + "".join(f'<col style="width:{w}%">' for w in SUMMARY_WIDTHS) + "</colgroup>"
    table = html_table(columns, rows, table_id="summary", row_attrs=attrs, css_class="summary")
    return table.replace("<thead>", colgroup + "<thead>", 1)


def settings_html(section: ReportSection) -> str:
    """An audit's settings: the headline cells per setting, its declared scores and every accountant's ε."""
    rows = section.rows or [section.headline]
    names = accountants(rows)
    scores = shown_scores(section.scores)
    columns = ["setting", *HEADLINE_COLUMNS, *scores.values(), *(f"ε promised ({a})" for a in names)]
    body = [
        [
            r.setting,
            *headline_cells(r),
            *(score_text(r, key) for key in scores),
            *(r.epsilon_upper.get(a) for a in names),
        ]
        for r in rows
    ]
    return html_table(columns, body)
