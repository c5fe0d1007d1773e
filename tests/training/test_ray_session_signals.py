"""The pieces of a clean SIGTERM under Ray, without starting Ray: the driver's handlers wrapped once
and put back, Ray's C++ crash handler kept out, a start under way abandoned (the stage then exits at
once), and the reaper that kills a local Ray's processes once the driver lets go of them or dies.
The end-to-end runs are in ``test_ray_sigterm.py`` (slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dpaudit.io import Terminated
from dpaudit.pipeline import runner
from dpaudit.training import ray_session
from dpaudit.training.ray_session import SESSION_ENV, _RayStart

SRC = Path(__file__).resolve().parents[2] / "src"
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper reads /proc")


def _gone(pid: int, seconds: float = 10.0) -> bool:
    """Whether process ``pid`` ends (or is a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def no_session(monkeypatch: pytest.MonkeyPatch):
    """No Ray start of this process before or after the test; the abandonment flag reset."""
    monkeypatch.setattr(ray_session, "_start", None)
    monkeypatch.setattr(ray_session, "_abandoned", False)
    monkeypatch.delenv(SESSION_ENV, raising=False)
    yield


def test_handlers_are_wrapped_once_and_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def handler(signum, frame):
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    monkeypatch.setattr(ray_session, "_last_signal", None)
    try:
        start = _RayStart(None, None)
        off_main = threading.Thread(target=start.restore_handlers)
        off_main.start()
        off_main.join()
        assert signal.getsignal(signal.SIGTERM) is handler  # only the main thread may touch them
        start.restore_handlers()
        wrapped = signal.getsignal(signal.SIGTERM)
        assert getattr(wrapped, "_dpaudit_recording", False)
        start.restore_handlers()  # once
        assert signal.getsignal(signal.SIGTERM) is wrapped
        wrapped(signal.SIGTERM, None)
        assert seen == [signal.SIGTERM] and ray_session._last_signal == signal.SIGTERM
        start.put_back_handlers()
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_ray_is_kept_from_installing_its_crash_handler() -> None:
    """Ray's C++ flag 'crash handler installed' is set inside the block (Ray then installs none,
    nor resets SIGTERM at shutdown) and back as it was after it."""
    pytest.importorskip("ray")
    flag = ray_session._ray_crash_handler_flag()
    assert flag is not None, "Ray's flag not found: a SIGTERM while Ray starts would abort the stage"
    before = flag.value
    with ray_session._no_ray_crash_handler():
        assert flag.value is True
    assert flag.value == before


def test_a_start_under_way_is_abandoned_and_the_stage_exits_at_once(no_session, monkeypatch) -> None:
    start = _RayStart(None, 1)  # never started: as if ray.init were still running
    monkeypatch.setattr(ray_session, "_start", start)
    monkeypatch.setenv(SESSION_ENV, start.marker)
    ray_session.shutdown_ray()
    assert start.abandoned and ray_session.start_abandoned()
    assert os.environ[SESSION_ENV] == start.marker  # Ray's processes still to start must carry it

    class ExitedError(Exception):
        pass

    def _exit(status: int) -> None:
        raise ExitedError(status)

    monkeypatch.setattr(runner.os, "_exit", _exit)
    with pytest.raises(ExitedError) as exc:  # at once, not through the interpreter's teardown
        runner._exit(143)
    assert exc.value.args == (143,)


def test_without_an_abandoned_start_the_stage_exits_normally(no_session) -> None:
    with pytest.raises(SystemExit) as exc:
        runner._exit(143)
    assert exc.value.code == 143


def test_an_interrupted_wait_for_ray_abandons_the_start(no_session, monkeypatch) -> None:
    start = _RayStart(None, 1)

    class Interrupted(threading.Event):
        def wait(self, timeout=None):
            if timeout == ray_session.POLL_SECONDS:  # ensure_ray's wait: SIGTERM arrives
                raise Terminated(signal.SIGTERM)
            return False

    start.ready = Interrupted()

    def begin(address, driver_trains):
        ray_session._start = start
        return start

    monkeypatch.setattr(ray_session, "_begin_ray", begin)
    with pytest.raises(Terminated):
        ray_session.ensure_ray()
    assert start.abandoned and ray_session._start is None


@linux_only
def test_the_reaper_kills_only_its_session_once_released(no_session) -> None:
    start = _RayStart(None, 1)
    start.start_reaper()
    assert start.reaper is not None
    sleep = [sys.executable, "-c", "import time; time.sleep(120)"]
    marked = subprocess.Popen(sleep, env={**os.environ, SESSION_ENV: start.marker})
    other = subprocess.Popen(sleep, env={**os.environ, SESSION_ENV: "another-session"})
    try:
        time.sleep(0.3)
        assert marked.poll() is None  # nothing is killed while the driver holds the reaper
        start.reap()
        assert marked.wait(10) == -signal.SIGKILL
        assert other.poll() is None
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()


DRIVER = """
import subprocess, sys, time
from dpaudit.training.ray_session import SESSION_ENV, _RayStart

start = _RayStart(None, 1)
start.start_reaper()
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         env={SESSION_ENV: start.marker}, start_new_session=True)
print(child.pid, flush=True)
time.sleep(0.3)
import os
os._exit(0)  # dies without shutting anything down (as under SIGKILL)
"""


@linux_only
def test_the_reaper_kills_the_session_when_the_driver_dies(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop(SESSION_ENV, None)
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(DRIVER)], env=env, capture_output=True, text=True, timeout=60
    )
    orphan = int(out.stdout.split()[0])
    try:
        assert _gone(orphan), "the reaper left the dead driver's Ray process running"
    finally:
        if not _gone(orphan, 0.1):
            os.kill(orphan, signal.SIGKILL)
