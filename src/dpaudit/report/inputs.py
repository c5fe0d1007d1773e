"""The report's inputs: the sections the bounds stages wrote and the metrics beside them.

:func:`find_sections` reads ``data/bounds/<audit>/section.json`` (a :class:`~dpaudit.results.ReportSection`)
of exactly the audits it is given; :func:`audit_metrics` flattens ``data/bounds/<audit>/metrics.json``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpaudit.io import read_json
from dpaudit.results import ReportSection

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedSection:
    """A section and the audit name (its ``data/bounds/<audit>/`` directory) it was read from."""

    audit: str
    path: Path
    section: ReportSection


# ----------------------------------------------------------------------------------------------
# Reading inputs


def find_sections(root: Path, audits: Sequence[str] | None = None) -> list[LoadedSection]:
    """Load ``data/bounds/<audit>/section.json`` of each of ``audits`` (sorted by name).

    ``audits`` is the list of audits to render (the pipeline passes the ``audits`` of params.yaml);
    a listed audit without a section is an error naming the file. ``None`` loads every section found
    (for use outside the pipeline only: stale sections of removed audits would be included).
    """
    bounds = root / "data" / "bounds"
    if audits is None:
        paths = sorted(bounds.glob("*/section.json"))
    else:
        paths = [bounds / name / "section.json" for name in sorted(audits)]
    sections = []
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: the report section of audit '{path.parent.name}' (run its bounds stage)"
            )
        try:
            section = ReportSection.load(path)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{path} is not a valid report section ({type(exc).__name__}: {exc})") from exc
        sections.append(LoadedSection(audit=path.parent.name, path=path, section=section))
    return sections


def audit_metrics(root: Path, audit: str) -> list[tuple[str, float]]:
    """Flattened metrics of an audit as (slash-joined key, number) pairs; empty when absent.

    Read from the bounds stage's copy ``data/bounds/<audit>/metrics.json`` (a declared input of the
    report stage; ``metrics/<audit>.json`` holds the same numbers for ``dvc metrics``).
    """
    path = root / "data" / "bounds" / audit / "metrics.json"
    if not path.is_file():
        return []
    try:
        raw = read_json(path)
    except ValueError as exc:
        logger.warning("skipping %s: %s", path, exc)
        return []
    flat: list[tuple[str, float]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, inner in value.items():
                walk(f"{prefix}/{key}" if prefix else str(key), inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat.append((prefix, float(value)))

    walk("", raw)
    return flat
