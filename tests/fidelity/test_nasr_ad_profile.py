"""The nasr-ad-paper-trials profile: registration, overrides, and Eq. 5 with the count it would need."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from dpaudit.fidelity.profiles import get_profile, nasr_ad
from dpaudit.scores import ScoreSet


def _set(shift: float, n: int = 1000, seed: int = 0) -> ScoreSet:
    """A loss-like statistic: members score ``shift`` higher on average (unit-variance Gaussians)."""
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(shift, 1.0, n), rng.normal(0.0, 1.0, n)])
    member = np.concatenate([np.ones(n, bool), np.zeros(n, bool)])
    return ScoreSet({"setting": "eps2", "threat_model": "C", "attack": "final_loss"}, scores, member,
                    ("scores",), params={"delta": 1e-5})  # fmt: skip


def test_registered_for_nasr_2021() -> None:
    profile = get_profile("nasr-ad-paper-trials")
    assert profile.paper == "NASR_2021" and profile.run is nasr_ad.run


def test_run_params_are_the_papers_count_and_crafter() -> None:
    base = {"instantiation": {"train": {"seed": 0, "trials_per_world": 100, "adaptive_start": "query",
                                        "adaptive_virtual_clip": True}}}  # fmt: skip
    train = nasr_ad.run_params(base, 3)["instantiation"]["train"]
    assert train["trials_per_world"] == 1000 and train["threat_models"] == ["A", "B", "C", "D"]
    assert train["adaptive_start"] == "zero" and train["adaptive_virtual_clip"] is False
    assert train["target_epsilons"] == [2.0, 4.0] and train["seed"] == 3
    assert base["instantiation"]["train"]["trials_per_world"] == 100


def test_a_strong_statistic_certifies_and_a_null_one_needs_no_count() -> None:
    strong = nasr_ad._cell_numbers([_set(1.5)], target_ratio=0.125, epsilon=2.0)
    assert strong["bonferroni"].epsilon_lower > 0.25  # 1.5 s.d. apart: Eq. 5 at 1000 trials certifies 0.25
    assert strong["needed"] is not None and strong["needed"] <= 1000
    null = nasr_ad._cell_numbers([_set(0.0, seed=1)], target_ratio=0.125, epsilon=2.0)
    assert null["bonferroni"].epsilon_lower == 0.0
    assert null["needed"] is None  # held-out plug-in below 0.25: no count would reach it
    # The same-trials choice is never below the valid one (it pays nothing for the pick).
    assert null["practice"].epsilon_lower >= null["bonferroni"].epsilon_lower


def test_committed_result_has_every_cell(repo_root: Path) -> None:
    data = json.loads((repo_root / "reproductions" / "nasr-ad-paper-trials.json").read_text())
    numbers = data["numbers"]
    for tm in "ABCD":
        for eps in ("2", "4"):
            assert numbers[f"{tm}.eps{eps}.eq5_bonferroni_ratio"]["n"] == 1000
    for key in ("A.eps4", "C.eps2", "D.eps2"):
        needed = numbers[f"{key}.trials_needed"]["value"]
        assert needed == nasr_ad.NO_COUNT or needed >= 1
