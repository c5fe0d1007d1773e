"""The F-through-the-trainer profile: its overrides, and a small real run whose bounds stay below ε."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from dpaudit.fidelity.profiles import get_profile
from dpaudit.fidelity.profiles.nasr_f_trainer import _params, run_trials


def test_overrides_run_f_alone_at_epsilon_4(repo_root: Path) -> None:
    base = yaml.safe_load((repo_root / "params.yaml").read_text())
    train = _params(base, 3, 1234)["instantiation"]["train"]
    assert train["threat_models"] == ["F"]
    assert train["target_epsilons"] == [4.0]
    assert train["malicious_trials_per_world"] == 1234
    assert train["seed"] == 3
    assert base["instantiation"]["train"]["threat_models"] != ["F"]  # the base is not modified
    assert get_profile("nasr-f-trainer").paper == "NASR_2021"


def test_a_small_run_bounds_below_the_accountant(repo_root: Path) -> None:
    cwd = Path.cwd()
    os.chdir(repo_root)
    try:
        result = run_trials(0, 400)
    finally:
        os.chdir(cwd)
    numbers = result.numbers
    pld = numbers["epsilon_pld"].value
    assert 3.5 < pld < 3.7  # PLD ε of the noise RDP calibrates to ε = 4 at q = 0.1, T = 100
    assert 0 <= numbers["eq5_sweep"].value <= pld
    assert 0 < numbers["family_bound"].value <= pld  # 400 trials already prove something, never more than ε
    assert numbers["family_bound"].n == 400
