"""The audit stages after training: ``losses@<audit>``, ``attack@<audit>`` and ``bounds@<audit>``.

Each reads the training facts from the train manifest only (never from params.yaml's training keys)
and writes only into its own output location, atomically. The git-tracked outputs of ``bounds``
(``results/<audit>.*``, ``plots/<audit>/``) are ``persist: true`` in dvc.yaml, so DVC no longer deletes
them before the stage runs (an interrupted run leaves the previous versions, see
:func:`dpaudit.deps.persist_git_tracked`); the stage therefore replaces ``plots/<audit>/`` whole and
removes an output file this run does not write, so that no file of an earlier run survives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments.base import read_manifest
from dpaudit.io import atomic_directory, atomic_path, write_json
from dpaudit.pipeline.audits import load_audit
from dpaudit.precision import versioned

#: Plot data is drawn, not read: 4 significant digits, below what a figure shows and above a rerun's
#: float noise (:mod:`dpaudit.precision`). An experiment may ask for more (``csv_float_format``).
PLOT_FLOATS = "%.4g"

def run_losses(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``losses@<audit>``: per-example losses of the trained models."""
    audit, experiment, config = load_audit(params, name, root)
    manifest = read_manifest(audit)
    with atomic_path(audit.losses_path) as out_path:
        experiment.losses(config, audit, manifest, out_path)


def run_attack(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``attack@<audit>``: the audit's adversaries."""
    audit, experiment, config = load_audit(params, name, root)
    manifest = read_manifest(audit)
    with atomic_directory(audit.attack_dir) as out_dir:
        experiment.attack(config, audit, manifest, out_dir)


def run_bounds(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``bounds@<audit>``: metrics, plot CSVs and the report section (with a copy of the metrics)."""
    audit, experiment, config = load_audit(params, name, root)
    manifest = read_manifest(audit)
    result = experiment.bounds(config, audit, manifest)
    section_ = experiment.section(config, audit, manifest, result)
    with (
        atomic_path(audit.results_path) as results_path,
        atomic_directory(audit.plots_dir) as plots_dir,
        atomic_directory(audit.bounds_dir) as bounds_dir,
    ):
        metrics = versioned(result.metrics)  # at the precision its statistics support: no float noise
        write_json(results_path, metrics)
        if result.table is not None:
            result.table.save(audit.results_table_path)
        else:  # persistent output: an earlier run's table must not pass for this run's
            audit.results_table_path.unlink(missing_ok=True)
        for file, frame in result.plots.items():
            frame.to_csv(plots_dir / file, index=False, float_format=result.csv_float_format or PLOT_FLOATS)
        write_json(bounds_dir / audit.bounds_metrics_path.name, metrics)
        section_.save(bounds_dir / audit.section_path.name)
