"""Runners: where the trials of :func:`dpaudit.training.dpsgd.train_trials` run.

:func:`run_trials` has the signature of ``train_trials`` and dispatches by the configured runner
(:class:`RunnerConfig`, the ``runner`` section of ``params.yaml``; :func:`using` sets it for a
block, as the train stage does):

- ``local`` (the default): one call of ``train_trials`` in this process. Ray is never imported.
- ``ray``: the trials' chunks (:func:`dpaudit.training.dpsgd.chunk_layout`) are split into shards
  of ``shard_chunks`` whole chunks; each shard is one Ray task that calls ``train_trials`` with the
  arguments of the whole run and ``chunks=range(first, last)``. Every chunk keeps its global index,
  and with it its stateless random draws (``_seed`` of the trainer: per seed, chunk, step and
  slot), and sums over examples do not depend on the thread count, so the shards concatenated in
  chunk order are bit-identical to one call on the same machine type. The arguments are put into
  Ray's object store once per call (``ray.put``; the model once per process, so that each worker
  unpickles it, and traces its step, once) and shared by every task. A task whose worker dies or that
  raises is retried up to ``max_retries`` times (``retry_exceptions=True``); progress of all
  shards goes into one bar; the merged result is returned to the caller, and the stage writes its
  outputs once, atomically (:func:`dpaudit.io.atomic_directory` in the stage runner).

Ray is started or joined once per process (:func:`ensure_ray`): the first Ray-sharded call does it,
later calls (a train stage makes several, one per group of settings) reuse it, and it is shut down
when the process exits. ``address: null`` joins the cluster named by the ``RAY_ADDRESS`` environment
variable if set, else starts a local Ray on this machine; an address (``"auto"``,
``"ray://head:10001"``, ``"10.0.0.1:6379"``) connects to a running cluster, whose workers must have
``dpaudit`` and its pinned dependencies installed. A Ray that the caller started itself is used as
it is and left running. Each task reserves one CPU and runs TensorFlow with ``threads_per_worker``
intra-op threads, so workers on one node do not oversubscribe its cores.

Signals: ``ray.init`` replaces the process's SIGTERM handler (with Ray's C++ failure handler,
which prints a stack trace and aborts); :func:`ensure_ray` puts back the handlers that were set
before, so a stage keeps its behaviour (:func:`dpaudit.io.handle_termination`: SIGTERM exits 143,
Ctrl-C 130, one line, partial outputs removed). On an interrupt or a failed shard the remaining
shards are cancelled, and on an interrupt Ray is shut down before the exception propagates.

The runner is not a training parameter: it changes where trials run, not their results, so the
train stages in ``dvc.yaml`` do not list the ``runner`` keys and switching runners never retrains.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.config import from_mapping, require
from dpaudit.io import Terminated
from dpaudit.logs import progress

if TYPE_CHECKING:
    import numpy as np

    from dpaudit.training.dpsgd import DPSGDConfig, TrainResult
    from dpaudit.training.models import Model

RunnerKind = Literal["local", "ray"]

log = logging.getLogger(__name__)

#: Seconds between polls of the shards. The driver sleeps in Python between polls, so a signal's
#: handler runs at once (inside ``ray.wait`` Ray checks for signals only once a second).
POLL_SECONDS = 0.1
_HANDLED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
# The last of those signals received since handlers were wrapped by ensure_ray. Ray's waits turn any
# KeyboardInterrupt raised by a handler into a plain one, losing which signal it was.
_last_signal: int | None = None
_NOT_JOINED = object()
# The ``address`` argument of the ensure_ray call that started or joined Ray in this process
# (_NOT_JOINED: none did; Ray may still have been started by the caller, who then owns it).
_joined: object = _NOT_JOINED


@dataclass(frozen=True)
class RunnerConfig:
    """Where trials run: ``kind`` ``local`` (in this process) or ``ray`` (shards on Ray tasks).

    ``address``: Ray cluster address (None: start a local Ray). ``shard_chunks``: whole chunks of
    trials per Ray task (None: the chunks split evenly over the cluster's CPUs, one shard each).
    ``max_retries``: retries of a failed or lost shard. ``threads_per_worker``: TensorFlow intra-op
    threads of each task (and the CPUs it reserves).
    """

    kind: RunnerKind = "local"
    address: str | None = None
    shard_chunks: int | None = None
    max_retries: int = 3
    threads_per_worker: int = 1

    def __post_init__(self) -> None:
        require(self.kind in ("local", "ray"), "kind", self.kind, "must be 'local' or 'ray'")
        require(self.shard_chunks is None or self.shard_chunks >= 1, "shard_chunks", self.shard_chunks,
                "must be null or at least 1")  # fmt: skip
        require(self.max_retries >= 0, "max_retries", self.max_retries, "must be at least 0")
        require(self.threads_per_worker >= 1, "threads_per_worker", self.threads_per_worker,
                "must be at least 1")  # fmt: skip
        require(self.address is None or self.kind == "ray", "address", self.address,
                "is only used with kind: ray")  # fmt: skip

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


def _train_shard(
    model_ref: tuple[Any], args: tuple, chunks: range, threads: int
) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """One Ray task: ``train_trials`` on the chunks of one shard, with ``threads`` intra-op threads.

    ``model_ref`` wraps the model's reference in a tuple so that Ray passes it unresolved.
    """
    import tensorflow as tf

    from dpaudit.training.dpsgd import train_trials

    with contextlib.suppress(RuntimeError):  # already set in a reused worker process
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    X, y, member_mask, cfg, seed, kwargs = args
    res = train_trials(_worker_model(model_ref[0]), X, y, member_mask, cfg, seed, **kwargs, chunks=chunks)
    return res.params, res.records


def shard_ranges(num_chunks: int, shard_chunks: int) -> list[range]:
    """Consecutive ranges of ``shard_chunks`` chunk indices covering ``0 … num_chunks − 1``."""
    return [range(lo, min(num_chunks, lo + shard_chunks)) for lo in range(0, num_chunks, shard_chunks)]


def ensure_ray(address: str | None = None) -> None:
    """Start or join Ray once per process; later calls reuse it (see the module docstring).

    ``address``: None starts a local Ray (or joins ``RAY_ADDRESS`` if that is set); otherwise the
    cluster to join. Ray is shut down at process exit (:func:`shutdown_ray`). The signal handlers
    set before ``ray.init`` are restored after it, since Ray replaces SIGTERM's.
    """
    import ray

    global _joined
    if ray.is_initialized():
        if _joined is not _NOT_JOINED and _joined != address:
            raise ValueError(
                f"runner.address {address!r}: this process already uses the Ray joined with "
                f"address {_joined!r}; one process uses one Ray"
            )
        return
    local = address is None and not os.environ.get("RAY_ADDRESS")
    if local:
        # Ray starts workers at niceness 15; on a shared machine that starves the shards.
        os.environ.setdefault("RAY_worker_niceness", "0")
    main = threading.current_thread() is threading.main_thread()
    handlers = {s: signal.getsignal(s) for s in _HANDLED_SIGNALS} if main else {}
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)  # fmt: skip
    except SystemExit as exc:
        # Ray's own SIGTERM handler (``sys.exit(15)``) is active while it starts.
        if exc.code == signal.SIGTERM:
            raise Terminated(signal.SIGTERM) from None
        raise
    finally:
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, _recording(handler) if callable(handler) else handler)
    if _joined is _NOT_JOINED:
        atexit.register(shutdown_ray)
    _joined = address
    cpus = int(ray.cluster_resources().get("CPU", 0))
    where = "started a local Ray" if local else f"joined Ray at {address or os.environ['RAY_ADDRESS']}"
    log.info("runner: %s (%d CPUs); reused by every sharded training of this process", where, cpus)


def _recording(handler: Callable[[int, FrameType | None], Any]) -> Callable[[int, FrameType | None], Any]:
    """``handler``, after noting the signal in ``_last_signal`` (see :func:`_reraise_interrupt`)."""

    def record(signum: int, frame: FrameType | None) -> Any:
        global _last_signal
        _last_signal = signum
        return handler(signum, frame)

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


def shutdown_ray() -> None:
    """Shut down the Ray that :func:`ensure_ray` started or joined (a no-op otherwise).

    A local Ray stops with its workers; a joined cluster is only disconnected from. Registered to
    run at process exit.
    """
    global _joined
    if _joined is _NOT_JOINED:
        return
    _joined = _NOT_JOINED
    _model_refs.clear()
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


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
    """Shards of whole chunks on Ray tasks, merged in chunk order."""
    import numpy as np
    import ray

    from dpaudit.training.dpsgd import TrainResult, chunk_layout

    desc = kwargs.pop("desc", "train trials")
    if "chunks" in kwargs:
        raise ValueError("run_trials shards the chunks itself; call train_trials to pick chunks")
    layout = {k: kwargs[k] for k in ("chunk_size", "strategy", "batching") if k in kwargs}
    size, num_chunks = chunk_layout(model, member_mask, cfg, **layout)
    T = len(member_mask)
    ensure_ray(runner.address)
    per_shard = runner.shard_chunks
    if per_shard is None:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)) // runner.threads_per_worker)
        per_shard = math.ceil(num_chunks / cpus)
    shards = shard_ranges(num_chunks, per_shard)
    env = {
        "DPAUDIT_PROGRESS": "0",
        "TF_NUM_INTRAOP_THREADS": str(runner.threads_per_worker),
        "TF_NUM_INTEROP_THREADS": str(runner.threads_per_worker),
        "OMP_NUM_THREADS": str(runner.threads_per_worker),
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
    }
    task = ray.remote(_train_shard).options(
        num_cpus=runner.threads_per_worker,
        max_retries=runner.max_retries,
        retry_exceptions=True,
        runtime_env={"env_vars": env},
    )
    global _last_signal
    _last_signal = None
    refs: list[Any] = []
    bar = progress(desc=desc, total=T * cfg.steps, unit="trial-step")
    try:
        model_ref = (_model_ref(model),)
        args = ray.put((X, y, member_mask, cfg, seed, kwargs))
        refs = [task.remote(model_ref, args, r, runner.threads_per_worker) for r in shards]
        trial_steps = {ref: (min(T, r.stop * size) - min(T, r.start * size)) * cfg.steps
                       for ref, r in zip(refs, shards, strict=True)}  # fmt: skip
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
            for ref in done:
                bar.update(trial_steps[ref])
            if pending:
                time.sleep(POLL_SECONDS)
        parts = ray.get(refs)  # in chunk order; raises if a shard failed after its retries
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        # A signal sent to the whole process group (Ctrl-C, ``timeout``) also stops Ray's own
        # processes; what Ray then prints about lost workers is noise (it is in Ray's log files).
        with _quiet_stderr() if interrupted else contextlib.nullcontext():
            for ref in refs:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if interrupted:
                shutdown_ray()
        if interrupted:
            interrupt = _reraise_interrupt(exc)
            if interrupt is not exc:
                raise interrupt from None
        raise
    finally:
        bar.close()
    params = [np.concatenate([p[i] for p, _ in parts], axis=0) for i in range(len(model.param_shapes))]
    keys = parts[0][1].keys() if parts else ()
    records = {k: np.concatenate([r[k] for _, r in parts], axis=0) for k in keys}
    return TrainResult(params=params, records=records, config=cfg)
