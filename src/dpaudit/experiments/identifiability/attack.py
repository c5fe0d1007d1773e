"""Attack stage of the identifiability audit.

A_DI,Gau (Bernau et al. Algorithm 1, :data:`dpaudit.references.BERNAU`) from the per-step
quantities recorded in training, and Yeom et al.'s loss-threshold MI adversary
(:data:`dpaudit.references.YEOM`) on the differing record x̂ (Bernau Figs. 7–9 d). The settings
come from the train manifest. Both end in scores for the auditor
(:func:`dpaudit.bounds.auditor.audit_scores`, run by the bounds stage): the DI adversary's final
log-odds of the true world, and the MI adversary's negated loss of x̂ (higher = "x̂ was trained on").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks import di
from dpaudit.attacks.membership import yeom_decision
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import manifest_settings
from dpaudit.io import write_npz
from dpaudit.layout import Audit


def attack(config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """A_DI,Gau (Algorithm 1) and the Yeom MI adversary per setting; per-trial outputs to npz."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with np.load(audit.losses_path) as lf:
        loss = {k: lf[k] for k in lf.files}
    for st in manifest_settings(manifest):
        with np.load(audit.train_dir / f"{st.file}.npz") as f:
            world, dot, dd, sigma = f["world"], f["dot"], f["dd"], f["sigma"]
        outcome = di.run_di(dot, dd, sigma, world, st.rho_beta)
        # MI on x̂ (first tracked row): a member exactly in world D.
        record_loss = loss[f"{st.file}__record_loss"][:, 0]
        mi_guess = yeom_decision(record_loss, loss[f"{st.file}__train_loss"])
        write_npz(
            out_dir / f"{st.file}.npz",
            {
                "world": world,
                "final_log_odds_true": outcome.final_true_log_odds,
                "di_guess": outcome.guess_d.astype(np.int8),
                "mi_guess": mi_guess.astype(np.int8),
                "mi_score": -np.asarray(record_loss, dtype=np.float64),
            },
        )
