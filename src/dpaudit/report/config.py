"""The ``report`` section of ``params.yaml``, apart from the renderer so that the check stage can
validate it without importing the report's figures and tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dpaudit.config import from_mapping, require, section

__all__ = ["ReportConfig", "config_from_params"]


@dataclass(frozen=True)
class ReportConfig:
    """The ``report`` section of ``params.yaml``: the report's title."""

    title: str = "dpaudit audit report"

    def __post_init__(self) -> None:
        require(bool(self.title.strip()), "report.title", self.title, "must be a non-empty string")


def config_from_params(params: Mapping[str, Any]) -> ReportConfig:
    """Validate the ``report`` section of ``params.yaml`` (unknown keys and bad values name the key)."""
    return from_mapping(ReportConfig, section(params, "report"), "report")
