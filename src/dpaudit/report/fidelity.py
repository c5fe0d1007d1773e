"""The report's "Fidelity to the papers" section, read from the fidelity stage's table."""

from __future__ import annotations

import html
from pathlib import Path

from dpaudit.fidelity.table import (
    FIDELITY_CSV,
    MARKDOWN_COLUMNS,
    counts_text,
    markdown_cells,
    read_fidelity_csv,
)
from dpaudit.report.html import html_table

__all__ = ["fidelity_section"]


def fidelity_section(root: Path) -> str:
    """One table, a row per paper claim and dpaudit estimator, each row tagged with its verdict."""
    path = root / FIDELITY_CSV
    head = '<section id="fidelity"><h2>Fidelity to the papers</h2>'
    if not path.is_file():
        missing = html.escape(str(FIDELITY_CSV))
        return head + f'<p class="muted">{missing} is missing: run dvc repro fidelity.</p></section>'
    rows = read_fidelity_csv(path)
    attrs = [f'data-verdict="{html.escape(row.verdict)}"' for row in rows]
    return (
        head + "<p>Each paper's headline result beside dpaudit's, with the estimator of each and a verdict "
        f"computed against the tolerance shown. Claims: {html.escape(counts_text(rows))}. "
        "The same table with the qualitative statements and the reproduction profiles' findings: "
        "docs/fidelity.md.</p>"
        + html_table(
            MARKDOWN_COLUMNS, [markdown_cells(r) for r in rows], table_id="fidelity-table", row_attrs=attrs
        )
        + "</section>"
    )
