"""Attack stage of the one-run audit: one score per canary, higher meaning "included"
(Steinke, Nasr & Jagielski 2023, :data:`dpaudit.references.STEINKE_NASR_JAGIELSKI`).

- Gradient canaries (white box, their §6): the movement of θ against the canary's direction over the
  run, in units of the summed gradient: (θ_0 − θ_T)[c_k]·B/η. On an inert coordinate it is the canary's
  clipped size times the steps it entered plus the noise Σ_t σ·ξ_t.
- Input canaries (black box): minus the final model's loss on the canary under its wrong label.

The score rule is fixed before the inclusion bits are read (the theorem needs it); the bits are only
carried along, as the score set's ``member`` bits, for the bounds stage. The set names the one-run
analyses of ``bounds.analyses`` as its estimators and declares the Gaussian trade-off family as
guaranteed only for full-batch DP-SGD (:func:`.design.analysis_counts`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.experiments.base import TrainManifest, event_to_json
from dpaudit.experiments.onerun.config import OneRunConfig
from dpaudit.experiments.onerun.design import RUN_FILE, analysis_counts
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.scores import ScoreSet, write_score_sets


def canary_scores(kind: str, run: dict[str, np.ndarray], losses: dict[str, np.ndarray]) -> np.ndarray:
    """The score of every canary from the run's outputs (see the module docstring)."""
    if kind == "gradient":
        return (run["theta0"] - run["theta_final"]) / float(run["update_scale"])
    if kind == "input":
        return -np.asarray(losses["canary_loss"], dtype=np.float64)
    raise ValueError(f"unknown canary kind {kind!r}")


def score_set(
    config: OneRunConfig, manifest: TrainManifest, score: np.ndarray, included: np.ndarray
) -> ScoreSet:
    """The run's one score set: every canary's score and inclusion bit, with what the analyses need."""
    q = float(manifest.facts["sampling_rate"])
    return ScoreSet(
        group={"canary_type": str(manifest.facts["canary_kind"])},
        scores=np.asarray(score, dtype=np.float64),
        member=np.asarray(included, dtype=bool),
        estimators=tuple(f"one_run_{a}" for a in config.bounds.analyses),
        assumes="gaussian" if analysis_counts("fdp_gaussian", q) else "one-run",
        mechanism=event_to_json(manifest.mechanisms["declared"].dp_event()),
        params={
            "delta": float(manifest.delta),
            "inclusion_probability": 0.5,
            "seed": int(manifest.seeds["setting_seed"]),
            "sampling_rate": q,
        },
    )


def attack(config: OneRunConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """Write the run's score set to ``audit.scores_path`` (in ``out_dir``, which becomes the attack dir)."""
    with open_npz(audit.train_dir / RUN_FILE) as f:
        run = {k: f[k] for k in f.files if not k.startswith("param_")}
    with open_npz(audit.losses_path) as f:
        losses = {k: f[k] for k in f.files}
    score = canary_scores(str(manifest.facts["canary_kind"]), run, losses)
    out_dir = Path(out_dir)  # the stage moves it to audit.attack_dir whole
    out_dir.mkdir(parents=True, exist_ok=True)
    write_score_sets(out_dir / audit.scores_path.name, [score_set(config, manifest, score, run["included"])])
