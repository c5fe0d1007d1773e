"""Losses stage of the training audit: nothing to compute (the evidence is the runs' transcripts); it
writes an empty array file so that the stage has its output like every audit."""

from __future__ import annotations

from pathlib import Path

from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.training_audit.config import TrainingAuditConfig
from dpaudit.io import write_npz
from dpaudit.layout import Audit


def losses(config: TrainingAuditConfig, audit: Audit, manifest: TrainManifest, out_path: Path) -> None:
    """An empty losses file (the training audit reads no losses)."""
    write_npz(out_path, {})
