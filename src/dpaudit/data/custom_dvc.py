"""A user's data file against the digest ``dvc add`` recorded for it (``<file>.dvc``), and the digest
git has committed: an audit runs on the data version that git + DVC describe, or not at all."""

from __future__ import annotations

import hashlib
import logging
import subprocess
from pathlib import Path

import yaml

from dpaudit.data.custom_spec import (
    CustomDataError,
    DvcDigestError,
)

log = logging.getLogger(__name__)


def _looks_binary(path: Path) -> bool:
    """DVC 2's text test (``dvc.utils.istextfile``): a NUL byte, or over 30% control bytes, in the
    first 512 bytes makes a file binary."""
    with path.open("rb") as handle:
        block = handle.read(512)
    if not block:
        return False
    if b"\x00" in block:
        return True
    text = bytes(range(32, 127)) + b"\n\r\t\f\b"
    nontext = block.translate(None, text)
    return len(nontext) / len(block) > 0.30


def file_md5(path: Path, dos2unix: bool = False) -> str:
    """md5 of the file's bytes; with ``dos2unix`` of its bytes after CRLF → LF (DVC 2's text digest)."""
    if dos2unix:
        return hashlib.md5(path.read_bytes().replace(b"\r\n", b"\n"), usedforsecurity=False).hexdigest()
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify_against_dvc(path: str | Path) -> str:
    """Check ``path`` against the md5 in ``<path>.dvc``; return the digest.

    DVC 3 (``hash: md5`` in the record) stores the md5 of the file's bytes. Records written by DVC 2
    (no ``hash`` key) used md5 after CRLF → LF conversion for text files; both are honoured. The size,
    when recorded, is compared first. Raises :class:`CustomDataError` when the file or its ``.dvc``
    record is missing or unreadable, and :class:`DvcDigestError` (expected and actual digest, and the
    ``dvc add`` hint) when the content differs.
    """
    path = Path(path)
    record_path = path.with_name(path.name + ".dvc")
    if not path.is_file():
        raise CustomDataError(f"{path}: file does not exist (or is not a regular file)")
    if not record_path.is_file():
        raise CustomDataError(
            f"{path}: not tracked by DVC ({record_path} is missing). Run `dvc add {path}` and commit "
            f"{record_path}, so the audit is tied to this version of the data"
        )
    try:
        record = yaml.safe_load(record_path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CustomDataError(f"{record_path}: cannot read the DVC record: {exc}") from exc
    outs = record.get("outs") if isinstance(record, dict) else None
    if not isinstance(outs, list) or len(outs) != 1 or not isinstance(outs[0], dict):
        raise CustomDataError(f"{record_path}: expected one entry under 'outs' (as `dvc add` writes)")
    out = outs[0]
    if out.get("path") != path.name:
        raise CustomDataError(
            f"{record_path}: records {out.get('path')!r}, not {path.name!r}; run `dvc add {path}`"
        )
    expected = out.get("md5")
    if not isinstance(expected, str) or expected.endswith(".dir"):
        raise CustomDataError(f"{record_path}: no file md5 recorded (a directory?); track the file itself")
    size = path.stat().st_size
    if "size" in out and out["size"] != size:
        raise DvcDigestError(str(path), out["size"], size, fact="size")
    actual = file_md5(path)
    if actual == expected:
        return actual
    if out.get("hash") != "md5" and not _looks_binary(path):
        legacy = file_md5(path, dos2unix=True)
        if legacy == expected:
            return legacy
    raise DvcDigestError(str(path), expected, actual)


def committed_record_md5(path: str | Path) -> str | None:
    """The md5 that git's ``HEAD`` commit records for ``path`` in ``<path>.dvc``, or None when the
    record is not committed (or git is not available).

    ``dvc add`` of a changed file, and ``dvc repro``, which re-records a changed tracked file before
    running the stages that depend on it, both rewrite ``<path>.dvc`` in the working tree; the digest
    check then passes. Comparing with the committed record tells an audit of the committed data from
    an audit of an uncommitted new version, which the download stage logs and records.
    """
    path = Path(path)
    try:
        shown = subprocess.run(
            ["git", "show", f"HEAD:./{path.name}.dvc"],
            cwd=path.parent if str(path.parent) else ".",
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if shown.returncode != 0:
        return None
    try:
        record = yaml.safe_load(shown.stdout)
        md5 = record["outs"][0]["md5"]
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        return None
    return md5 if isinstance(md5, str) else None
