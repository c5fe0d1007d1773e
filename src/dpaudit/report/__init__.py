"""The audit report: :mod:`.render` puts one self-contained HTML page together from its parts.

Every audit's ``bounds`` stage writes a :class:`~dpaudit.results.ReportSection` (the results
contract lives in :mod:`dpaudit.results`, which experiments import; nothing under
:mod:`dpaudit.experiments` or :mod:`dpaudit.bounds` imports this package). The ``report`` stage
renders all of them with :func:`dpaudit.report.render.build_report` into one self-contained HTML
page and ``metrics/summary.json``: :mod:`.inputs` reads the sections, :mod:`.summary` builds the
headline table, :mod:`.figures` and :mod:`.region` draw the figures, :mod:`.provenance` records
where everything came from, and :mod:`.html` holds the escaped building blocks.
"""
