"""The membership profiles' overrides, recipe and helper logic (fast: no training)."""

from __future__ import annotations

import math

import pytest

from dpaudit.experiments.membership.config import config_from_params
from dpaudit.fidelity.membership_runs import (
    MembershipRun,
    clopper_pearson,
    deep_merge,
    override_params,
    set_recipe,
)
from dpaudit.fidelity.profiles import erlingsson, get_profile, negoescu


def test_deep_merge_recurses_into_mappings_and_replaces_the_rest() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 4}
    merged = deep_merge(base, {"a": {"c": [3]}, "e": 5})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 4, "e": 5}
    assert base["a"]["c"] == [1, 2]  # the base is not modified


def test_set_recipe_gives_dotted_keys_and_yaml_flow_values() -> None:
    recipe = set_recipe({"membership": {"train": {"repeats": 5, "xgboost": {"enabled": False},
                                                  "dpsgd": {"noise_multipliers": [0.1, 64.0]}}}})  # fmt: skip
    assert recipe == [
        "membership.train.repeats=5",
        "membership.train.xgboost.enabled=false",
        "membership.train.dpsgd.noise_multipliers=[0.1, 64.0]",
    ]


def test_clopper_pearson_closed_forms() -> None:
    # k = 0: upper limit 1 − (α/2)^(1/n); k = n: lower limit (α/2)^(1/n).
    low, high = clopper_pearson(0, 10, 0.95)
    assert low == 0.0
    assert high == pytest.approx(1 - 0.025 ** (1 / 10), rel=1e-9)
    low, high = clopper_pearson(20, 20, 0.95)
    assert low == pytest.approx(0.025 ** (1 / 20), rel=1e-9)
    assert high == 1.0


def test_erlingsson_override_builds_a_valid_one_run_config() -> None:
    config = config_from_params(override_params(erlingsson.OVERRIDE))
    sizes = config.sizes_for("digits")
    assert sizes.members == sizes.nonmembers  # inclusion probability 1/2: the one-run bound applies
    assert 64.0 in config.train.dpsgd.noise_multipliers
    assert config.train.dpsgd.target_epsilons == ()
    # q·√T ≈ 20: at z = 64 a member's own signal stays below the noise (Erlingsson Table 1's regime).
    steps = config.train.dpsgd.epochs / config.train.dpsgd.sampling_rate
    assert config.train.dpsgd.sampling_rate * math.sqrt(steps) == pytest.approx(20.0)


def test_negoescu_override_uses_the_papers_training_size_and_fits_prepared_adult() -> None:
    params = override_params(negoescu.OVERRIDE)
    config = config_from_params(params)
    sizes = config.sizes_for("adult")
    assert sizes.members == 32_561  # Negoescu §6: |D| = 32,561
    assert config.train.baselines.epochs == (1.0, 5.0, 10.0, 20.0)
    assert config.train.dpsgd.target_epsilons == (1.0, 3.0, 10.0, 100.0)
    eval_size = params["data"]["prepare"]["adult"]["eval_size"]
    assert sizes.members + sizes.nonmembers == 45_222 - eval_size  # every prepared candidate row


def test_profiles_are_registered() -> None:
    assert get_profile("erlingsson-overfit").paper == "ERLINGSSON"
    assert get_profile("negoescu-adult").paper == "NEGOESCU"


def _fake_run(rows: list[dict[str, object]], checks: dict[str, int]) -> MembershipRun:
    frame = {k: [r[k] for r in rows] for k in rows[0]}
    config = config_from_params(override_params(negoescu.OVERRIDE))
    return MembershipRun(config, None, frame, checks, {}, {"repeats": 2, "candidates": 100}, [50, 50],  # type: ignore[arg-type]
                         1e-5, 1.0)  # fmt: skip


def _row(strategy: str, kind: str, star: float, null_mean: float, rdp: float) -> dict[str, object]:
    return {
        "strategy": strategy, "kind": kind, "epsilon_star_parametric": star, "epsilon_star_min": star,
        "epsilon_star_max": star + 0.1, "epsilon_star_spread_low": star, "epsilon_star_spread_high": star,
        "epsilon_star_null_mean": null_mean, "epsilon_star_null_high": 2 * null_mean, "utility": 0.8,
        "epsilon_rdp": rdp,
    }  # fmt: skip


def test_negoescu_measure_flags_the_null_floor_above_a_strong_noise_epsilon() -> None:
    rows = [
        _row("nondp-20ep", "nondp", 0.5, 0.05, math.nan),
        _row("dp-z1", "dp", 0.05, 0.04, 3.0),
        _row("dp-z64", "dp", 0.06, 0.04, 0.01),  # null mean 0.04 > ε 0.01: the floor is above ε
    ]
    checks = {
        "dp_models": 4,
        "epsilon_star_above_rdp": 2,
        "epsilon_star_above_rdp_and_null": 0,
        "epsilon_star_not_above_null": 5,
    }
    run = _fake_run(rows, checks)
    numbers = negoescu.measure(run)
    assert numbers["epsilon_star_largest"].value == pytest.approx(0.6)
    assert numbers["every_model_below_paper_adult_max"].value == 0.0  # 0.6 ≥ 0.3
    assert numbers["dp_strategies_null_above_rdp"].value == 1.0
    assert numbers["dp_models_epsilon_star_above_rdp"].value == 2.0
    assert numbers["models_epsilon_star_above_null"].value == 1.0  # 3 strategies × 2 models − 5
    assert "dp-z64.epsilon_rdp" in numbers and "nondp-20ep.epsilon_rdp" not in numbers
    text = " ".join(negoescu.findings(run, numbers))
    assert "dp-z64 (ε_RDP 0.01, null mean 0.04" in text and "does not hold" in text


def test_erlingsson_measure_pools_each_strategys_models_into_one_clopper_pearson_rate() -> None:
    from scipy.stats import binomtest

    from dpaudit.experiments.membership.bounds import model_key
    from dpaudit.table import ResultRow, ResultsTable

    config = config_from_params(override_params(erlingsson.OVERRIDE))
    tprs = {"dp-z0p5": [0.25, 0.15], "dp-z64": [0.05, 0.0], "nondp-200ep": [0.3, 0.2]}
    table = ResultsTable(
        ResultRow(model_key(s, "loss", r), "tpr_at_fpr_0p05", t, "threshold", "rate")
        for s, values in tprs.items()
        for r, t in enumerate(values)
    )
    rows = [
        {"strategy": "dp-z0p5", "kind": "dp", "noise_multiplier": 0.5, "accuracy": 0.4,
         "epsilon_lower_one_run": 0.1, "epsilon_rdp": 1000.0, "epsilon_pld": 900.0},
        {"strategy": "dp-z64", "kind": "dp", "noise_multiplier": 64.0, "accuracy": 0.1,
         "epsilon_lower_one_run": 0.0, "epsilon_rdp": 1.0, "epsilon_pld": 0.9},
        {"strategy": "nondp-200ep", "kind": "nondp", "noise_multiplier": math.nan, "accuracy": 0.8,
         "epsilon_lower_one_run": math.nan, "epsilon_rdp": math.nan, "epsilon_pld": math.nan},
    ]  # fmt: skip
    frame = {k: [r[k] for r in rows] for k in rows[0]}
    run = MembershipRun(config, table, frame, {}, {}, {"repeats": 2, "candidates": 80}, [20, 20], 1e-5, 1.0)
    numbers = erlingsson.measure(run)
    weak = numbers["dp-z0p5.attack_tpr"]
    assert weak.value == pytest.approx(8 / 40)  # (0.25·20 + 0.15·20) / 40
    ci = binomtest(8, 40).proportion_ci(confidence_level=0.95, method="exact")
    assert (weak.low, weak.high) == pytest.approx((ci.low, ci.high))
    assert numbers["dp-z64.attack_tpr"].value == pytest.approx(1 / 40)
    assert numbers["spearman_tpr_vs_noise"].value == pytest.approx(-1.0)
    assert "nondp-200ep.epsilon_lower" not in numbers and numbers["dp-z64.epsilon_rdp"].value == 1.0
    text = " ".join(erlingsson.findings(run, numbers))
    assert "above 0 for dp-z0p5 (0.1)" in text
