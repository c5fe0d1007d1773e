"""Logging and progress bars shared by stages and the CLI."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def setup_logging(level: str | None = None) -> None:
    """Configure root logging once: ``LEVEL name: message`` on stderr (env ``DPAUDIT_LOG_LEVEL``)."""
    level = (level or os.environ.get("DPAUDIT_LOG_LEVEL", "INFO")).upper()
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s", force=True
    )


def progress(
    iterable: Iterable[T] | None = None,
    *,
    desc: str,
    total: int | None = None,
    unit: str = "it",
    disable: bool = False,
    **kwargs: Any,
) -> Any:
    """A tqdm bar with counts and rates; silenced when ``disable`` or ``DPAUDIT_PROGRESS=0``."""
    disable = disable or os.environ.get("DPAUDIT_PROGRESS", "1") == "0"
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=disable, dynamic_ncols=True, **kwargs)
