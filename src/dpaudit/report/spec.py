"""The report's section schema, re-exported from :mod:`dpaudit.results` (where experiments import it).

Kept so that ``dpaudit.report.spec`` stays a valid import path for code written against it.
"""

from dpaudit.results import FigureKind, FigureSpec, ReportSection, SummaryRow, TableSpec

__all__ = ["FigureKind", "FigureSpec", "ReportSection", "SummaryRow", "TableSpec"]
