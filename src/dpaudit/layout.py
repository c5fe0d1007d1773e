"""Where the pipeline keeps its files: one module for every path and file name the stages share.

The stage runner (:mod:`dpaudit.pipeline`), the experiments and the report renderer all import
their locations from here, so a path is spelled once. :class:`Audit` names one audit's artefacts;
its key is always ``<dataset>-<experiment>`` (checked by :func:`dpaudit.pipeline.check_params`),
so every path below is a plain file name under the repository root and can never escape it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpaudit.data.registry import MANIFEST_NAME as DOWNLOAD_MANIFEST_NAME

__all__ = [
    "CHECK_PATH",
    "DOWNLOAD_MANIFEST_NAME",
    "MODELS_DIR",
    "MODEL_RECORDS_DIR",
    "TIMING_DIR",
    "TRAIN_MANIFEST_NAME",
    "Audit",
    "audit_key",
]

#: Per-stage wall-clock log written by :func:`dpaudit.pipeline.run_stage`. No stage reads it (it
#: is not a DAG input): run time is a fact of the run, not of the results. The report shows the
#: training time each train stage records in its manifest instead.
TIMING_DIR = Path("data") / "timing"

#: The train stage's record of what it did (steps, q, z, C, δ, sizes, seeds, DpEvents).
TRAIN_MANIFEST_NAME = "manifest.json"

#: Output of the ``check`` stage: constant content, so a params change that passes the check
#: leaves its hash, and therefore every other stage, untouched.
CHECK_PATH = Path("data") / "check" / "params.ok"

#: Where Keras architecture files named by ``<experiment>.datasets.<ds>.model.keras`` must lie: the
#: ``check`` stage depends on this directory, so editing such a file reruns ``check``.
MODELS_DIR = Path("models")

#: ``check``'s per-audit records of the Keras file each audit's model comes from (path and md5, or
#: null): ``train@<audit>`` depends on ``<MODEL_RECORDS_DIR>/<audit>.json``, so a changed Keras file
#: reruns exactly the audits that use it, and nothing else.
MODEL_RECORDS_DIR = Path("data") / "check" / "models"


def audit_key(dataset: str, experiment: str) -> str:
    """The only valid key of an audit in ``params.yaml``: ``<dataset>-<experiment>``."""
    return f"{dataset}-{experiment}"


@dataclass(frozen=True)
class Audit:
    """One dataset × experiment pair and the paths of its pipeline artefacts."""

    dataset: str
    experiment: str
    root: Path = Path(".")

    @property
    def name(self) -> str:
        return audit_key(self.dataset, self.experiment)

    @property
    def prepared_path(self) -> Path:
        return self.root / "data" / "prepared" / f"{self.dataset}.npz"

    @property
    def sensitivity_path(self) -> Path:
        return self.root / "data" / "sensitivity" / f"{self.dataset}.json"

    @property
    def train_dir(self) -> Path:
        return self.root / "data" / "train" / self.dataset / self.experiment

    @property
    def manifest_path(self) -> Path:
        return self.train_dir / TRAIN_MANIFEST_NAME

    @property
    def losses_path(self) -> Path:
        return self.root / "data" / "losses" / self.dataset / f"{self.experiment}.npz"

    @property
    def attack_dir(self) -> Path:
        return self.root / "data" / "attacks" / self.dataset / self.experiment

    @property
    def results_path(self) -> Path:
        """Every number of the audit (``results/<audit>.json``): a versioned output, not a DVC metric,
        so that ``dvc metrics diff`` shows the headlines of ``metrics/summary.json`` alone."""
        return self.root / "results" / f"{self.name}.json"

    @property
    def results_table_path(self) -> Path:
        """The audit's part of the results table (``results/<audit>.csv``, :mod:`dpaudit.table`)."""
        return self.root / "results" / f"{self.name}.csv"

    @property
    def scores_path(self) -> Path:
        """The attack stage's one hand-off to bounds: its score sets (:mod:`dpaudit.scores`)."""
        return self.attack_dir / "scores.npz"

    @property
    def plots_dir(self) -> Path:
        return self.root / "plots" / self.name

    @property
    def bounds_dir(self) -> Path:
        return self.root / "data" / "bounds" / self.name

    @property
    def section_path(self) -> Path:
        return self.bounds_dir / "section.json"

    @property
    def bounds_metrics_path(self) -> Path:
        """A copy of ``results/<audit>.json`` inside the bounds stage's cached output, for the report."""
        return self.bounds_dir / "metrics.json"
