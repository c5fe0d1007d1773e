"""Train stage of the training audit: the user's function, run ``runs`` times under fresh auditors.

Every run's transcript and canary inclusion bits are stored (``runs.npz``) for the bounds stage, which
decides the verdict from them alone; the manifest records the declared mechanism (Poisson-sampled
Gaussian with q = B/N, T steps, σ) and the claim.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

from dpaudit.data.prepared import PreparedData
from dpaudit.experiments.base import Mechanism, TrainManifest
from dpaudit.experiments.training_audit.config import (
    TrainingAuditConfig,
    audit_size,
    check_declaration,
    check_signature,
    declared_dpsgd,
    load_function,
)
from dpaudit.experiments.training_audit.design import RUNS_FILE, library, save_runs, training_data
from dpaudit.layout import Audit


def _call(function: Any, dataset: Any, options: dict[str, Any], auditor: Any) -> Any:
    """The user's ``function(dataset, audit, **options)`` for one run's auditor (a module-level function
    under :func:`functools.partial`, so that Ray can pickle it)."""
    return function(dataset, auditor, **options)


def train(config: TrainingAuditConfig, audit: Audit, out_dir: Path) -> TrainManifest:
    """Run the user's function under the auditor(s) and store the transcripts."""
    tp = config.train
    prepared = PreparedData.load(audit.prepared_path)
    size = audit_size(config, audit.dataset, len(prepared.train_idx))
    check_declaration(tp.declared, size)
    function = load_function(tp.function)
    check_signature(function, tp.options)
    declared = declared_dpsgd(tp.declared, size)
    data = training_data(prepared, size)
    start = time.perf_counter()
    runs = library("runs").run_transcripts(
        functools.partial(_call, function, data, dict(tp.options)),
        declared,
        runs=tp.runs,
        canaries=tp.canaries,
        seed=tp.seed,
        runner=tp.runner,
    )
    seconds = time.perf_counter() - start
    save_runs(out_dir / RUNS_FILE, runs)
    mechanism = Mechanism.dpsgd(
        declared.noise_multiplier, declared.sampling_rate, declared.total_steps, declared.clip_norm
    )
    return TrainManifest(
        experiment="training_audit",
        dataset=audit.dataset,
        delta=float(declared.delta),
        sizes={"D": size, "canaries": tp.canaries, "runs": tp.runs, "batch_size": declared.batch_size},
        seeds={"audit": tp.seed},
        mechanisms={"declared": mechanism},
        facts={
            "function": tp.function,
            "options": {k: v for k, v in tp.options.items()},
            "declared": dataclasses.asdict(tp.declared),
            "dataset_size": size,
            "epsilon_claimed": float(declared.claimed_epsilon),
            "sampling": declared.sampling,
            "steps": declared.total_steps,
        },
        seconds=seconds,
    )
