"""Atomic file output: a stage either writes its whole output or leaves nothing behind.

Everything is first written next to its destination under a temporary name and then moved
into place with :func:`os.replace` (atomic on POSIX within one file system).

Temporary names are ``.<destination name>.<pid>.<random>.tmp``: hidden, ignored by git and DVC
(``.gitignore``, ``.dvcignore``), and tagged with the writer's process id. A writer that ends by an
exception, Ctrl-C or SIGTERM (see :func:`handle_termination`) deletes its temporary on the way out.
One killed outright (SIGKILL, power loss) cannot, so every writer first sweeps the temporaries that
dead processes left next to its destination (:func:`sweep_stale_temps`).

A full disk or exhausted quota is re-raised as :class:`DiskFullError`, naming the destination.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import shutil
import signal
import tempfile
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

TEMP_SUFFIX = ".tmp"
#: errno values that mean "the file system cannot take more bytes": no space left, quota exceeded.
DISK_FULL_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT") if hasattr(errno, name))
#: Signals a stage unwinds on (:func:`handle_termination`): ``kill``, ``timeout``, a closed terminal.
TERMINATION_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class DiskFullError(OSError):
    """Writing ``destination`` failed because its file system is full or the quota is exhausted."""

    def __init__(self, code: int, destination: Path) -> None:
        what = "no space left on device" if code == errno.ENOSPC else "disk quota exceeded"
        where = destination.parent
        super().__init__(
            code,
            f"{what} while writing {destination}; the partial output was removed. Free space on the "
            f"file system holding {where} (see `df -h {where}`), then rerun",
        )
        self.destination = destination


def disk_full_error(destination: str | Path, exc: OSError) -> OSError:
    """``exc`` as a :class:`DiskFullError` naming ``destination`` when it means a full disk, else ``exc``.

    An error that already is a :class:`DiskFullError` is returned unchanged, so nested writers name
    the innermost file, the one actually being written.
    """
    if isinstance(exc, DiskFullError) or exc.errno not in DISK_FULL_ERRNOS:
        return exc
    return DiskFullError(exc.errno, Path(destination))


@contextlib.contextmanager
def naming_full_disk(destination: str | Path) -> Iterator[None]:
    """Re-raise a full-disk :class:`OSError` of the block as :class:`DiskFullError` naming ``destination``."""
    try:
        yield
    except OSError as exc:
        error = disk_full_error(destination, exc)
        if error is exc:
            raise
        raise error from exc


def _temp_prefix(destination: Path) -> str:
    return f".{destination.name}.{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (signal 0 checks without sending anything)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def sweep_stale_temps(destination: str | Path) -> list[Path]:
    """Delete the temporaries that dead writers left next to ``destination``; return what was removed.

    Matches only names this module creates for ``destination`` (``.<name>.<pid>.<random>.tmp``) whose
    ``pid`` is no longer running, so a concurrent live writer's temporary is never touched. Needed
    because SIGKILL cannot be caught: the killed writer's ``finally`` never ran. Skipped inside another
    writer's temporary directory (a parent named ``.*.tmp``), which is fresh, so that writing many
    files into it does not list it once per file.
    """
    destination = Path(destination)
    parent = destination.parent
    removed: list[Path] = []
    if any(part.startswith(".") and part.endswith(TEMP_SUFFIX) for part in parent.parts):
        return removed
    pattern = re.compile(rf"^\.{re.escape(destination.name)}\.(\d+)\.[^.]+{re.escape(TEMP_SUFFIX)}$")
    try:
        entries = list(os.scandir(parent))
    except FileNotFoundError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or _pid_alive(int(match.group(1))):
            continue
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        log.info("removed %s, left by process %s that was killed while writing", path, match.group(1))
        removed.append(path)
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def _atomic(destination: Path, make: Callable[[Path], Path], mode: int) -> Iterator[Path]:
    """Shared body of the atomic writers: sweep, create the temporary, publish or delete it."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temps(destination)
    tmp: Path | None = None
    try:
        with naming_full_disk(destination):
            tmp = make(destination)
            yield tmp
            os.chmod(tmp, mode)
            if tmp.is_dir() and destination.exists():
                _replace_directory(tmp, destination)
            else:
                os.replace(tmp, destination)
    finally:
        if tmp is not None and (tmp.exists() or tmp.is_symlink()):
            _remove(tmp)


def _replace_directory(tmp: Path, destination: Path) -> None:
    """Swap the finished ``tmp`` directory in for ``destination`` by two renames, the old version
    moved aside (a swept temporary name) and deleted only once the new one is in place: an interrupt
    between the renames puts the old version back, so the previous output is never left missing."""
    aside = destination.with_name(f".{destination.name}.{os.getpid()}.old{TEMP_SUFFIX}")
    _remove(aside)
    os.replace(destination, aside)
    try:
        os.replace(tmp, destination)
    finally:
        if destination.exists():
            _remove(aside)
        else:
            os.replace(aside, destination)


def _make_file(destination: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=_temp_prefix(destination), suffix=TEMP_SUFFIX, dir=destination.parent)
    os.close(fd)
    return Path(name)


def _make_directory(destination: Path) -> Path:
    name = tempfile.mkdtemp(prefix=_temp_prefix(destination), suffix=TEMP_SUFFIX, dir=destination.parent)
    return Path(name)


@contextlib.contextmanager
def atomic_path(destination: str | Path) -> Iterator[Path]:
    """Yield a temporary file path; on success move it to ``destination``, else delete it."""
    with _atomic(Path(destination), _make_file, 0o644) as tmp:
        yield tmp


@contextlib.contextmanager
def atomic_directory(destination: str | Path) -> Iterator[Path]:
    """Yield a temporary directory; on success it replaces ``destination`` whole, else is removed.

    A ``destination`` that is a symbolic link is refused before any work, naming it and its target:
    replacing the directory whole would delete through the link (or only the link)."""
    destination = Path(destination)
    if destination.is_symlink():
        raise OutputLinkError(destination)
    with _atomic(destination, _make_directory, 0o755) as tmp:
        yield tmp


class OutputLinkError(ValueError):
    """An output directory a stage replaces whole is a symbolic link; the message names both ends."""

    def __init__(self, destination: Path) -> None:
        super().__init__(
            f"{destination} is a symbolic link to {os.readlink(destination)}; this output directory is "
            f"replaced whole on every run, and dpaudit does not delete through a link. Remove the link "
            f"(`rm {destination}`) and rerun"
        )
        self.destination = destination


class NpzArrays(Mapping[str, np.ndarray]):
    """The arrays of an open ``.npz`` file (:func:`open_npz`); each read error names the file and array."""

    def __init__(self, path: Path, handle: Any) -> None:
        self.path = path
        self._handle = handle

    @property
    def files(self) -> list[str]:
        """The array names, as :class:`numpy.lib.npyio.NpzFile` lists them."""
        return list(self._handle.files)

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._handle.files:
            raise MissingArrayError(f"{self.path}: no array {key!r} (arrays present: {sorted(self.files)})")
        try:
            return self._handle[key]
        except ValueError as exc:  # an object array: numpy refuses to unpickle it
            why = "holds Python objects, which dpaudit never unpickles" if "pickle" in str(exc) else str(exc)
            raise ValueError(f"{self.path}: array {key!r} {why} (numpy: {exc})") from exc

    def __iter__(self) -> Iterator[str]:
        return iter(self._handle.files)

    def __len__(self) -> int:
        return len(self._handle.files)


class MissingArrayError(KeyError):
    """An ``.npz`` file lacks an array; printed as its message (a plain :class:`KeyError` quotes it)."""

    def __str__(self) -> str:
        return str(self.args[0])


@contextlib.contextmanager
def open_npz(path: str | Path) -> Iterator[NpzArrays]:
    """``np.load(path, allow_pickle=False)`` of an ``.npz`` archive whose every error names ``path``.

    numpy's own refusals name no file ("Object arrays cannot be loaded when allow_pickle=False",
    "Cannot load file containing pickled data"), so a stage reading several files would not say
    which one is bad. A missing file stays a :class:`FileNotFoundError` (numpy's names the path)."""
    path = Path(path)
    try:
        handle = np.load(path, allow_pickle=False)
    except (ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: cannot read as an .npz archive: {exc}") from exc
    if not isinstance(handle, np.lib.npyio.NpzFile):
        raise ValueError(f"{path}: a single .npy array, not an .npz archive of named arrays")
    try:
        yield NpzArrays(path, handle)
    finally:
        handle.close()


class Terminated(KeyboardInterrupt):
    """Raised by the handler :func:`handle_termination` installs, when the process gets SIGTERM or SIGHUP.

    A :class:`KeyboardInterrupt` subclass so that it unwinds like Ctrl-C: ``except Exception`` in
    library code does not swallow it, and every ``finally`` and context manager on the way out runs
    (the atomic writers delete their temporaries).
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")


def handle_termination(signums: Sequence[int] = TERMINATION_SIGNALS) -> None:
    """Make SIGTERM (sent by ``timeout``, CI time limits, ``kill``) and SIGHUP raise :class:`Terminated`.

    Python's default for these signals is to die at once, skipping all cleanup. A second signal
    while the first is unwinding is ignored, so it cannot cut the cleanup short. Does nothing
    outside the main thread, where Python cannot install signal handlers.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    fired = False

    def _raise(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise Terminated(signum)

    for signum in signums:
        signal.signal(signum, _raise)


def interruption(exc: KeyboardInterrupt) -> tuple[str, int]:
    """Signal name and conventional exit status (128 + signal number) of an interrupt.

    ``("SIGINT", 130)`` for Ctrl-C, ``("SIGTERM", 143)`` for a :class:`Terminated` from SIGTERM.
    """
    signum = exc.signum if isinstance(exc, Terminated) else int(signal.SIGINT)
    return signal.Signals(signum).name, 128 + signum


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
