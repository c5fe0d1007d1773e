"""Runners: where the trials of :func:`dpaudit.training.dpsgd.train_trials` run (issue 16).

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
  Ray's object store once (``ray.put``) and shared by every task. A task whose worker dies or that
  raises is retried up to ``max_retries`` times (``retry_exceptions=True``); progress of all
  shards goes into one bar; the merged result is returned to the caller, and the stage writes its
  outputs once, atomically (:func:`dpaudit.io.atomic_directory` in the stage runner).

``address: null`` starts a local Ray on this machine (and shuts it down afterwards); an address
(``"auto"``, ``"ray://head:10001"``, ``"10.0.0.1:6379"``) connects to a running cluster, whose
workers must have ``dpaudit`` and its pinned dependencies installed. Each task reserves one CPU
and runs TensorFlow with ``threads_per_worker`` intra-op threads, so workers on one node do not
oversubscribe its cores.

The runner is not a training parameter: it changes where trials run, not their results, so the
train stages in ``dvc.yaml`` do not list the ``runner`` keys and switching runners never retrains.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dpaudit.config import from_mapping, require
from dpaudit.logs import progress

if TYPE_CHECKING:
    import numpy as np

    from dpaudit.training.dpsgd import DPSGDConfig, TrainResult
    from dpaudit.training.models import Model

RunnerKind = Literal["local", "ray"]


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


def _train_shard(args: tuple, chunks: range, threads: int) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """One Ray task: ``train_trials`` on the chunks of one shard, with ``threads`` intra-op threads."""
    import tensorflow as tf

    from dpaudit.training.dpsgd import train_trials

    with contextlib.suppress(RuntimeError):  # already set in a reused worker process
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    model, X, y, member_mask, cfg, seed, kwargs = args
    res = train_trials(model, X, y, member_mask, cfg, seed, **kwargs, chunks=chunks)
    return res.params, res.records


def shard_ranges(num_chunks: int, shard_chunks: int) -> list[range]:
    """Consecutive ranges of ``shard_chunks`` chunk indices covering ``0 … num_chunks − 1``."""
    return [range(lo, min(num_chunks, lo + shard_chunks)) for lo in range(0, num_chunks, shard_chunks)]


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
    started = not ray.is_initialized()
    if started:
        if runner.address is None:
            # Ray starts workers at niceness 15; on a shared machine that starves the shards.
            os.environ.setdefault("RAY_worker_niceness", "0")
        ray.init(address=runner.address, include_dashboard=False, log_to_driver=False)
    try:
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
        args = ray.put((model, X, y, member_mask, cfg, seed, kwargs))
        refs = [task.remote(args, r, runner.threads_per_worker) for r in shards]
        trial_steps = {ref: (min(T, r.stop * size) - min(T, r.start * size)) * cfg.steps
                       for ref, r in zip(refs, shards, strict=True)}  # fmt: skip
        bar = progress(desc=desc, total=T * cfg.steps, unit="trial-step")
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                bar.update(trial_steps[ref])
        bar.close()
        parts = ray.get(refs)  # in chunk order; raises if a shard failed after its retries
    finally:
        if started:
            ray.shutdown()
    params = [np.concatenate([p[i] for p, _ in parts], axis=0) for i in range(len(model.param_shapes))]
    keys = parts[0][1].keys() if parts else ()
    records = {k: np.concatenate([r[k] for _, r in parts], axis=0) for k in keys}
    return TrainResult(params=params, records=records, config=cfg)
