"""Attack stage of the one-run audit: one score per canary, higher meaning "included"
(Steinke, Nasr & Jagielski 2023, :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`).

- Gradient canaries (white box, their §6): the movement of θ against the canary's direction over the
  run, in units of the summed gradient: (θ_0 − θ_T)[c_k]·B/η. On an inert coordinate it is the canary's
  clipped size times the steps it entered plus the noise Σ_t σ·ξ_t.
- Input canaries (black box): minus the final model's loss on the canary under its wrong label.

The score rule is fixed before the inclusion bits are read (the theorem needs it); the bits are only
carried along for the bounds stage.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.onerun.config import OneRunConfig
from dpaudit.experiments.onerun.design import RUN_FILE, SCORES_FILE
from dpaudit.io import write_npz
from dpaudit.layout import Audit


def canary_scores(kind: str, run: dict[str, np.ndarray], losses: dict[str, np.ndarray]) -> np.ndarray:
    """The score of every canary from the run's outputs (see the module docstring)."""
    if kind == "gradient":
        return (run["theta0"] - run["theta_final"]) / float(run["update_scale"])
    if kind == "input":
        return -np.asarray(losses["canary_loss"], dtype=np.float64)
    raise ValueError(f"unknown canary kind {kind!r}")


def attack(config: OneRunConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Write :data:`.design.SCORES_FILE`: ``score`` and ``included`` per canary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with np.load(audit.train_dir / RUN_FILE) as f:
        run = {k: f[k] for k in f.files if not k.startswith("param_")}
    with np.load(audit.losses_path) as f:
        losses = {k: f[k] for k in f.files}
    score = canary_scores(str(manifest.facts["canary_kind"]), run, losses)
    write_npz(out_dir / SCORES_FILE, {"score": score.astype(np.float64), "included": run["included"]})
