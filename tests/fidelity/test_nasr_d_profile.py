"""The nasr-d-crafters profile: its registration, overrides and the summary of per-seed cells."""

from __future__ import annotations

import math

import pytest

from dpaudit.fidelity.profiles import get_profile, nasr_d


def _cells(c: float, d: float) -> dict[str, dict[str, float]]:
    return {"C": {"epsilon_lower_family": c}, "D": {"epsilon_lower_family": d}}


def test_registered_for_nasr_2021() -> None:
    profile = get_profile("nasr-d-crafters")
    assert profile.paper == "NASR_2021" and profile.run is nasr_d.run


def test_run_params_override_only_the_profile_keys() -> None:
    base = {"instantiation": {"train": {"seed": 0, "trials_per_world": 100, "adaptive_start": "query",
                                        "adaptive_virtual_clip": True, "steps": 100}}}  # fmt: skip
    params = nasr_d.run_params(base, "paper_literal", 7, 500)
    train = params["instantiation"]["train"]
    assert train["adaptive_start"] == "zero" and train["adaptive_virtual_clip"] is False
    assert (train["seed"], train["trials_per_world"], train["target_epsilons"]) == (7, 500, [4.0])
    assert train["threat_models"] == ["C", "D"] and train["steps"] == 100
    assert base["instantiation"]["train"]["seed"] == 0  # the base is not modified


def test_summary_differences_standard_errors_and_flag() -> None:
    c = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    runs = {
        # D − C = 0.5, 0.6, ..., 1.0: mean 0.75, s.d. sqrt(0.035) → s.e. 0.0764; 0.75 > 2 s.e.
        "paper_literal": [_cells(ci, ci + 0.5 + 0.1 * k) for k, ci in enumerate(c)],
        # D − C alternates ±0.1: mean 0, not reproduced
        "clipped_query": [_cells(ci, ci + (0.1 if k % 2 else -0.1)) for k, ci in enumerate(c)],
    }
    numbers = nasr_d.summarise(runs, 0.95, 500)
    diff = numbers["d_minus_c.paper_literal"]
    se = math.sqrt(0.035) / math.sqrt(6)
    assert diff.kind == "difference" and diff.n == 6
    assert diff.value == pytest.approx(0.75)
    assert (diff.low, diff.high) == (pytest.approx(0.75 - se), pytest.approx(0.75 + se))
    assert numbers["reproduces_d_gt_c.paper_literal"].value == 1.0
    assert numbers["reproduces_d_gt_c.clipped_query"].value == 0.0
    assert numbers["d_minus_c.clipped_query"].value == pytest.approx(0.0, abs=1e-12)
    assert numbers["epsilon_lower_mean.C"].value == pytest.approx(0.35)
    assert numbers["epsilon_lower_mean.D.paper_literal"].value == pytest.approx(1.1)
    assert numbers["epsilon_lower_mean.C"].kind == "estimate"  # a mean of bounds is not a bound


def test_run_writes_a_result_from_the_stage_cells(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """run() with the audit's stages replaced by known cells: seeds, crafters and the result's shape."""
    calls = []

    def fake_metrics(params, root):
        train = params["instantiation"]["train"]
        calls.append((train["seed"], train["adaptive_virtual_clip"]))
        d = 0.3 if train["adaptive_virtual_clip"] else 0.1 + 0.01 * train["seed"]
        return {tm: {"epsilon_lower_family": v, "epsilon_pld": 3.6} for tm, v in (("C", 0.2), ("D", d))}

    monkeypatch.setattr(nasr_d, "prepared_data", lambda *a: None)
    monkeypatch.setattr(nasr_d, "audit_metrics", fake_metrics)
    result = nasr_d.run(1)
    assert sorted({s for s, _ in calls}) == list(range(6, 12)) and len(calls) == 12
    assert result.paper == "NASR_2021" and result.profile == "nasr-d-crafters"
    assert result.numbers["d_minus_c.clipped_query"].value == pytest.approx(0.1)
    assert result.numbers["d_minus_c.paper_literal"].value == pytest.approx(0.1 + 0.085 - 0.2)
    assert "500 trials per world" in result.setting
    from dpaudit.fidelity.profile import read_profile_result, write_profile_result

    back = read_profile_result(write_profile_result(tmp_path, result))
    assert set(back.numbers) == set(result.numbers)
