"""Shared pytest fixtures: the repository root and the dataset mirror."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
MIRROR_ENV = "DPAUDIT_DATA_MIRROR"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the folder holding ``params.yaml``)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The dataset mirror: env ``DPAUDIT_DATA_MIRROR``, else ``../shared/datasets`` next to the repository.

    Tests that read the official files skip, saying why, when neither exists.
    """
    configured = os.environ.get(MIRROR_ENV, "").strip()
    if configured:
        path = Path(configured).resolve()
        if not path.is_dir():
            pytest.skip(f"{MIRROR_ENV}={configured} is not a directory")
        return path
    default = (REPO_ROOT / ".." / "shared" / "datasets").resolve()
    if default.is_dir():
        return default
    pytest.skip(f"no dataset mirror: set {MIRROR_ENV} or provide {default}")
