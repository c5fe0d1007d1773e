"""Fetch a dataset's official files into ``data/raw/<ds>/``, verified, all or nothing.

Where a file comes from, in order: the mirror (env ``DPAUDIT_DATA_MIRROR`` beats the ``data.mirror``
param), a directory or an ``http(s)://`` base URL, looked up as ``<mirror>/<ds>/<file>`` or
``<mirror>/<file>``; the vendored copy in the repository (adult); the network, trying each of the
file's URLs with a timeout and retrying transient failures with exponential backoff (a URL mirror is
fetched the same way). A mirror replaces the network: a file it lacks (and the repository does not
vendor) is an error, not a download.

Every file is checked against all integrity facts the registry has for it (size, sha256, md5, git
blob id). The files are assembled in a temporary directory next to ``dest_dir`` that replaces it only
when every file passed, so a failure leaves no output behind. A full disk is reported naming the file.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dpaudit.data.registry import MANIFEST_NAME, FileSpec, get_dataset
from dpaudit.io import DISK_FULL_ERRNOS, atomic_directory, naming_full_disk, write_json
from dpaudit.logs import progress

log = logging.getLogger(__name__)

MIRROR_ENV = "DPAUDIT_DATA_MIRROR"
CHUNK = 1 << 20
USER_AGENT = "dpaudit/0.1 (python urllib)"
#: URL schemes a mirror may use besides a plain directory (``file://`` is read as the directory).
URL_MIRROR_SCHEMES = ("http", "https")


class DataError(RuntimeError):
    """A dataset file could not be obtained or is not the file the registry describes."""


class IntegrityError(DataError):
    """A file's size or digest differs from the registry's; names the file, expected and actual values."""

    def __init__(self, file: str, fact: str, expected: str | int, actual: str | int, source: str) -> None:
        self.file, self.fact, self.expected, self.actual, self.source = file, fact, expected, actual, source
        super().__init__(f"{file}: {fact} mismatch (from {source}): expected {expected}, actual {actual}")


class DownloadError(DataError):
    """No source delivered a file: every URL failed, or the mirror lacks it."""


class _TransientError(Exception):
    """A failure worth retrying the same URL for (timeout, reset connection, truncated body, 5xx)."""


def resolve_mirror(configured: str | Path | None) -> Path | str | None:
    """The mirror to use: env ``DPAUDIT_DATA_MIRROR`` when set and non-empty, else the configured one.

    A directory comes back as a :class:`Path` (``file:///dir`` too); an ``http://`` or ``https://``
    base URL as a string without its trailing slash. Any other ``scheme://`` is a
    :class:`DownloadError` naming the value and where it was set, rather than being read as a
    (mangled) relative path.
    """
    env = os.environ.get(MIRROR_ENV, "").strip()
    if env:
        value, origin = env, MIRROR_ENV
    elif configured is None or str(configured).strip() == "":
        return None
    else:
        value, origin = str(configured).strip(), "data.mirror"
    if "://" not in value:
        return Path(value)
    parts = urllib.parse.urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme == "file" and parts.netloc in ("", "localhost"):
        return Path(urllib.parse.unquote(parts.path))
    if scheme in URL_MIRROR_SCHEMES and parts.netloc:
        return value.rstrip("/")
    raise DownloadError(
        f"data mirror {value!r} (set by {origin}) is not supported: give a directory, or an "
        f"http:// or https:// base URL under which the files keep their names"
    )


def git_blob_id(path: str | Path) -> str:
    """The id ``git hash-object`` prints: sha1 of ``b"blob <size>\\0"`` followed by the content."""
    return file_facts(path, ("git_blob",))["git_blob"]  # type: ignore[return-value]


def file_facts(
    path: str | Path, wanted: Sequence[str] = ("size", "sha256", "md5", "git_blob")
) -> dict[str, str | int]:
    """Size and digests of a file in one streaming pass (only those in ``wanted``)."""
    path = Path(path)
    size = path.stat().st_size
    hashers: dict[str, Any] = {}
    if "sha256" in wanted:
        hashers["sha256"] = hashlib.sha256()
    if "md5" in wanted:
        hashers["md5"] = hashlib.md5(usedforsecurity=False)
    if "git_blob" in wanted:
        blob = hashlib.sha1(usedforsecurity=False)
        blob.update(b"blob %d\0" % size)
        hashers["git_blob"] = blob
    if hashers:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                for hasher in hashers.values():
                    hasher.update(chunk)
    facts: dict[str, str | int] = {name: h.hexdigest() for name, h in hashers.items()}
    if "size" in wanted:
        facts["size"] = size
    return facts


def verify_file(path: str | Path, spec: FileSpec, source: str | None = None) -> dict[str, str | int]:
    """Check ``path`` against every fact in ``spec``; raise :class:`IntegrityError` on the first mismatch.

    Size is compared first (cheap, and the clearest message for a truncated file), then digests.
    Returns the measured facts (size and sha256 always included, for the manifest).
    """
    path = Path(path)
    expected = spec.expected()
    facts = file_facts(path, tuple({"size", "sha256", *expected}))
    for fact in ("size", "sha256", "md5", "git_blob"):
        if fact in expected and facts[fact] != expected[fact]:
            raise IntegrityError(spec.name, fact, expected[fact], facts[fact], source or str(path))
    return facts


def mirror_urls(base: str, dataset: str, name: str) -> list[str]:
    """The URLs a file is looked up at under a URL mirror: ``<base>/<dataset>/<name>``, ``<base>/<name>``."""
    quoted = urllib.parse.quote(name)
    return [f"{base}/{urllib.parse.quote(dataset)}/{quoted}", f"{base}/{quoted}"]


def find_in_mirror(mirror: Path, dataset: str, name: str) -> Path | None:
    """``<mirror>/<dataset>/<name>`` or ``<mirror>/<name>``, whichever exists first."""
    for candidate in (mirror / dataset / name, mirror / name):
        if candidate.is_file():
            return candidate
    return None


def _fetch_once(url: str, dest: Path, name: str, timeout: float) -> None:
    """One HTTP(S) GET of ``url`` into ``dest`` with a byte progress bar; a short body is transient."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length_header = response.headers.get("Content-Length")
            length = int(length_header) if length_header and length_header.isdigit() else None
            received = 0
            with open(dest, "wb") as out, progress(desc=name, total=length, unit="B", unit_scale=True) as bar:
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
    except urllib.error.HTTPError as exc:
        if exc.code >= 500 or exc.code in (408, 429):
            raise _TransientError(f"HTTP {exc.code} {exc.reason}") from exc
        raise DownloadError(f"HTTP {exc.code} {exc.reason}") from exc
    except (http.client.HTTPException, OSError) as exc:  # URLError, timeouts, resets, TLS errors
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            raise  # writing ``dest`` failed: retrying cannot help; the caller names the file
        raise _TransientError(f"{type(exc).__name__}: {exc}") from exc
    if length is not None and received != length:
        raise _TransientError(f"truncated download: received {received} of {length} bytes")


def fetch_url(
    spec: FileSpec, url: str, dest: Path, *, timeout: float = 60.0, retries: int = 3, backoff: float = 2.0
) -> dict[str, str | int]:
    """Download one URL to ``dest`` and verify it, retrying transient failures ``retries`` times.

    Waits ``backoff * 2**k`` seconds before retry ``k + 1``. A client error (404, 403) or a digest
    mismatch is not retried: the same URL would serve the same bytes again. Returns the file's facts.
    """
    for attempt in range(retries + 1):
        try:
            _fetch_once(url, dest, spec.name, timeout)
            return verify_file(dest, spec, source=url)
        except _TransientError as exc:
            if attempt == retries:
                raise DownloadError(f"{exc} (after {retries + 1} attempts)") from exc
            wait = backoff * 2**attempt
            log.warning("%s: %s from %s; retrying in %.1f s", spec.name, exc, url, wait)
            time.sleep(wait)


def obtain_file(
    spec: FileSpec,
    dest: Path,
    *,
    dataset: str,
    mirror: Path | str | None = None,
    vendor_dir: Path | None = None,
    timeout: float = 60.0,
    retries: int = 3,
    backoff: float = 2.0,
) -> dict[str, str | int]:
    """Put a verified copy of ``spec`` at ``dest`` (mirror, vendored copy, then URLs); return its facts.

    ``mirror`` is a directory or an http(s) base URL (see :func:`resolve_mirror`). A file a URL
    mirror serves with the wrong bytes is an :class:`IntegrityError`, as for a directory mirror.
    """
    local: Path | None = None
    looked_for: list[str] = []
    if isinstance(mirror, str):
        for url in mirror_urls(mirror, dataset, spec.name):
            try:
                log.info("%s: downloading %s (mirror)", spec.name, url)
                return fetch_url(spec, url, dest, timeout=timeout, retries=retries, backoff=backoff)
            except IntegrityError:
                dest.unlink(missing_ok=True)
                raise
            except DownloadError as exc:
                looked_for.append(f"{url}: {exc}")
            dest.unlink(missing_ok=True)
    elif mirror is not None:
        local = find_in_mirror(mirror, dataset, spec.name)
        looked_for = [str(mirror / dataset / spec.name), str(mirror / spec.name)]
    if local is None and vendor_dir is not None and (vendor_dir / spec.name).is_file():
        local = vendor_dir / spec.name
    if local is not None:
        log.info("%s: copying %s", spec.name, local)
        shutil.copyfile(local, dest)
        return verify_file(dest, spec, source=str(local))
    if mirror is not None:
        raise DownloadError(
            f"{spec.name}: not in the mirror {mirror} (looked for {' and '.join(looked_for)}); "
            f"a mirror replaces the network, so unset it ({MIRROR_ENV} / data.mirror) "
            f"to download from {', '.join(spec.urls) or 'the official source'}"
        )
    if not spec.urls:
        where = f" at {vendor_dir / spec.name}" if vendor_dir is not None else ""
        raise DownloadError(f"{spec.name}: no URL to download from and no vendored copy{where}")
    failures: list[str] = []
    integrity: IntegrityError | None = None
    for url in spec.urls:
        try:
            log.info("%s: downloading %s", spec.name, url)
            return fetch_url(spec, url, dest, timeout=timeout, retries=retries, backoff=backoff)
        except IntegrityError as exc:
            integrity = integrity or exc
            failures.append(str(exc))
        except DownloadError as exc:
            failures.append(f"{url}: {exc}")
        dest.unlink(missing_ok=True)
    summary = "; ".join(failures)
    if integrity is not None and len(failures) == 1:
        raise integrity
    raise DownloadError(f"{spec.name}: every source failed: {summary}")


def download_dataset(
    name: str,
    dest_dir: str | Path,
    mirror: str | Path | None = None,
    *,
    pool: str | None = None,
    files: Sequence[FileSpec] | None = None,
    vendor_dir: Path | None = None,
    timeout: float = 60.0,
    retries: int = 3,
    backoff: float = 2.0,
) -> list[Path]:
    """Download (or copy) and verify every file of dataset ``name`` into ``dest_dir``; all or nothing.

    ``mirror`` is the configured mirror (``data.mirror``); env ``DPAUDIT_DATA_MIRROR`` overrides it.
    ``pool`` selects the files a pooled dataset needs (mnist: ``test`` needs only the t10k files).
    ``files`` and ``vendor_dir`` replace the registry's (for tests and custom sources). Besides the
    data files, ``dest_dir`` receives ``manifest.json`` with each file's size and sha256. Returns the
    data file paths. Any failure raises :class:`DataError` and leaves ``dest_dir`` as it was.
    """
    if files is None:
        spec = get_dataset(name)
        wanted: Sequence[FileSpec] = spec.files_for(pool)
        vendor_dir = spec.vendor_dir if vendor_dir is None else vendor_dir
    else:
        wanted = files
    mirror_path = resolve_mirror(mirror)
    if isinstance(mirror_path, Path) and not mirror_path.is_dir():
        raise DownloadError(
            f"data mirror {mirror_path} is not a directory (set by {MIRROR_ENV} or data.mirror)"
        )
    dest_dir = Path(dest_dir)
    verified: dict[str, dict[str, str | int]] = {}
    manifest: dict[str, object] = {"dataset": name, "files": verified}
    if not wanted:
        manifest["note"] = "nothing to download: the data ships with a Python package"
    with atomic_directory(dest_dir) as tmp:
        for file in wanted:
            with naming_full_disk(dest_dir / file.name):
                facts = obtain_file(
                    file,
                    tmp / file.name,
                    dataset=name,
                    mirror=mirror_path,
                    vendor_dir=vendor_dir,
                    timeout=timeout,
                    retries=retries,
                    backoff=backoff,
                )
            verified[file.name] = {"size": facts["size"], "sha256": facts["sha256"]}
        write_json(tmp / MANIFEST_NAME, manifest)
    log.info("%s: %d verified file(s) in %s", name, len(wanted), dest_dir)
    return [dest_dir / f.name for f in wanted]
