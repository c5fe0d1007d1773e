"""Ray's life in this process: started or joined once (in the background, by a thread that stays
alive while Ray runs), the driver's signal handlers kept over Ray's, and shut down at exit.
Also the models put into Ray's object store once per session and fetched once per worker.

Signals. Ray's C++ core, once its driver connects, installs a crash handler (Abseil's) for SIGTERM
that prints a stack, forwards the signal and arms a 3 s alarm that aborts the process: a SIGTERM
while Ray was starting ended the stage with SIGABRT mid-cleanup. The driver keeps Ray from
installing it (:func:`_no_ray_crash_handler`, which also keeps Ray's shutdown from resetting SIGTERM
to its default), and re-installs its Python handlers once Ray is up and again once it is shut down.

Teardown. Every process of a local Ray started here (GCS, raylet, agents, workers) inherits the
environment variable :data:`SESSION_ENV`, unique to the start, and a small reaper process (started
with Ray, in a session of its own) kills what carries it once the driver has shut Ray down or has
died: Ray's shutdown, or the driver's death, left Ray's agents running for minutes. Ray's processes
cannot be killed from the driver while its start is under way: its C++ core then ends the process with
status 1. So an interrupted start is abandoned, the stage exits at once (:func:`start_abandoned`), and
the reaper stops the rest.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from dpaudit.io import Terminated

if TYPE_CHECKING:
    from dpaudit.training.models import Model

log = logging.getLogger("dpaudit.training.shards")

#: Seconds between polls of the shards. The driver sleeps in Python between polls, so a signal's
#: handler runs at once (inside ``ray.wait`` Ray checks for signals only once a second).
POLL_SECONDS = 0.05
_HANDLED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
# The last of those signals received since handlers were wrapped after Ray started. Ray's waits turn
# any KeyboardInterrupt raised by a handler into a plain one, losing which signal it was.
_last_signal: int | None = None
#: Environment variable that marks the processes of a local Ray started by this process (its value
#: unique to the start): they inherit it from the driver, so they can be found and stopped by it.
SESSION_ENV = "DPAUDIT_RAY_SESSION"
#: Seconds that the reaper spends at most killing a local Ray's processes (a dying raylet may still
#: start one).
SWEEP_SECONDS = 5.0
# The reaper (stdlib only, run by this interpreter): at end of file on its stdin (the driver closed
# it after shutting Ray down, or died), SIGKILL every process whose environment holds argv[1]
# (``SESSION_ENV=marker``) until none is left. A zombie's environment reads empty.
_REAPER = r"""
import os, signal, sys, time
entry, seconds = sys.argv[1].encode(), float(sys.argv[2])
sys.stdin.buffer.read()
deadline = time.monotonic() + seconds
while True:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    if entry in handle.read().split(b"\0"):
                        found.append(int(name))
            except OSError:
                pass
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if not found or time.monotonic() > deadline:
        break
    time.sleep(0.05)
"""
# Ray's flag (in its C++ core) that its crash handler is installed: set, Ray skips installing it,
# and clear, Ray's shutdown skips resetting SIGTERM, SIGABRT, SIGSEGV to their defaults.
_RAY_CRASH_HANDLER_FLAG = "_ZN3ray6RayLog36is_failure_signal_handler_installed_E"
#: Niceness of a local Ray started beside a driver that trains (its processes and workers): on one
#: machine the driver's shards come first, and Ray's workers use the cores the driver leaves idle.
RAY_NICENESS = 10


# Driver side: each model's object-store reference, put once per Ray session (the model is kept so
# that its id is not reused), by id. Worker side: the models fetched by this worker, by reference.
_model_refs: OrderedDict[int, tuple[Model, Any, str]] = OrderedDict()
_worker_models: OrderedDict[str, Model] = OrderedDict()
_MODELS_KEPT = 8


def _model_ref(model: Model) -> Any:
    """``model`` in Ray's object store, put once per model and Ray session (see :func:`_worker_model`)."""
    import ray

    session = ray.get_runtime_context().get_node_id()
    entry = _model_refs.get(id(model))
    if entry is None or entry[2] != session:
        entry = _model_refs[id(model)] = (model, ray.put(model), session)
        while len(_model_refs) > _MODELS_KEPT:
            _model_refs.popitem(last=False)
    _model_refs.move_to_end(id(model))
    return entry[1]


def _worker_model(model_ref: Any) -> Model:
    """The model behind ``model_ref``, one object per worker process.

    The trainer caches its compiled step by model object (:func:`dpaudit.training.dpsgd`), so
    unpickling the model anew for every task would retrace it (0.9–1.8 s) in every call of a stage
    on every worker, where one local process traces once.
    """
    import ray

    key = model_ref.hex()
    model = _worker_models.get(key)
    if model is None:
        model = _worker_models[key] = ray.get(model_ref)
        while len(_worker_models) > _MODELS_KEPT:
            _worker_models.popitem(last=False)
    _worker_models.move_to_end(key)
    return model


def _cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class _SigtermNotSetFilter(logging.Filter):
    """Drops Ray's warning that it set no SIGTERM handler from a background thread (intended here)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("SIGTERM handler is not set")


class _RayStart:
    """One start (or join) of Ray, in a background thread that then stays alive, idle, until Ray is
    shut down: Ray's own processes are killed when the thread that started them ends."""

    def __init__(self, address: str | None, num_cpus: int | None, yield_cpu: bool = False) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.yield_cpu = yield_cpu
        # The marker of a local Ray's processes (see SESSION_ENV); None when joining a cluster.
        self.marker = None if num_cpus is None else f"{os.getpid()}-{uuid.uuid4().hex}"
        self.previous_handlers: dict[int, Any] = {}
        self.reaper: subprocess.Popen[bytes] | None = None
        self.ready = threading.Event()
        self.release = threading.Event()
        self.error: BaseException | None = None
        self.handlers_restored = False
        self.lock = threading.Lock()
        self.abandoned = False
        self.thread = threading.Thread(target=self._run, name="dpaudit-ray-start", daemon=True)

    def _run(self) -> None:
        import ray

        extra = {} if self.num_cpus is None else {"num_cpus": self.num_cpus}
        if self.num_cpus is not None and self.yield_cpu:
            # A local Ray beside a training driver: its processes (started from this thread, whose
            # niceness they inherit) get the CPU the driver leaves, so that starting Ray does not
            # slow the driver's shards down.
            with contextlib.suppress(AttributeError, OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), RAY_NICENESS)
        try:
            with _no_ray_crash_handler():
                ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                         logging_level=logging.WARNING, **extra)  # fmt: skip
        except BaseException as exc:  # reported to the caller by wait()/the coordinator
            self.error = exc
        with self.lock:
            self.ready.set()
            abandoned = self.abandoned
        if abandoned:  # shut down while starting: nobody uses this Ray
            if ray.is_initialized():
                ray.shutdown()
            self.reap(wait=False)
            return
        self.release.wait()

    def start_reaper(self) -> None:
        """Start the reaper of this local Ray's processes (Linux; see :data:`_REAPER`)."""
        if self.marker is None or not sys.platform.startswith("linux"):
            return
        env = {k: v for k, v in os.environ.items() if k != SESSION_ENV}
        try:
            entry = f"{SESSION_ENV}={self.marker}"
            self.reaper = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _REAPER, entry, str(SWEEP_SECONDS)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                start_new_session=True,  # out of reach of a signal to the stage's process group
            )  # fmt: skip
        except OSError as exc:
            log.debug("runner: no reaper for the local Ray (%s)", exc)

    def reap(self, wait: bool = True) -> None:
        """Let the reaper kill what is left of this local Ray (only once Ray is shut down or never
        came up: killing the raylet under a connected driver ends the driver) and, with ``wait``,
        wait for it to finish."""
        reaper, self.reaper = self.reaper, None
        if reaper is None:
            return
        with contextlib.suppress(OSError):
            reaper.stdin.close()  # type: ignore[union-attr]
        if wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                reaper.wait(SWEEP_SECONDS + 5)

    def up(self) -> bool:
        """Whether Ray is up (False while starting or after a failed start)."""
        return self.ready.is_set() and self.error is None

    def restore_handlers(self) -> None:
        """Re-install the process's Python signal handlers over Ray's C++ one (main thread only;
        once), wrapped to note which signal arrived (see :func:`_reraise_interrupt`)."""
        if self.handlers_restored or threading.current_thread() is not threading.main_thread():
            return
        self.handlers_restored = True
        _forget_marker(self)
        for signum in _HANDLED_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not None:
                self.previous_handlers[signum] = handler
                signal.signal(signum, _recording(handler) if callable(handler) else handler)

    def put_back_handlers(self) -> None:
        """Re-install the Python handlers that :meth:`restore_handlers` wrapped (main thread only),
        also at the C level, where Ray's shutdown may have reset SIGTERM to its default."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, handler in self.previous_handlers.items():
            current = signal.getsignal(signum)
            wrapped = getattr(current, "_dpaudit_recording", False)
            with contextlib.suppress(OSError, ValueError):
                signal.signal(signum, handler if wrapped else current)
        self.previous_handlers.clear()


_start: _RayStart | None = None
_atexit_registered = False
logging.getLogger("ray._private.worker").addFilter(_SigtermNotSetFilter())


def _begin_ray(address: str | None, driver_trains: bool = True) -> _RayStart | None:
    """Start or join Ray in the background unless this process already did (then that start, which
    may still be under way); None when a Ray that the caller started is running (used as it is)."""
    import ray

    global _start, _atexit_registered
    if _start is not None:
        if _start.address != address:
            raise ValueError(
                f"runner.address {address!r}: this process already uses the Ray joined with "
                f"address {_start.address!r}; one process uses one Ray"
            )
        if _start.ready.is_set() and _start.error is not None:  # a failed start: try again
            _start.release.set()
            if not ray.is_initialized():  # what it started before it failed (no driver connected)
                _start.reap()
            _start = None
        else:
            return _start
    if ray.is_initialized():
        return None
    num_cpus = None
    if address is None and not os.environ.get("RAY_ADDRESS"):
        # Ray starts workers at niceness 15; on a shared machine that starves the shards.
        os.environ.setdefault("RAY_worker_niceness", "0")
        num_cpus = max(1, _cpus() - (1 if driver_trains else 0))
    _start = _RayStart(address, num_cpus, yield_cpu=driver_trains)
    if _start.marker is not None:  # inherited by every process of the local Ray (see SESSION_ENV)
        os.environ[SESSION_ENV] = _start.marker
        _start.start_reaper()
    _start.thread.start()
    if not _atexit_registered:
        atexit.register(shutdown_ray)
        _atexit_registered = True
    return _start


def ensure_ray(address: str | None = None, driver_trains: bool = True) -> None:
    """Start or join Ray once per process and wait until it is up; later calls reuse it (see the
    module docstring).

    ``address``: None starts a local Ray (or joins ``RAY_ADDRESS`` if that is set); otherwise the
    cluster to join. Ray is shut down at process exit (:func:`shutdown_ray`), and at once when the
    wait is interrupted. The process's signal handlers are re-installed once Ray is up.
    """
    start = _begin_ray(address, driver_trains)
    if start is None:
        return
    try:
        while not start.ready.wait(POLL_SECONDS):  # a short wait, so that signal handlers run
            pass
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while Ray starts: abandon the start
        shutdown_ray()
        raise
    start.restore_handlers()
    if start.error is not None:
        raise start.error
    _log_started(start)


def _log_started(start: _RayStart) -> None:
    import ray

    cpus = int(ray.cluster_resources().get("CPU", 0))
    where = (
        "started a local Ray"
        if start.num_cpus is not None
        else f"joined Ray at {start.address or os.environ.get('RAY_ADDRESS')}"
    )
    log.info("runner: %s (%d CPUs); reused by every sharded training of this process", where, cpus)


def _recording(handler: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
    """``handler``, after noting the signal in ``_last_signal`` (see :func:`_reraise_interrupt`)."""
    if getattr(handler, "_dpaudit_recording", False):
        return handler

    def record(signum: int, frame: FrameType | None) -> Any:
        global _last_signal
        _last_signal = signum
        return handler(signum, frame)

    record._dpaudit_recording = True  # type: ignore[attr-defined]
    return record


def _reraise_interrupt(exc: KeyboardInterrupt) -> KeyboardInterrupt:
    """The interrupt to propagate: a :class:`Terminated` for the signal that caused ``exc``.

    Ray's waits raise a plain KeyboardInterrupt whatever the handler raised, so SIGTERM would
    otherwise exit like Ctrl-C (130 instead of 143).
    """
    if isinstance(exc, Terminated) or _last_signal in (None, signal.SIGINT):
        return exc
    return Terminated(_last_signal)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 (where Ray's C++ core writes) to ``/dev/null`` inside the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def shutdown_ray(wait: float = 0.0) -> None:
    """Shut down the Ray that this process started or joined (a no-op otherwise).

    A local Ray stops with its workers, and its reaper kills any of its processes left behind (see
    :data:`SESSION_ENV`); a joined cluster is only disconnected from. A start still under way is
    waited for up to ``wait`` seconds, else abandoned: it shuts itself down if it comes up, and the
    reaper kills its processes when this process exits (:func:`start_abandoned`). The process's
    Python signal handlers are back in place afterwards. Registered to run at process exit.
    """
    global _start, _abandoned
    start, _start = _start, None
    if start is None:
        return
    _model_refs.clear()
    start.ready.wait(wait)
    with start.lock:
        if not start.ready.is_set():
            # Its marker stays in the environment: Ray's processes still to start must carry it.
            start.abandoned = _abandoned = True
            return
    try:
        ray = sys.modules.get("ray")
        if start.error is None and ray is not None and ray.is_initialized():
            ray.shutdown()
    finally:
        start.release.set()
        _forget_marker(start)
        start.reap()
        start.put_back_handlers()


_abandoned = False


def start_abandoned() -> bool:
    """Whether this process abandoned a start of Ray still under way (see :func:`shutdown_ray`).

    Its thread may then be inside Ray's C++ core, which can end the process (status 1, or an abort)
    while the interpreter tears down; a stage that is exiting should end with ``os._exit``.
    """
    return _abandoned


def _forget_marker(start: _RayStart) -> None:
    """Drop ``start``'s marker from this process's environment, so that no later child carries it."""
    if start.marker is not None and os.environ.get(SESSION_ENV) == start.marker:
        del os.environ[SESSION_ENV]


@contextlib.contextmanager
def _no_ray_crash_handler() -> Iterator[None]:
    """Keep Ray's C++ core from installing its crash handler in this process inside the block.

    That handler takes SIGTERM from the driver's Python one: on SIGTERM it prints a C++ stack,
    forwards the signal and arms a 3 s alarm that aborts the process, so a stage cleaning up after
    SIGTERM ended with SIGABRT. Clear again after the block, Ray's shutdown leaves the signals alone.
    Without the flag (another Ray build) the main thread's handlers are re-installed once Ray is up.
    """
    flag = _ray_crash_handler_flag()
    if flag is None:
        yield
        return
    previous = flag.value
    flag.value = True
    try:
        yield
    finally:
        flag.value = previous


def _ray_crash_handler_flag() -> Any:
    """Ray's C++ flag that its crash handler is installed (a ``ctypes.c_bool``), or None if absent."""
    import ctypes

    try:
        import ray._raylet

        return ctypes.c_bool.in_dll(ctypes.CDLL(ray._raylet.__file__), _RAY_CRASH_HANDLER_FLAG)
    except (ImportError, OSError, ValueError, AttributeError) as exc:
        log.debug("runner: Ray's crash-handler flag not found (%s); handlers restored after start", exc)
        return None


def _set_threads(threads: int) -> None:
    """TensorFlow's intra- and inter-op threads of this worker process (once; later calls no-ops)."""
    import tensorflow as tf

    with contextlib.suppress(RuntimeError):  # already set in a reused worker process
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def _warm_worker(model_ref: tuple[Any], threads: int) -> int:
    """One Ray task that readies a worker process (TensorFlow and the trainer imported, the model
    fetched) before it is given a shard, so that no shard waits on a worker that is still starting
    while the driver could train it. Returns the worker's process id."""
    _set_threads(threads)
    import dpaudit.training.dpsgd  # noqa: F401  (the import is the warm-up)

    _worker_model(model_ref[0])
    return os.getpid()
