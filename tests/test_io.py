"""Atomic writers: temporaries tagged with the writer's PID, swept when it died; full disk names the file."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dpaudit.io import (
    DiskFullError,
    Terminated,
    atomic_directory,
    atomic_path,
    interruption,
    sweep_stale_temps,
    write_json,
    write_npz,
)

REPO = Path(__file__).resolve().parents[1]


def _dead_pid() -> int:
    """The PID of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp"))


def test_temporary_names_carry_the_pid_and_vanish_on_success_and_on_error(tmp_path):
    dest = tmp_path / "metrics" / "toy.json"
    with atomic_path(dest) as tmp:
        assert tmp.name.startswith(f".toy.json.{os.getpid()}.") and tmp.name.endswith(".tmp")
        tmp.write_text("{}")
    with pytest.raises(RuntimeError), atomic_directory(tmp_path / "plots" / "toy") as tmp_dir:
        assert tmp_dir.name.startswith(f".toy.{os.getpid()}.")
        (tmp_dir / "a.png").write_bytes(b"png")
        raise RuntimeError("boom")
    assert dest.read_text() == "{}" and not (tmp_path / "plots" / "toy").exists()
    assert _temps(tmp_path) == []


def test_sweep_removes_only_dead_writers_temporaries_of_that_destination(tmp_path):
    dead, alive = _dead_pid(), os.getpid()
    stale_file = tmp_path / f".toy.json.{dead}.ab_c9.tmp"
    stale_dir = tmp_path / f".toy.json.{dead}.zz1.tmp"
    live = tmp_path / f".toy.json.{alive}.q7.tmp"  # a concurrent writer that is still running
    other = tmp_path / f".toy.json.5.{dead}.x.tmp"  # belongs to destination "toy.json.5"
    legacy = tmp_path / ".toy.json.k3j2h1.tmp"  # no PID: cannot tell whether its writer lives
    unrelated = tmp_path / "toy.json.bak"
    stale_dir.mkdir()
    (stale_dir / "inside.bin").write_bytes(b"x" * 100)
    for path in (stale_file, live, other, legacy, unrelated):
        path.write_bytes(b"x")
    removed = sweep_stale_temps(tmp_path / "toy.json")
    assert sorted(removed) == sorted([stale_file, stale_dir])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted(p.name for p in (live, other, legacy, unrelated))
    assert sweep_stale_temps(tmp_path / "missing" / "toy.json") == []


def test_every_writer_sweeps_before_writing(tmp_path):
    dead = _dead_pid()
    stale = [tmp_path / f".toy.json.{dead}.a.tmp", tmp_path / f".toy.npz.{dead}.b.tmp"]
    (tmp_path / f".out.{dead}.c.tmp").mkdir()
    for path in stale:
        path.write_text("partial")
    write_json(tmp_path / "toy.json", {"a": 1})
    write_npz(tmp_path / "toy.npz", {"a": [1, 2]})
    with atomic_directory(tmp_path / "out") as tmp:
        (tmp / "f").write_text("done")
    assert _temps(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "toy.json", "toy.npz"]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_names_the_destination_and_leaves_no_temporary(tmp_path, monkeypatch, code):
    def full(self, *args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(Path, "write_text", full)
    dest = tmp_path / "metrics" / "adult-identifiability.json"
    with pytest.raises(DiskFullError) as info:
        write_json(dest, {"epsilon": 1.0})
    message = str(info.value)
    assert info.value.errno == code and str(dest) in message
    assert f"df -h {dest.parent}" in message and "partial output was removed" in message
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == code
    assert _temps(tmp_path) == [] and not dest.exists()


def test_a_full_disk_inside_a_directory_names_the_directory_other_errors_pass_unchanged(tmp_path):
    dest = tmp_path / "data" / "train" / "digits" / "identifiability"
    full = f"no space left on device while writing {dest};"
    with pytest.raises(DiskFullError, match=full), atomic_directory(dest):
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(PermissionError) as info, atomic_directory(dest):
        raise PermissionError(errno.EACCES, "Permission denied")
    assert not isinstance(info.value, DiskFullError)
    assert _temps(tmp_path) == [] and not dest.exists()


def test_interruption_names_the_signal_and_the_shell_exit_status():
    assert interruption(KeyboardInterrupt()) == ("SIGINT", 130)
    assert interruption(Terminated(signal.SIGTERM)) == ("SIGTERM", 143)
    assert interruption(Terminated(signal.SIGHUP)) == ("SIGHUP", 129)
    assert isinstance(Terminated(signal.SIGTERM), KeyboardInterrupt)
    assert not isinstance(Terminated(signal.SIGTERM), Exception)  # `except Exception` cannot swallow it


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_and_dvc_ignore_every_temporary_and_run_byproduct_but_not_outputs(tmp_path):
    """The repository's ignore rules, applied to the names the writers really make.

    A run must leave ``git status`` showing only what the README says it changes: temporaries
    (also those a SIGKILL leaves), data outputs, reports, timings and DVC's scratch are ignored;
    ``metrics/`` and ``plots/`` and ``dvc.lock`` are not.
    """
    repo = tmp_path / "repo"
    (repo / ".dvc").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    shutil.copyfile(REPO / ".gitignore", repo / ".gitignore")
    shutil.copyfile(REPO / ".dvc" / ".gitignore", repo / ".dvc" / ".gitignore")
    shutil.copyfile(REPO / ".dvcignore", repo / ".dvcignore")
    dead = _dead_pid()
    made: list[Path] = []
    files = ("results/adult-identifiability.json", "reports/index.html", "data/losses/digits/membership.npz")
    for dest in files:
        with atomic_path(repo / dest) as tmp:
            made.append(tmp)
            tmp.write_text("partial")
            shutil.copyfile(tmp, tmp.with_name(tmp.name.replace(str(os.getpid()), str(dead))))
    for dest in ("plots/digits-identifiability", "data/train/digits/identifiability", "data/raw/adult"):
        with atomic_directory(repo / dest) as tmp:
            made.append(tmp / "part.bin")
            (tmp / "part.bin").write_text("partial")
    ignored = [str(p.relative_to(repo)) for p in made] + [
        f"metrics/.summary.json.{dead}.k2_x9.tmp",
        f"plots/.adult-membership.{dead}.a1b2.tmp/privacy_utility.json",
        "data/timing/train@digits-identifiability.json",
        "data/train/digits/identifiability/weights.npz",
        "dvc_plots/index.html",
        "reports/index.html",
        ".dvc/tmp/rwlock",
        ".dvc/cache/files/md5/ab/cdef",
    ]
    kept = [
        "metrics/summary.json",
        "results/adult-identifiability.json",  # published by the writer above, like the plot below
        "plots/digits-identifiability/part.bin",
        "dvc.lock",
    ]
    for path in ignored + kept:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).touch()
    check = subprocess.run(
        ["git", "check-ignore", "--no-index", *ignored, *kept], cwd=repo, capture_output=True, text=True
    )
    assert sorted(check.stdout.split()) == sorted(ignored)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True, text=True
    )
    listed = sorted(line[3:] for line in status.stdout.splitlines())
    assert listed == sorted([".dvc/.gitignore", ".dvcignore", ".gitignore", *kept])
    dvcignore = (REPO / ".dvcignore").read_text().splitlines()
    assert ".*.tmp" in dvcignore  # DVC never hashes a temporary into an output directory


def test_no_sweep_inside_a_writers_own_temporary_directory(tmp_path):
    dead = _dead_pid()
    with atomic_directory(tmp_path / "out") as tmp:
        planted = tmp / f".part.json.{dead}.a.tmp"
        planted.write_text("x")
        assert sweep_stale_temps(tmp / "part.json") == []  # a fresh directory: nothing to look for
        planted.unlink()
        write_json(tmp / "part.json", {"a": 1})
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["part.json"]
