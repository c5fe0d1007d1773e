"""``train@<audit>``: train the audit's models and write the train manifest next to them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpaudit.experiments.base import TrainManifest, write_manifest
from dpaudit.io import atomic_directory
from dpaudit.pipeline.audits import load_audit
from dpaudit.training.shards import RunnerConfig, using


def run_train(params: Mapping[str, Any], name: str, root: Path = Path(".")) -> None:
    """``train@<audit>``: train into the audit's train directory and write its manifest there."""
    audit, experiment, config = load_audit(params, name, root)
    with using(RunnerConfig.from_params(params)), atomic_directory(audit.train_dir) as out_dir:
        manifest = experiment.train(config, audit, out_dir)
        if not isinstance(manifest, TrainManifest):
            raise TypeError(
                f"{experiment.name}.train returned {type(manifest).__name__}, not a TrainManifest"
            )
        write_manifest(out_dir, manifest)
