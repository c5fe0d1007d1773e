"""Atomic file output: a stage either writes its whole output or leaves nothing behind.

Everything is first written next to its destination under a temporary name and then moved
into place with :func:`os.replace` (atomic on POSIX within one file system).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np


@contextlib.contextmanager
def atomic_path(destination: str | Path) -> Iterator[Path]:
    """Yield a temporary file path; on success move it to ``destination``, else delete it."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, destination)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_directory(destination: str | Path) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces ``destination`` whole, else is removed."""
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", suffix=".tmp", dir=destination.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o755)
        if destination.exists():
            shutil.rmtree(destination)
        os.replace(tmp, destination)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def write_json(destination: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON atomically (numpy scalars and arrays allowed)."""
    with atomic_path(destination) as tmp:
        text = json.dumps(data, indent=2, default=_json_default, allow_nan=False)
        tmp.write_text(text + "\n")


def read_json(path: str | Path) -> Any:
    """Read JSON, with an error naming the file when it is missing or malformed."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{path} does not exist: run the stage that writes it first") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc


def write_npz(destination: str | Path, arrays: Mapping[str, Any]) -> None:
    """Write a compressed ``.npz`` atomically."""
    with atomic_path(destination) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, **arrays)
