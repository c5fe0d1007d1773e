"""Attack stage of the training audit: nothing to compute; the canaries' scores are the transcript's
likelihood-ratio scores, computed with the verdict in the bounds stage
(:func:`dpaudit.training_audit.verdict.decide`). It records the runs it saw."""

from __future__ import annotations

from pathlib import Path

from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.training_audit.config import TrainingAuditConfig
from dpaudit.io import write_json
from dpaudit.layout import Audit


def attack(config: TrainingAuditConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """``runs.json``: the runs and canaries the bounds stage will pool."""
    write_json(
        out_dir / "runs.json", {"runs": manifest.sizes["runs"], "canaries": manifest.sizes["canaries"]}
    )
