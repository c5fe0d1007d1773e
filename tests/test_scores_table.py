"""The score-set contract, the results table and the one headline rule."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpaudit.bounds.audit import audit_score_sets
from dpaudit.bounds.registry import ESTIMATORS, estimator
from dpaudit.scores import ScoreSet, group_key, parse_group, read_score_sets, write_score_sets
from dpaudit.table import ResultRow, ResultsTable, headline, headline_metrics, versioned_row


def _gaussian_set(mu: float, n: int, seed: int, assumes: str = "none", **group: str) -> ScoreSet:
    rng = np.random.default_rng(seed)
    member = np.arange(2 * n) < n
    scores = rng.normal(size=2 * n) + mu * member
    return ScoreSet(group or {"setting": "a"}, scores, member, ("scores",), assumes, params={"delta": 1e-5})


def test_score_sets_round_trip(tmp_path):
    a = _gaussian_set(1.0, 50, 0, setting="x", attack="di")
    b = ScoreSet(
        {"threat_model": "F", "step": "3"},
        np.arange(4.0),
        [1, 0, 1, 0],
        ("scores",),
        "subsampled-gaussian",
        mechanism={"type": "GaussianDpEvent", "noise_multiplier": 1.0},
        params={"delta": 1e-5, "sampling_rate": 0.1, "steps": 100},
        arrays={"projections": np.ones((4, 7))},
        registered=("subsampled_gaussian",),
    )
    write_score_sets(tmp_path / "s.npz", [a, b])
    back = read_score_sets(tmp_path / "s.npz")
    assert [s.key for s in back] == ["setting=x/attack=di", "threat_model=F/step=3"]
    np.testing.assert_array_equal(back[0].scores, a.scores)
    assert back[1].member.tolist() == [True, False, True, False]
    assert back[1].arrays["projections"].shape == (4, 7)
    assert back[1].param("steps") == 100 and back[1].mechanism["noise_multiplier"] == 1.0
    assert back[0].registered is None and back[1].registered == ("subsampled_gaussian",)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": [1.0, math.nan]}, "NaN"),
        ({"member": [1, 0, 1]}, "member bits"),
        ({"member": [2, 0]}, "0/1"),
        ({"assumes": "laplace"}, "assumes"),
        ({"group": {"world": "D"}}, "unknown"),
        ({"estimators": ()}, "estimator"),
    ],
)
def test_score_set_refuses_bad_input(kwargs, message):
    base = {"group": {"setting": "a"}, "scores": [1.0, 2.0], "member": [1, 0], "estimators": ("scores",)}
    with pytest.raises(ValueError, match=message):
        ScoreSet(**{**base, **kwargs})


def test_headline_is_the_max_counted_bound_at_the_union_level():
    rows = [
        ResultRow("g1", "epsilon_lower", 1.0, "sweep_split", "bound", level=0.99, counted=True),
        ResultRow("g2", "epsilon_lower", 1.5, "sweep_split", "bound", level=0.98, counted=True),
        ResultRow("g2", "epsilon_lower", 9.0, "gdp", "bound", level=0.99, assumes="gaussian"),
        ResultRow("g2", "epsilon_estimate", 12.0, "sweep_naive", "estimate"),
    ]
    best = headline(rows)
    assert best.value == 1.5 and best.estimator == "sweep_split"
    assert best.level == pytest.approx(0.97)
    assert headline(rows[2:]).value == 0.0 and headline(rows[2:]).estimator == "none"
    assert headline_metrics(best)["epsilon_lower_level"] == pytest.approx(0.97)


def test_counted_row_must_be_a_bound():
    with pytest.raises(ValueError, match="counted"):
        ResultRow("g", "epsilon_estimate", 1.0, "x", "estimate", counted=True)
    with pytest.raises(ValueError, match="quantity"):
        ResultRow("g", "tpr_at_1pct", 1.0, "x", "rate")


def test_audit_splits_the_level_over_the_scope_and_table_round_trips(tmp_path):
    sets = [_gaussian_set(2.0, 300, i, setting=str(i)) for i in range(3)]
    table = audit_score_sets(sets, confidence=0.95)
    counted = [r for r in table.rows if r.counted]
    assert len(counted) == 6  # two assumption-free sweeps per set
    assert all(r.level == pytest.approx(1 - 0.05 / 6) for r in counted)
    assert table.headline().level == pytest.approx(0.95)
    # GDP is reported but, with no guarantee of a Gaussian mechanism, never counted.
    gdp = table.select("epsilon_lower", estimator="gdp")
    assert len(gdp) == 3 and not any(r.counted for r in gdp)
    assert {r.quantity for r in table.rows} >= {"tpr_at_fpr_0p01", "auroc", "advantage", "epsilon_estimate"}
    table.save(tmp_path / "t.csv")
    back = ResultsTable.load(tmp_path / "t.csv")
    written = ResultsTable([versioned_row(r) for r in table.rows])  # at its versioned precision
    pd.testing.assert_frame_equal(back.frame(), written.frame())
    assert back.frame()["value"].tolist() != table.frame()["value"].tolist()
    metrics = back.metrics()
    assert set(metrics) == {"setting=0", "setting=1", "setting=2"}
    assert metrics["setting=0"]["epsilon_lower_gdp_assumes"] == "gaussian"
    assert "tpr_at_fpr_0p01_low" in metrics["setting=0"]


def test_scopes_split_separately():
    sets = [_gaussian_set(2.0, 200, i, setting=str(i)) for i in range(2)]
    table = audit_score_sets(sets, confidence=0.9, scope=lambda s: s.key)
    assert all(r.level == pytest.approx(0.95) for r in table.rows if r.counted)
    assert table.headline(["setting=0"]).level == pytest.approx(0.9)


def test_gaussian_assumption_counts_gdp_only_when_declared():
    # A full-batch Gaussian mechanism with μ = 1: ε(δ=1e-5) of 1-GDP is ≈ 4.4; the bound must stay
    # below it, and GDP (counted here) must beat the sweeps with the same scores.
    table = audit_score_sets([_gaussian_set(1.0, 2000, 7, assumes="gaussian")], confidence=0.95)
    gdp = table.one("epsilon_lower", "setting=a", estimator="gdp")
    sweep = table.one("epsilon_lower", "setting=a", estimator="sweep_split")
    assert gdp.counted and gdp.value > sweep.value
    from dpaudit.bounds.tradeoff import gdp_epsilon

    assert table.headline().value <= gdp_epsilon(1.0, 1e-5)


def test_null_scores_give_a_zero_headline():
    rng = np.random.default_rng(3)
    s = ScoreSet(
        {"setting": "null"},
        rng.normal(size=4000),
        np.arange(4000) % 2 == 0,
        ("scores",),
        params={"delta": 1e-5},
    )
    assert audit_score_sets([s], 0.95).headline().value == pytest.approx(0.0, abs=0.05)


def test_registering_an_estimator_is_one_decorator():
    @estimator("toy_mean_gap", counted=lambda s: 0)
    def toy(s, counted_level, confidence):
        gap = float(s.in_scores.mean() - s.out_scores.mean())
        return [ResultRow(s.key, "epsilon_estimate", gap, "toy_mean_gap", "estimate")]

    try:
        s = ScoreSet({"setting": "t"}, [3.0, 1.0], [1, 0], ("toy_mean_gap",))
        assert audit_score_sets([s], 0.95).one("epsilon_estimate", "setting=t").value == 2.0
        with pytest.raises(ValueError, match="twice"):
            estimator("toy_mean_gap", counted=lambda s: 0)(toy)
    finally:
        ESTIMATORS.pop("toy_mean_gap")


def test_pre_registered_bound_keeps_the_whole_level():
    s = _gaussian_set(1.0, 500, 11, assumes="gaussian")
    s = ScoreSet(s.group, s.scores, s.member, s.estimators, s.assumes, params=s.params, registered=("gdp",))
    table = audit_score_sets([s], confidence=0.95)
    counted = [r for r in table.rows if r.counted]
    assert [r.estimator for r in counted] == ["gdp"] and counted[0].level == pytest.approx(0.95)
    bad = ScoreSet(s.group, s.scores, s.member, s.estimators, "none", params=s.params, registered=("gdp",))
    with pytest.raises(ValueError, match="does not guarantee"):
        audit_score_sets([bad], confidence=0.95)
    evidence = ScoreSet(s.group, s.scores, s.member, s.estimators, s.assumes, params=s.params, registered=())
    table = audit_score_sets([evidence], confidence=0.95)
    assert not any(r.counted for r in table.rows) and table.headline().estimator == "none"


def test_group_keys_have_one_spelling_and_select_by_part():
    key = group_key(attack="di", setting="rb0.9")  # order given does not matter
    assert (
        key
        == "setting=rb0.9/attack=di"
        == ScoreSet({"attack": "di", "setting": "rb0.9"}, [1.0], [1], ("x",)).key
    )
    assert parse_group(key) == {"setting": "rb0.9", "attack": "di"} and parse_group("") == {}
    with pytest.raises(ValueError, match="unknown"):
        group_key(world="D")
    rows = [
        ResultRow(g, "auroc", 0.5, "scores", "rate")
        for g in (key, "setting=rb0.99/attack=di", "setting=rb0.9")
    ]
    assert ResultsTable(rows).groups_where(setting="rb0.9") == [key, "setting=rb0.9"]
    assert ResultsTable(rows).groups_where(attack="di", setting="rb0.99") == ["setting=rb0.99/attack=di"]


def test_one_run_sets_count_the_one_run_bound_and_report_the_sweeps_as_estimates():
    # One run's canaries are no independent trials: the threshold sweeps over them are estimates, and
    # the one-run bound (Steinke et al.) keeps the whole level. It used to share it with two sweeps.
    table = audit_score_sets([_gaussian_set(3.0, 500, 8, assumes="one-run")], confidence=0.95)
    counted = [row for row in table.rows if row.counted]
    assert [row.estimator for row in counted] == ["one_run"]
    assert counted[0].level == 0.95
    sweeps = [row for row in table.rows if row.estimator in ("sweep_split", "sweep_bonferroni")]
    assert {(row.quantity, row.kind) for row in sweeps} == {("epsilon_estimate", "estimate")}
    assert table.headline().estimator == "one_run"
