"""Profile ``nasr-f-trainer``: Nasr et al.'s threat model F through dpaudit's real DP-SGD trainer.

The simulation profile (``nasr-f-paper-regime``) bounds what any F audit can reach on the ideal
mechanism; this one trains adult models with Crafter 5's malicious dataset (references.NASR_2021
§IV-F) at ε = 4 and the default q = 0.1, T = 100, at the largest trial count that fits about 20
minutes on two cores, and records the paper's Eq. 5 sweep beside dpaudit's family bound, both
counted at the audit's joint level. It runs the instantiation audit's own stages (via
:mod:`dpaudit.fidelity.profiles.nasr_d`'s runner) with F alone.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from dpaudit.fidelity.profile import Measured, Profile, ProfileResult
from dpaudit.fidelity.profiles.nasr_d import EPSILON, audit_metrics, prepared_data
from dpaudit.references import PAPER_RESULTS

__all__ = ["MALICIOUS_TRIALS_PER_WORLD", "PROFILE", "run"]

#: F's trials per world through the trainer: 10⁶ per world (2·10⁶ models; 10⁵ take about a minute).
MALICIOUS_TRIALS_PER_WORLD = 1_000_000


def _params(base: dict[str, Any], seed: int, trials: int) -> dict[str, Any]:
    params = json.loads(json.dumps(base))
    train = params["instantiation"]["train"]
    train.update(
        seed=seed, target_epsilons=[EPSILON], threat_models=["F"], malicious_trials_per_world=trials
    )
    params["instantiation"]["attack"]["simulation_trials_per_world"] = 1000
    return params


def run_trials(seed: int, trials: int) -> ProfileResult:
    """F through the trainer with ``trials`` per world (the profile uses the module's constant)."""
    import yaml

    repo = Path.cwd()
    base = yaml.safe_load((repo / "params.yaml").read_text())
    params = _params(base, seed, trials)
    with tempfile.TemporaryDirectory(prefix="dpaudit-nasr-f-trainer-") as tmp:
        root = Path(tmp)
        prepared_data(params, repo, root)
        cell = audit_metrics(params, root)["F"]
    pld = float(cell["epsilon_pld"])
    level = float(params["instantiation"]["bounds"]["confidence"])
    paper = next(r for r in PAPER_RESULTS if r.key == "nasr-f").value
    numbers = {
        "eq5_sweep": Measured(
            float(cell["epsilon_lower_sweep"]), "Eq. 5 sweep (Clopper–Pearson), assumption-free, counted",
            "bound", level=level, n=trials,
        ),
        "family_bound": Measured(
            float(cell["epsilon_lower_family"]), "largest counted subsampled-Gaussian family bound",
            "bound", level=level, n=trials,
        ),
        "epsilon_pld": Measured(pld, "PLD accountant of the calibrated noise", "estimate"),
        "cp_cap": Measured(float(cell["cp_cap"]), "largest ε Clopper–Pearson allows at this N", "estimate"),
        "test_accuracy": Measured(float(cell["test_accuracy"]), "test accuracy", "rate"),
    }  # fmt: skip
    findings = (
        f"Through the trainer at {trials} trials per world the Eq. 5 sweep proves "
        f"{numbers['eq5_sweep'].value:.3g} and the family bound {numbers['family_bound'].value:.3g} of "
        f"ε_PLD {pld:.3g} (ratios {numbers['eq5_sweep'].value / pld:.2f} and "
        f"{numbers['family_bound'].value / pld:.2f}); the paper reports {paper:g} at ε = 4.",
    )
    train = params["instantiation"]["train"]
    return ProfileResult(
        profile=PROFILE.name,
        paper="NASR_2021",
        setting=(
            f"adult, threat model F (Crafter 5, |D| = {train['malicious_size']}), target ε = {EPSILON:g} "
            f"(RDP) at δ = {train['delta']:g}, q = {train['sampling_rate']:g}, T = {train['steps']}, "
            f"{trials} trials per world through dpaudit's DP-SGD trainer, seed {seed}"
        ),
        differs=(
            "adult MLP instead of MNIST's CNN and q = 0.1, T = 100 instead of q = 256/60000 and 14062 "
            "steps (the paper's regime is simulated by nasr-f-paper-regime); bounds at a joint 95 %"
        ),
        numbers=numbers,
        seed=seed,
        findings=findings,
    )


def run(seed: int) -> ProfileResult:
    return run_trials(seed, MALICIOUS_TRIALS_PER_WORLD)


PROFILE = Profile(
    "nasr-f-trainer",
    "NASR_2021",
    "F at ε = 4 through the real trainer, as many trials as fit about 20 minutes",
    20.0,
    run,
)
