"""More power when one run is not enough: r independent runs of the user's training, pooled.

Each run gets its own auditor (its own canaries and inclusion bits, seeded from (seed, run)); the
runs' canaries pool into one one-run analysis and every run's checks enter the verdict's joint level
(:func:`dpaudit.training_audit.verdict.decide`). Runs are independent, so they can go to Ray workers
(``runner="ray"``, the project's engine for sharded work; :func:`dpaudit.training.ray_session.ensure_ray`
starts or joins it) or run one after the other in this process (``runner="local"``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpaudit.bounds.onerun import DEFAULT_GUESS_FRACTIONS
from dpaudit.logs import progress
from dpaudit.training_audit.auditor import TrainingAuditor
from dpaudit.training_audit.declaration import DeclaredDPSGD
from dpaudit.training_audit.transcript import Transcript
from dpaudit.training_audit.verdict import Verdict, decide

__all__ = ["RUNNERS", "audit_runs", "run_seed", "run_transcripts"]

RUNNERS = ("local", "ray")
#: The user's training: given a fresh auditor, build the model and loader, wrap, fit with its callback.
TrainFunction = Callable[[Any], Any]


def run_seed(seed: int, run: int) -> int:
    """The seed of run ``run`` of an audit seeded ``seed`` (an integer hash of both; never a float)."""
    return int(np.random.SeedSequence([int(seed), int(run)]).generate_state(1, dtype=np.uint32)[0])


def _one_run(
    train: TrainFunction, declared: DeclaredDPSGD, canaries: int, seed: int, loss: Any
) -> tuple[Transcript, np.ndarray]:
    auditor = TrainingAuditor(canaries=canaries, declared=declared, seed=seed, loss=loss)
    train(auditor)
    try:
        return auditor.transcript(), auditor.included.copy()
    except ValueError as exc:
        raise ValueError(f"run seeded {seed}: the training function did not run the audit: {exc}") from exc


def _one_run_shipped(
    train: bytes, paths: list[str], declared: DeclaredDPSGD, canaries: int, seed: int, loss: Any
) -> tuple[Transcript, np.ndarray]:
    """:func:`_one_run` in a Ray worker: the driver's import path first, then the training function.

    Ray unpickles a task's arguments before its body runs, and a function of the user's module pickles
    by reference, so a worker that cannot import that module (it lives beside the user's project, put
    on ``sys.path`` by the driver) would fail before any code of ours could help. Shipping it as bytes
    lets the worker extend ``sys.path`` with the driver's entries before it loads the function."""
    import sys

    from ray import cloudpickle

    sys.path.extend(p for p in paths if p not in sys.path)
    return _one_run(cloudpickle.loads(train), declared, canaries, seed, loss)


def audit_runs(
    train: TrainFunction,
    declared: DeclaredDPSGD,
    *,
    runs: int,
    canaries: int = 500,
    seed: int = 0,
    confidence: float = 0.95,
    runner: str = "local",
    loss: Any = None,
    guess_fractions: Sequence[float] = DEFAULT_GUESS_FRACTIONS,
) -> Verdict:
    """Run ``train`` ``runs`` times, each with a fresh auditor, and return the pooled verdict.

    ``train(auditor)`` must wrap its batched dataset with ``auditor.wrap`` and pass
    ``auditor.callback()`` to ``fit``. With ``runner="ray"`` it runs in Ray workers (it must then be
    importable or picklable by Ray).
    """
    results = run_transcripts(
        train, declared, runs=runs, canaries=canaries, seed=seed, runner=runner, loss=loss
    )
    return decide(
        [t for t, _ in results],
        [inc for _, inc in results],
        declared,
        confidence=confidence,
        seed=seed,
        guess_fractions=guess_fractions,
    )


def run_transcripts(
    train: TrainFunction,
    declared: DeclaredDPSGD,
    *,
    runs: int,
    canaries: int = 500,
    seed: int = 0,
    runner: str = "local",
    loss: Any = None,
) -> list[tuple[Transcript, np.ndarray]]:
    """The ``runs`` independent runs of ``train`` (each with a fresh auditor seeded by
    :func:`run_seed`): every run's transcript and canary inclusion bits, in run order. What
    :func:`audit_runs` pools; the pipeline's training audit stores them for its bounds stage."""
    if int(runs) != runs or runs < 1:
        raise ValueError(f"runs must be a whole number >= 1, got {runs!r}")
    if runner not in RUNNERS:
        raise ValueError(f"runner must be one of {RUNNERS}, got {runner!r}")
    seeds = [run_seed(seed, r) for r in range(runs)]
    if runner == "local":
        return [
            _one_run(train, declared, canaries, s, loss)
            for s in progress(seeds, desc="audited runs", unit="run")
        ]
    else:
        import ray

        from dpaudit.training.ray_session import ensure_ray

        ensure_ray(None, driver_trains=False)
        import sys

        from ray import cloudpickle

        remote = ray.remote(num_cpus=1)(_one_run_shipped)
        shipped, paths = cloudpickle.dumps(train), [p for p in sys.path if p]
        refs = [remote.remote(shipped, paths, declared, canaries, s, loss) for s in seeds]
        pending = list(refs)
        with progress(desc="audited runs", total=runs, unit="run") as bar:
            while pending:
                _, pending = ray.wait(pending, num_returns=1)
                bar.update(1)
        return list(ray.get(refs))
