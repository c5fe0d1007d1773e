"""The audit report: section schema (:mod:`.spec`), figures (:mod:`.figures`) and HTML (:mod:`.render`).

Every audit's ``bounds`` stage writes a :class:`~dpaudit.report.spec.ReportSection`; the ``report`` stage
renders all of them with :func:`dpaudit.report.render.build_report` into one self-contained HTML page and
``metrics/summary.json``.
"""
