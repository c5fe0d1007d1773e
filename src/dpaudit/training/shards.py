"""Runners: where the trials of :func:`dpaudit.training.dpsgd.train_trials` run.

:func:`run_trials` has the signature of ``train_trials`` and dispatches by the configured runner
(:class:`RunnerConfig`, the ``runner`` section of ``params.yaml``; :func:`using` sets it for a block):

- ``local`` (the default): one call of ``train_trials`` in this process. Ray is never imported.
- ``ray``: the chunks (:func:`dpaudit.training.dpsgd.chunk_layout`) are split into shards of
  ``shard_chunks`` whole chunks, kept in one queue by shard index. The driver never waits for Ray: a
  thread of the driver trains shards at once (``train_trials`` with ``chunks=range(first, last)``)
  while Ray starts in the background, and each Ray worker, once up (TensorFlow imported, the model
  fetched), pulls the next shard from the same queue; when the queue is empty the driver re-runs a
  shard still on Ray, the first to finish counting. A local Ray that is not running yet starts only
  once the process's sharded training (earlier calls, and this one as estimated from the driver's
  shards) reaches :data:`LOCAL_RAY_MIN_SECONDS` (on one machine Ray's start-up takes the driver's
  cores); a cluster to join starts at once. Every chunk keeps its global index, and with it its
  stateless random draws (per seed, chunk, step and slot), and sums over examples do not depend on
  the thread count, so the shards assembled by index are bit-identical to one call on the same
  machine type, whoever trained each. The arguments go into Ray's object store once per call (the
  model once per process, so that each worker unpickles it, and traces its step, once). A task whose
  worker dies or that raises is retried up to ``max_retries`` times; one bar shows all shards; the
  stage writes its outputs once, atomically (:func:`dpaudit.io.atomic_directory` in the stage
  runner).

Ray is started or joined once per process (:mod:`dpaudit.training.ray_session`); later calls reuse
it, and it is shut down at exit. ``address: null`` joins ``RAY_ADDRESS`` if set, else starts a
local Ray with one CPU fewer than the machine when the driver trains too (workers plus driver match
the cores); an address (``"auto"``, ``"ray://head:10001"``) connects to a running cluster, whose
workers must have ``dpaudit`` and its pinned dependencies installed. A Ray that the caller started
is used as it is and left running. Each task reserves ``threads_per_worker`` CPUs and runs
TensorFlow with that many intra-op threads (default 1).

Signals: once Ray is up the driver re-installs the process's Python handlers over Ray's C++ SIGTERM
handler, so a stage keeps its behaviour (:func:`dpaudit.io.handle_termination`: SIGTERM exits 143,
Ctrl-C 130, one line, partial outputs removed). On an interrupt Ray is shut down first, then the
driver's thread stops at its next block of steps; on a failed shard the rest are cancelled.

The runner is not a training parameter: it changes where trials run, not their results, so the
train stages in ``dvc.yaml`` do not list the ``runner`` keys and switching runners never retrains.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.config import from_mapping, require
from dpaudit.logs import progress
from dpaudit.training import ray_session
from dpaudit.training.ray_session import (
    POLL_SECONDS,
    RAY_NICENESS,
    _begin_ray,
    _cpus,
    _log_started,
    _model_ref,
    _quiet_stderr,
    _RayStart,
    _reraise_interrupt,
    _set_threads,
    _warm_worker,
    _worker_model,
    ensure_ray,
    shutdown_ray,
)

if TYPE_CHECKING:
    import numpy as np

    from dpaudit.training.dpsgd import DPSGDConfig, TrainResult
    from dpaudit.training.models import Model

__all__ = [
    "LOCAL_RAY_MIN_SECONDS",
    "POLL_SECONDS",
    "RAY_NICENESS",
    "RunnerConfig",
    "RunnerKind",
    "current",
    "ensure_ray",
    "last_shard_owners",
    "run_trials",
    "shard_ranges",
    "shutdown_ray",
    "using",
]

RunnerKind = Literal["local", "ray"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerConfig:
    """Where trials run: ``kind`` ``local`` (in this process) or ``ray`` (shards on Ray tasks).

    ``address``: Ray cluster address (None: start a local Ray). ``shard_chunks``: whole chunks of
    trials per shard (None: about four shards per CPU). ``max_retries``: retries of a failed or lost
    shard. ``threads_per_worker``: TensorFlow intra-op threads of each task (and the CPUs it
    reserves). ``driver_trains``: the driver process trains shards too, from the moment the call
    starts, while Ray starts (false: every shard waits for a Ray worker).
    """

    kind: RunnerKind = "local"
    address: str | None = None
    shard_chunks: int | None = None
    max_retries: int = 3
    threads_per_worker: int = 1
    driver_trains: bool = True

    def __post_init__(self) -> None:
        require(self.kind in ("local", "ray"), "kind", self.kind, "must be 'local' or 'ray'")
        require(self.shard_chunks is None or self.shard_chunks >= 1, "shard_chunks", self.shard_chunks,
                "must be null or at least 1")  # fmt: skip
        require(self.max_retries >= 0, "max_retries", self.max_retries, "must be at least 0")
        require(self.threads_per_worker >= 1, "threads_per_worker", self.threads_per_worker,
                "must be at least 1")  # fmt: skip
        require(self.address is None or self.kind == "ray", "address", self.address,
                "is only used with kind: ray")  # fmt: skip
        require(isinstance(self.driver_trains, bool), "driver_trains", self.driver_trains,
                "must be true or false")  # fmt: skip

    @classmethod
    def from_params(cls, params: Any) -> RunnerConfig:
        """Build and validate from the whole params mapping (its optional ``runner`` section)."""
        return from_mapping(cls, params.get("runner") or {}, "runner")


_current = RunnerConfig()


def current() -> RunnerConfig:
    """The runner that :func:`run_trials` uses now."""
    return _current


@contextlib.contextmanager
def using(config: RunnerConfig) -> Iterator[RunnerConfig]:
    """Make ``config`` the runner of :func:`run_trials` inside the block (restored afterwards)."""
    global _current
    previous, _current = _current, config
    try:
        yield config
    finally:
        _current = previous


def run_trials(
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: DPSGDConfig,
    seed: int = 0,
    **kwargs: Any,
) -> TrainResult:
    """:func:`~dpaudit.training.dpsgd.train_trials` on the configured runner (same arguments,
    same result; see the module docstring)."""
    from dpaudit.training.dpsgd import train_trials

    if _current.kind == "local":
        return train_trials(model, X, y, member_mask, cfg, seed, **kwargs)
    return _run_on_ray(_current, model, X, y, member_mask, cfg, seed, kwargs)


def _train_shard(
    model_ref: tuple[Any], args: tuple, chunks: range, threads: int
) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """One Ray task: ``train_trials`` on the chunks of one shard, with ``threads`` intra-op threads.

    ``model_ref`` wraps the model's reference in a tuple so that Ray passes it unresolved.
    """
    from dpaudit.training.dpsgd import train_trials

    _set_threads(threads)
    X, y, member_mask, cfg, seed, kwargs = args
    res = train_trials(_worker_model(model_ref[0]), X, y, member_mask, cfg, seed, **kwargs, chunks=chunks)
    return res.params, res.records


def shard_ranges(num_chunks: int, shard_chunks: int) -> list[range]:
    """Consecutive ranges of ``shard_chunks`` chunk indices covering ``0 … num_chunks − 1``."""
    return [range(lo, min(num_chunks, lo + shard_chunks)) for lo in range(0, num_chunks, shard_chunks)]


#: Who trained each shard of the last Ray-sharded call in this process ("driver" or "ray"), by shard.
last_shard_owners: list[str] = []


_current_queue: _Queue | None = None  # the queue of the call under way (or the last one)


class _Queue:
    """The shards of one call: claimed by index by the driver and by Ray workers, results stored by
    index (the first to finish a shard wins; a shard re-run by the driver gives the same bits)."""

    def __init__(self, ranges: list[range]) -> None:
        self.ranges = ranges
        self.lock = threading.Lock()
        self.next = 0
        self.results: dict[int, tuple[list[np.ndarray], dict[str, np.ndarray]]] = {}
        self.owners: dict[int, str] = {}
        self.on_ray: set[int] = set()
        self.rerun: set[int] = set()
        self.error: BaseException | None = None

    def claim(self, for_ray: bool = False) -> int | None:
        """The next unclaimed shard (None: all claimed)."""
        with self.lock:
            if self.next >= len(self.ranges):
                return None
            self.next += 1
            if for_ray:
                self.on_ray.add(self.next - 1)
            return self.next - 1

    def steal(self) -> int | None:
        """For an idle driver: the last shard claimed by Ray that is not done (and not re-run yet)."""
        with self.lock:
            open_ = sorted(i for i in self.on_ray if i not in self.results and i not in self.rerun)
            if not open_:
                return None
            self.rerun.add(open_[-1])
            return open_[-1]

    def finish(self, i: int, owner: str, result: tuple) -> bool:
        """Store shard ``i``'s result unless another trainer was first; whether it was stored."""
        with self.lock:
            if i in self.results:
                return False
            self.results[i], self.owners[i] = result, owner
            return True

    def unclaimed(self) -> int:
        """Shards nobody has claimed yet."""
        with self.lock:
            return len(self.ranges) - self.next

    def done(self, i: int) -> bool:
        with self.lock:
            return i in self.results

    def complete(self) -> bool:
        with self.lock:
            return len(self.results) == len(self.ranges)


def _drive(
    queue: _Queue, stop: threading.Event, train: Callable[..., Any], args: tuple, kwargs: dict
) -> None:
    """The driver's thread: claim shards and train them here until the queue is empty, then re-run
    shards still on Ray; stops between blocks of steps when ``stop`` is set."""
    from dpaudit.training.dpsgd import TrainingStoppedError

    model, X, y, mask, cfg, seed = args
    try:
        while not stop.is_set():
            i = queue.claim()
            if i is None:
                i = queue.steal()
            if i is None:
                return

            def halt(i: int = i) -> bool:
                return stop.is_set() or queue.done(i)

            try:
                res = train(model, X, y, mask, cfg, seed, **kwargs, chunks=queue.ranges[i], stop=halt,
                            progress_bar=False)  # fmt: skip
            except TrainingStoppedError:
                continue  # stopped, or Ray finished the shard first
            queue.finish(i, "driver", (res.params, res.records))
    except BaseException as exc:  # re-raised by the coordinator in the main thread
        queue.error = exc


def _default_shard_chunks(num_chunks: int, start: _RayStart | None, deferred: bool) -> int:
    """About four shards per CPU of the cluster if it is up, else of this machine (a local Ray, started
    or deferred) or 1024 shards at most (a cluster still being joined), so that the driver and the
    workers balance their loads."""
    if deferred:
        return max(1, math.ceil(num_chunks / (4 * _cpus())))
    import ray

    if start is None or start.up():
        cpus = int(ray.cluster_resources().get("CPU", 1)) + 1
    elif start.num_cpus is not None:
        cpus = start.num_cpus + 1
    else:
        return max(1, math.ceil(num_chunks / 1024))
    return max(1, math.ceil(num_chunks / (4 * cpus)))


#: Seconds of sharded training in this process (earlier calls, this one so far and its rest as
#: estimated from the driver's shards) from which a local Ray is started. Ray's start-up until a
#: worker helps costs the driver 3–5 s of its cores on two (its processes, TensorFlow imported by
#: each worker); below 60 s that could exceed the 1.2× budget, and the driver alone is as fast as
#: the local run.
LOCAL_RAY_MIN_SECONDS = 60.0
_driver_seconds = 0.0  # sharded training seconds of the calls before this one (deferred local Ray)


def _local_ray_not_running(address: str | None) -> bool:
    """Whether a sharded call would start a local Ray (none running or starting in this process)."""
    if address is not None or os.environ.get("RAY_ADDRESS") or ray_session._start is not None:
        return False
    ray = sys.modules.get("ray")
    return ray is None or not ray.is_initialized()


def _submitter(
    runner: RunnerConfig,
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: DPSGDConfig,
    seed: int,
    kwargs: dict[str, Any],
) -> Callable[[range | None], Any]:
    """A function submitting one Ray task: a shard's training (its chunk range) or, for None, a
    worker warm-up (:func:`_warm_worker`). The arguments go into the object store once."""
    import ray

    threads = runner.threads_per_worker
    env = {
        "DPAUDIT_PROGRESS": "0",
        "TF_NUM_INTRAOP_THREADS": str(threads),
        "TF_NUM_INTEROP_THREADS": str(threads),
        "OMP_NUM_THREADS": str(threads),
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
    }
    options: dict[str, Any] = {
        "num_cpus": threads,
        "runtime_env": {"env_vars": env},
        "max_retries": runner.max_retries,
    }
    warm = ray.remote(_warm_worker).options(**options)
    task = ray.remote(_train_shard).options(**options, retry_exceptions=True)
    model_ref = (_model_ref(model),)
    args = ray.put((X, y, member_mask, cfg, seed, kwargs))

    def submit(chunks: range | None) -> Any:
        if chunks is None:
            return warm.remote(model_ref, threads)
        return task.remote(model_ref, args, chunks, threads)

    return submit


def _run_on_ray(
    runner: RunnerConfig,
    model: Model,
    X: np.ndarray,
    y: np.ndarray,
    member_mask: np.ndarray,
    cfg: DPSGDConfig,
    seed: int,
    kwargs: dict[str, Any],
) -> TrainResult:
    """Shards of whole chunks trained by the driver and by Ray workers from one queue, assembled in
    shard (chunk) order."""
    import numpy as np

    from dpaudit.training import dpsgd

    desc = kwargs.pop("desc", "train trials")
    for key in ("chunks", "stop", "progress_bar"):
        if key in kwargs:
            raise ValueError(f"run_trials sets {key!r} itself; call train_trials to pick chunks")
    layout = {k: kwargs[k] for k in dpsgd.LAYOUT_KEYWORDS if k in kwargs}
    size, num_chunks = dpsgd.chunk_layout(model, member_mask, cfg, **layout)
    T = len(member_mask)
    # A local Ray that is not running yet starts only once this process's sharded training (with
    # this call's rest estimated from the driver's shards) is long enough to pay for it (on one
    # machine its start-up takes the driver's cores); a cluster to join, or a running Ray, at once.
    deferred = runner.driver_trains and _local_ray_not_running(runner.address)
    start = None if deferred else _begin_ray(runner.address, runner.driver_trains)
    chunks_per_shard = runner.shard_chunks or _default_shard_chunks(num_chunks, start, deferred)
    queue = _Queue(shard_ranges(num_chunks, chunks_per_shard))
    began = time.monotonic()
    global _current_queue, _driver_seconds
    _current_queue = queue
    trial_steps = [(min(T, r.stop * size) - min(T, r.start * size)) * cfg.steps for r in queue.ranges]
    ray_session._last_signal = None
    stop = threading.Event()
    driver = None
    if runner.driver_trains:
        problem = (model, X, y, member_mask, cfg, seed)
        driver = threading.Thread(target=_drive, args=(queue, stop, dpsgd.train_trials, problem, kwargs),
                                  name="dpaudit-driver-shards", daemon=True)  # fmt: skip
        driver.start()
    ray: Any = None
    submit: Callable[[range | None], Any] | None = None
    ray_checked = False  # whether Ray's start was looked at (once it is up or failed)
    refs: dict[Any, int | None] = {}  # in flight on Ray: shard index, or None for a warm-up
    reported: set[int] = set()
    bar = progress(desc=desc, total=T * cfg.steps, unit="trial-step")
    try:
        while not queue.complete():
            if queue.error is not None:
                raise queue.error
            if deferred and queue.results and queue.unclaimed():
                spent = time.monotonic() - began
                left = spent / len(queue.results) * (len(queue.ranges) - len(queue.results))
                if _driver_seconds + spent + left >= LOCAL_RAY_MIN_SECONDS:
                    deferred = False
                    start = _begin_ray(runner.address, runner.driver_trains)
            if not deferred and not ray_checked and (start is None or start.ready.is_set()):
                ray_checked = True
                if start is not None:
                    start.restore_handlers()
                if start is not None and start.error is not None:
                    if driver is None:
                        raise start.error
                    log.warning("runner: Ray did not start (%s); the driver trains every shard", start.error)
                elif queue.unclaimed():
                    import ray

                    if start is not None:
                        _log_started(start)
                    submit = _submitter(runner, model, X, y, member_mask, cfg, seed, kwargs)
                    workers = max(1, int(ray.cluster_resources().get("CPU", 1)) // runner.threads_per_worker)
                    refs = {submit(None): None for _ in range(min(workers, queue.unclaimed()))}
            if refs:
                finished, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
                for ref in finished:
                    i = refs.pop(ref)
                    if i is not None and not queue.done(i):
                        try:
                            queue.finish(i, "ray", ray.get(ref))
                        except Exception:  # failed after its retries: fatal unless re-run by the driver
                            if not queue.done(i):
                                raise
                    j = queue.claim(for_ray=True)  # this worker is up and free: its next shard
                    if j is not None and submit is not None:
                        refs[submit(queue.ranges[j])] = j
                for ref, i in list(refs.items()):  # shards the driver re-ran and finished first
                    if i is not None and queue.owners.get(i) == "driver":
                        del refs[ref]
                        with contextlib.suppress(Exception):
                            ray.cancel(ref)
            for i in sorted(set(queue.results) - reported):
                reported.add(i)
                bar.update(trial_steps[i])
            if driver is not None and not driver.is_alive() and not refs and queue.error is None:
                missing = sorted(set(range(len(queue.ranges))) - set(queue.results))
                if missing:
                    raise RuntimeError(f"sharded training: shards {missing} were claimed but never trained")
            time.sleep(POLL_SECONDS)
    except BaseException as exc:
        stop.set()
        interrupted = isinstance(exc, KeyboardInterrupt)
        # A signal sent to the whole process group (Ctrl-C, ``timeout``) also stops Ray's own
        # processes; what Ray then prints about lost workers is noise (it is in Ray's log files).
        # On an interrupt Ray goes first: once its raylet is gone (a signal to the process group),
        # Ray's core worker in this process would end the process with status 1.
        with _quiet_stderr() if interrupted else contextlib.nullcontext():
            if interrupted:
                shutdown_ray()
            else:
                for ref in refs:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
            if driver is not None:
                driver.join(timeout=60)
        if interrupted:
            interrupt = _reraise_interrupt(exc)
            if interrupt is not exc:
                raise interrupt from None
        raise
    finally:
        stop.set()
        bar.close()
    _driver_seconds += time.monotonic() - began
    last_shard_owners[:] = [queue.owners[i] for i in range(len(queue.ranges))]
    parts = [queue.results[i] for i in range(len(queue.ranges))]
    params = [np.concatenate([p[i] for p, _ in parts], axis=0) for i in range(len(model.param_shapes))]
    keys = parts[0][1].keys() if parts else ()
    records = {k: np.concatenate([r[k] for _, r in parts], axis=0) for k in keys}
    return dpsgd.TrainResult(params=params, records=records, config=cfg)
