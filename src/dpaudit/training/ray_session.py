"""Ray's life in this process: started or joined once (in the background, by a thread that stays
alive while Ray runs), the driver's signal handlers re-installed over Ray's, and shut down at exit.
Also the models put into Ray's object store once per session and fetched once per worker."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
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
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     logging_level=logging.WARNING, **extra)  # fmt: skip
        except BaseException as exc:  # reported to the caller by wait()/the coordinator
            self.error = exc
        with self.lock:
            self.ready.set()
            abandoned = self.abandoned
        if abandoned and self.error is None:  # shut down while starting: nobody uses this Ray
            ray.shutdown()
            return
        self.release.wait()

    def up(self) -> bool:
        """Whether Ray is up (False while starting or after a failed start)."""
        return self.ready.is_set() and self.error is None

    def restore_handlers(self) -> None:
        """Re-install the process's Python signal handlers over Ray's C++ one (main thread only;
        once), wrapped to note which signal arrived (see :func:`_reraise_interrupt`)."""
        if self.handlers_restored or threading.current_thread() is not threading.main_thread():
            return
        self.handlers_restored = True
        for signum in _HANDLED_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not None:
                signal.signal(signum, _recording(handler) if callable(handler) else handler)


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
    _start.thread.start()
    if not _atexit_registered:
        atexit.register(shutdown_ray)
        _atexit_registered = True
    return _start


def ensure_ray(address: str | None = None, driver_trains: bool = True) -> None:
    """Start or join Ray once per process and wait until it is up; later calls reuse it (see the
    module docstring).

    ``address``: None starts a local Ray (or joins ``RAY_ADDRESS`` if that is set); otherwise the
    cluster to join. Ray is shut down at process exit (:func:`shutdown_ray`). The process's signal
    handlers are re-installed once Ray is up, since Ray installs its own SIGTERM handler.
    """
    start = _begin_ray(address, driver_trains)
    if start is None:
        return
    while not start.ready.wait(POLL_SECONDS):  # a short wait, so that signal handlers run
        pass
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

    A local Ray stops with its workers; a joined cluster is only disconnected from. A start still
    under way is waited for up to ``wait`` seconds, else left to shut itself down when it finishes
    (at process exit its processes end with the process). Registered to run at process exit.
    """
    global _start
    start, _start = _start, None
    if start is None:
        return
    _model_refs.clear()
    start.ready.wait(wait)
    with start.lock:
        if not start.ready.is_set():
            start.abandoned = True
            return
    ray = sys.modules.get("ray")
    if start.error is None and ray is not None and ray.is_initialized():
        ray.shutdown()
    start.release.set()


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
