"""The audit report: one self-contained HTML file and a JSON file of headline numbers.

:func:`build_report` reads ``data/bounds/<audit>/section.json`` (a
:class:`~dpaudit.results.ReportSection`) of exactly the audits it is given (the ``audits`` of
params.yaml, in the pipeline) and renders them without knowing which experiment wrote them, so new
experiments slot in by writing one more section. Every file it reads is an input the report stage
declares: the sections and metrics copies under ``data/bounds/``, the CSVs under ``plots/``, the
verified files under ``data/raw/`` and ``params.yaml``. Stage run times come from the sections
(each records its train stage's time from the train manifest), not from ``data/timing/``.
The HTML carries its CSS and every figure inline (base64 PNG) and references no external URL,
so it can be mailed or archived as one file. ``metrics/summary.json`` holds the headline row of
each audit as numbers only, keyed by audit name, for ``dvc metrics diff``.

The page is put together here from its parts: :mod:`.inputs` (reading sections), :mod:`.summary`
(the headline table), :mod:`.figures`, :mod:`.provenance` and :mod:`.html` (escaped building blocks).
"""

from __future__ import annotations

import datetime as _dt
import html
import logging
from collections.abc import Sequence
from pathlib import Path

from dpaudit.io import atomic_path, write_json
from dpaudit.report.config import ReportConfig, config_from_params
from dpaudit.report.fidelity import fidelity_section
from dpaudit.report.figures import FigureError, render_figure
from dpaudit.report.html import CSS, anchor, figure_html, format_value, html_table
from dpaudit.report.inputs import LoadedSection, audit_metrics, find_sections
from dpaudit.report.provenance import git_commit, provenance_html
from dpaudit.report.region import region_of_privacy_png
from dpaudit.report.summary import (
    confidence_level,
    settings_html,
    summary_html,
    summary_metrics,
    summary_sentence,
)
from dpaudit.results import TableSpec

__all__ = [
    "LoadedSection",
    "ReportConfig",
    "build_report",
    "config_from_params",
    "find_sections",
    "format_value",
    "git_commit",
    "render_html",
    "summary_metrics",
]

logger = logging.getLogger(__name__)


def _table_html(table: TableSpec, audit: str) -> str:
    for i, row in enumerate(table.rows):
        if len(row) != len(table.columns):
            raise ValueError(
                f"section {audit}: table {table.id!r} row {i} has {len(row)} cells "
                f"for {len(table.columns)} columns"
            )
    caption = f'<p class="caption">{html.escape(table.caption)}</p>' if table.caption else ""
    return (
        f"<h4>{html.escape(table.title)}</h4>"
        + html_table(table.columns, table.rows, table_id=f"{anchor(audit)}-{table.id}")
        + caption
    )


def _section_html(loaded: LoadedSection, root: Path) -> str:
    section = loaded.section
    audit = loaded.audit
    parts = [
        f'<section class="audit" id="{anchor(audit)}" data-audit="{html.escape(audit)}">',
        f'<h2>{html.escape(section.title)} <span class="muted">({html.escape(audit)})</span></h2>',
        f"<p>{html.escape(section.description)}</p>",
    ]
    parts.append("<h3>Settings</h3>")
    parts.append(settings_html(section))
    if section.tables:
        parts.append("<h3>Tables</h3>")
        parts.extend(_table_html(t, audit) for t in section.tables)
    if section.figures:
        parts.append("<h3>Figures</h3>")
    level = confidence_level(section.headline)  # the joint level a one-x dot chart's lower bounds hold at
    for spec in section.figures:
        try:
            png = render_figure(spec, root, level)
        except FigureError as exc:
            raise FigureError(f"section {loaded.path}: {exc}") from exc
        parts.append(figure_html(png, spec.title, spec.caption, f"{anchor(audit)}-{spec.id}"))
    metrics = audit_metrics(root, audit)
    if metrics:
        parts.append(
            f"<details><summary>All numbers of results/{html.escape(audit)}.json "
            f"({len(metrics)} numbers)</summary>"
        )
        parts.append(html_table(["metric", "value"], metrics))
        parts.append("</details>")
    parts.append("</section>")
    return "\n".join(parts)


def render_html(root: Path, sections: Sequence[LoadedSection], title: str) -> str:
    """The whole report page as a string (see :func:`build_report`)."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    toc = "".join(
        f'<li><a href="#{anchor(s.audit)}">{html.escape(s.section.title)} ({html.escape(s.audit)})</a></li>'
        for s in sections
    )
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="muted">Generated {now} from {len(sections)} audit section(s).</p>',
        f'<nav><ul>{toc}<li><a href="#fidelity">Fidelity to the papers</a></li>'
        '<li><a href="#provenance">Provenance</a></li></ul></nav>',
        '<section id="overview"><h2>Summary</h2>',
        f'<p class="lead"><b>{html.escape(summary_sentence(sections))}</b></p>',
        "<p>One row per audit (dataset × experiment), its headline setting. <b>ε proven</b> is a "
        "statistically valid lower bound an attack proved, tagged with its joint confidence (both "
        "error-rate limits and every threshold tried inside that level) and what it assumes about the "
        "mechanism (hover the tag for the estimator); a 0 says what was tried. <b>ε promised</b> is the "
        "tightest privacy accountant's upper bound (hover for every accountant). Estimates (ε′, Epsilon*, "
        "the naive sweep) are never shown as lower bounds. The utility is that of the audited model. "
        "ρβ bounds the adversary's posterior belief and ρα its expected membership advantage "
        "(Bernau et al.); Epsilon* is the empirical privacy loss of the trained model (Negoescu et al.). "
        "A rate observed as 0 is shown with its interval.</p>",
    ]
    if sections:
        body.append(summary_html(sections))
        region = region_of_privacy_png(
            [(s.audit, r) for s in sections for r in (s.section.rows or [s.section.headline])]
        )
        if region is not None:
            body.append(
                figure_html(
                    region,
                    "Region of privacy",
                    "For every setting of every audit, one panel per audit on the same log ε axis "
                    "(tick labels on each panel, above and below when it is tall): the true ε lies "
                    "between the valid attack lower bound (at its joint confidence; its estimator and "
                    "assumption are in the summary table) and the tightest accountant upper "
                    "bound (Erlingsson et al. §5.3). Epsilon* is drawn as a separate marker: an "
                    "estimate for the trained model, not a bound.",
                    "region-of-privacy",
                )
            )
    else:
        body.append('<p class="muted">No audits to report (params.yaml lists none).</p>')
    body.append("</section>")
    body.extend(_section_html(s, root) for s in sections)
    body.append(fidelity_section(root))
    body.append(provenance_html(root, sections))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def build_report(
    root: Path, out_html: Path, summary_path: Path, title: str, audits: Sequence[str] | None = None
) -> None:
    """Render ``out_html`` (one self-contained page) and ``summary_path`` from the sections of ``audits``.

    Reads ``data/bounds/<audit>/section.json`` and ``metrics.json`` of each audit (all found when
    ``audits`` is None), the CSVs their figures name, ``params.yaml`` and ``data/raw/``; absent
    optional inputs are noted in the page rather than failing. Both outputs are written atomically.
    """
    root = Path(root)
    sections = find_sections(root, audits)
    if not sections:
        logger.warning("no report sections under %s", root / "data" / "bounds")
    logger.info("rendering %d section(s): %s", len(sections), ", ".join(s.audit for s in sections))
    page = render_html(root, sections, title)
    with atomic_path(out_html) as tmp:
        tmp.write_text(page, encoding="utf-8")
    write_json(summary_path, summary_metrics(sections))
    logger.info("wrote %s (%.1f kB) and %s", out_html, len(page) / 1024, summary_path)
