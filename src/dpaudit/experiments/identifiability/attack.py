"""Attack stage of the identifiability audit.

A_DI,Gau (Bernau et al. Algorithm 1, :data:`dpaudit.references.BERNAU`) from the per-step
quantities recorded in training, and Yeom et al.'s loss-threshold MI adversary
(:data:`dpaudit.references.YEOM`) on the differing record x̂ (Bernau Figs. 7–9 d). The settings
come from the train manifest. Both end in score sets (:mod:`dpaudit.scores`), two per setting,
written to ``audit.scores_path``: the DI adversary's final log-odds of D, and the MI adversary's
negated loss of x̂ (higher = "x̂ was trained on"); ``member`` = the trial trained on D (which holds
x̂), and each adversary's own decision rides along as the array ``decision``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpaudit.attacks import di
from dpaudit.attacks.membership import yeom_decision
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.identifiability.config import IdentifiabilityConfig
from dpaudit.experiments.identifiability.design import Setting, manifest_settings
from dpaudit.io import open_npz
from dpaudit.layout import Audit
from dpaudit.scores import ScoreSet, write_score_sets

#: Estimators per adversary. The audited mechanism is full-batch DP-SGD with Gaussian noise (q = 1),
#: so its trade-off curve is Gaussian with μ ≤ √k/z: the GDP bound's assumption is guaranteed.
DI_ESTIMATORS = ("scores", "decision", "di_beliefs")
MI_ESTIMATORS = ("scores", "decision")
ASSUMES = "gaussian"
HEADLINE_BOUNDS = ("gdp",)


def setting_group(st: Setting) -> dict[str, str]:
    """The score-set group of a setting (the setting's file stem, e.g. ``rb0.9_local-bounded``)."""
    return {"setting": st.file}


def attack(config: IdentifiabilityConfig, audit: Audit, manifest: TrainManifest, out_dir: Path) -> None:
    """A_DI,Gau (Algorithm 1) and the Yeom MI adversary per setting, as score sets."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    with open_npz(audit.losses_path) as lf:
        loss = {k: lf[k] for k in lf.files}
    # GDP is the one pre-registered headline bound (the mechanism is a full-batch Gaussian by
    # construction); the sweeps are reported beside it, uncounted, so GDP keeps the whole level.
    params = {"delta": manifest.delta, "seed": int(manifest.seeds["seed"])}
    sets: list[ScoreSet] = []
    for st in manifest_settings(manifest):
        with open_npz(audit.train_dir / f"{st.file}.npz") as f:
            world, dot, dd, sigma = f["world"], f["dot"], f["dd"], f["sigma"]
        outcome = di.run_di(dot, dd, sigma, world, st.rho_beta)
        mechanism = manifest.mechanisms[st.file].event
        di_scores = di.scores_of_d(outcome.final_true_log_odds, world)
        sets.append(
            ScoreSet(
                {**setting_group(st), "attack": "di"},
                di_scores,
                world == 1,
                DI_ESTIMATORS,
                ASSUMES,
                mechanism,
                {**params, "rho_beta": st.rho_beta},
                {"decision": outcome.guess_d, "dd": dd, "sigma": sigma},
                registered=HEADLINE_BOUNDS,
            )
        )
        # MI on x̂ (first tracked row): a member exactly in world D.
        record_loss = np.asarray(loss[f"{st.file}__record_loss"][:, 0], dtype=np.float64)
        sets.append(
            ScoreSet(
                {**setting_group(st), "attack": "mi"},
                -record_loss,
                world == 1,
                MI_ESTIMATORS,
                ASSUMES,
                mechanism,
                params,
                {"decision": yeom_decision(record_loss, loss[f"{st.file}__train_loss"])},
                registered=HEADLINE_BOUNDS,
            )
        )
    # out_dir replaces audit.attack_dir whole when the stage succeeds: the file lands at scores_path.
    write_score_sets(Path(out_dir) / audit.scores_path.name, sets)
