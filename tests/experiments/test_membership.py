"""Membership audit: config, calibration, attacks on memorising and control models, the four stages."""

from __future__ import annotations

import copy
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpaudit import pipeline
from dpaudit.bounds.accountants import compute_epsilon
from dpaudit.bounds.epsilon_star import default_delta
from dpaudit.config import ParamsError, load_params
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import Audit, get_experiment
from dpaudit.experiments.base import Mechanism, TrainManifest, read_manifest, write_manifest
from dpaudit.experiments.membership.attack import analyse_model
from dpaudit.experiments.membership.bounds import pareto_frontier
from dpaudit.experiments.membership.config import SplitSizes, config_from_params
from dpaudit.experiments.membership.design import draw_splits, plan_strategies
from dpaudit.io import write_npz
from dpaudit.results import ReportSection

SMALL = {
    "train": {
        "seed": 3,
        "repeats": 2,
        "dpsgd": {
            "sampling_rate": 0.25,
            "epochs": 3,
            "clip_norm": 1.0,
            "learning_rate": 1.0,
            "noise_multipliers": [1.0, 8.0],
            "target_epsilons": [3.0],
            "calibration_accountant": "rdp",
        },
        "baselines": {"epochs": [1, 30], "sampling_rate": 0.25, "learning_rate": 1.0},
        "xgboost": {"enabled": True, "n_estimators": 10, "max_depth": 3, "learning_rate": 0.3},
    },
    "datasets": {"synthetic": {"members": 120, "nonmembers": 120, "hidden": [16]}},
    "attack": {"fpr": 0.05, "confidence": 0.95, "selection": "split"},
}
PARAMS = {
    "data": {"datasets": ["synthetic"]},
    "audits": {"synthetic-membership": {"dataset": "synthetic", "experiment": "membership"}},
    "membership": SMALL,
}


def test_repository_params_section_is_valid(repo_root: Path) -> None:
    config = get_experiment("membership").config_from_params(load_params(repo_root / "params.yaml"))
    assert config.train.repeats == 5
    assert set(config.train.dpsgd.target_epsilons) == {1.0, 3.0, 10.0, 100.0}
    assert config.sizes_for("adult").members >= 1000


def test_config_errors_name_the_key() -> None:
    bad = copy.deepcopy(SMALL)
    bad["train"]["dpsgd"]["sampling_rat"] = 0.1
    with pytest.raises(ParamsError, match="membership.train.dpsgd.sampling_rat"):
        config_from_params({"membership": bad})
    bad = copy.deepcopy(SMALL)
    bad["attack"]["fpr"] = 1.5
    with pytest.raises(ParamsError, match=r"'membership.attack.fpr' = 1.5"):
        config_from_params({"membership": bad})
    with pytest.raises(ParamsError, match="membership.datasets.adult"):
        config_from_params({"membership": SMALL}).sizes_for("adult")


def test_calibrated_strategies_hit_their_target_under_the_calibrating_accountant() -> None:
    members = 2000
    delta = default_delta(members)
    assert delta == pytest.approx(1.0 / (2000 * math.log(2000)))
    for accountant, targets in (("rdp", [1.0, 10.0]), ("pld", [3.0])):
        raw = copy.deepcopy(SMALL)
        raw["train"]["dpsgd"].update(target_epsilons=targets, calibration_accountant=accountant, epochs=2)
        config = config_from_params({"membership": raw})
        calibrated = [s for s in plan_strategies(config, members, delta) if s.target_epsilon is not None]
        assert [s.target_epsilon for s in calibrated] == targets
        for s in calibrated:
            eps = compute_epsilon(s.noise_multiplier, s.sampling_rate, s.steps, delta, accountant)
            assert s.steps == 8  # 2 epochs at q = 0.25
            assert s.target_epsilon * (1 - 1e-3) <= eps <= s.target_epsilon * (1 + 1e-9)


def test_splits_are_disjoint_per_repeat_and_differ_between_repeats() -> None:
    candidates = np.arange(10, 400)
    splits = draw_splits(candidates, np.arange(400, 450), SplitSizes(100, 80), repeats=3, seed=0, dataset="x")
    assert splits.member_mask.shape == (3, 180) and splits.inclusion_probability == pytest.approx(100 / 180)
    for r in range(3):
        assert not set(splits.members(r)) & set(splits.nonmembers(r))
        assert set(splits.members(r)) | set(splits.nonmembers(r)) == set(splits.population)
    assert len(splits.population) == 180 and np.isin(splits.population, candidates).all()
    assert not np.array_equal(splits.members(0), splits.members(1))
    with pytest.raises(ParamsError, match="membership.datasets.x"):
        draw_splits(candidates, np.arange(5), SplitSizes(300, 100), repeats=1, seed=0, dataset="x")


def test_membership_is_an_independent_fair_coin_per_candidate() -> None:
    """The one-run audit (Steinke et al. 2023) needs each candidate included independently with
    probability 1/2, so member counts vary (Binomial) instead of being a fixed-size subset."""
    candidates = np.arange(0, 1000)
    splits = draw_splits(candidates, np.arange(5), SplitSizes(100, 100), repeats=400, seed=1, dataset="x")
    assert splits.inclusion_probability == 0.5
    counts = np.asarray(splits.member_counts)
    assert len(set(counts.tolist())) > 5  # not a fixed-size subset
    assert abs(counts.mean() - 100) < 2 and 4 < counts.std() < 9  # Binomial(200, 1/2): sd ≈ 7.1
    share = splits.member_mask.mean(axis=0)  # per candidate, over repeats: ≈ 1/2 for every one
    assert abs(share.mean() - 0.5) < 0.01 and np.all(np.abs(share - 0.5) < 0.15)


def test_pareto_frontier_is_the_convex_upper_left_hull() -> None:
    #               A     B     C     D (non-dominated, under A–B)   E (dominated by B)
    loss = np.array([0.0, 1.0, 2.0, 0.5, 1.5])
    utility = np.array([0.5, 0.9, 0.95, 0.6, 0.8])
    np.testing.assert_array_equal(pareto_frontier(loss, utility), [True, True, True, False, False])
    assert pareto_frontier(np.array([1.0, np.nan]), np.array([0.5, 0.9])).tolist() == [True, False]


@pytest.fixture(scope="module")
def memorised() -> dict[str, np.ndarray]:
    """Non-DP MLP trained full-batch for many steps on 40 records with random binary labels.

    Nothing generalises, so members end with near-zero loss while held-out records get a
    confident coin flip: half a large loss, half a small one (pure memorisation)."""
    from dpaudit.attacks.membership import losses_from_logits
    from dpaudit.experiments.modelling import neural_logits
    from dpaudit.training.dpsgd import DPSGDConfig, train_trials
    from dpaudit.training.models import mlp

    rng = np.random.default_rng(11)
    n_members, n_heldout = 40, 1600
    X = rng.normal(size=(n_members + n_heldout, 20)).astype(np.float32)
    y = rng.integers(0, 2, size=len(X))
    model = mlp("memorise", 20, 2, (64,))
    mask = np.zeros((1, len(X)), dtype=bool)
    mask[0, :n_members] = True
    cfg = DPSGDConfig(clip_norm=None, noise_multiplier=0.0, learning_rate=0.5, steps=400, sampling_rate=1.0)
    params = train_trials(model, X, y, mask, cfg, seed=0).params
    ce, logit = losses_from_logits(neural_logits(model, params, X)[0], y)
    return {
        "ce": ce,
        "logit": logit,
        "members": np.arange(n_members),
        "heldout": np.arange(n_members, len(X)),
    }


def test_attack_on_memorising_model_finds_large_advantage_and_epsilon_star(memorised: dict) -> None:
    members, nonmembers = memorised["members"], memorised["heldout"][:400]
    delta = default_delta(len(members))
    result = analyse_model(
        memorised["ce"][members],
        memorised["ce"][nonmembers],
        memorised["logit"][members],
        memorised["logit"][nonmembers],
        delta,
    )
    assert result.naive_advantage > 0.75
    assert result.yeom_advantage > 0.4
    assert result.epsilon_per_model_test > 1.0  # Clopper–Pearson on the held-out half (20 + 200 records)
    assert result.epsilon_naive_estimate > 1.0
    assert result.epsilon_star_spread_low <= result.epsilon_star_parametric <= result.epsilon_star_spread_high
    assert result.epsilon_star_above_null == 1.0  # a memorising model stands out of the null level
    assert 0.0 < result.epsilon_star_null_mean <= result.epsilon_star_null_high
    assert result.epsilon_star_null_high < result.epsilon_star_parametric
    assert result.epsilon_star_parametric > 3.0
    assert result.epsilon_star_empirical > 3.0


def test_halves_of_one_heldout_set_show_no_leakage(memorised: dict) -> None:
    heldout = memorised["heldout"]
    ce, logit = memorised["ce"], memorised["logit"]
    rng = np.random.default_rng(5)
    valid, stars, above, memorised_star = [], [], [], None
    for r in range(5):
        order = rng.permutation(heldout)
        a, b = order[:800], order[800:]
        result = analyse_model(ce[a], ce[b], logit[a], logit[b], default_delta(len(a)), seed=r)
        valid.append(result.epsilon_per_model_test)
        stars.append(result.epsilon_star_parametric)
        assert 0.0 <= result.epsilon_star_null_mean <= result.epsilon_star_null_high
        above.append(result.epsilon_star_above_null)
        assert abs(result.yeom_advantage) < 0.1
    members = memorised["members"]
    memorised_star = analyse_model(
        ce[members], ce[heldout[:800]], logit[members], logit[heldout[:800]], default_delta(40)
    ).epsilon_star_parametric
    assert sum(v == 0.0 for v in valid) >= 4  # "0 in most repeats"
    assert np.mean(stars) < 0.5  # ≈ 0: the estimator's finite-sample floor, far below a leaking model
    assert np.mean(stars) < 0.1 * memorised_star
    assert sum(above) <= 1  # one distribution: at most a chance exceedance of the null 95th percentile


def _synthetic_prepared(path: Path) -> PreparedData:
    rng = np.random.default_rng(0)
    n, d = 700, 8
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] + rng.normal(scale=0.8, size=n) > 0).astype(np.int64)
    order = rng.permutation(n)
    prepared = PreparedData(
        name="synthetic",
        kind="tabular",
        X=X,
        y=y,
        num_classes=2,
        feature_names=tuple(f"f{i}" for i in range(d)),
        train_idx=np.sort(order[:50]),
        pool_idx=np.sort(order[50:500]),
        eval_idx=np.sort(order[500:]),
    )
    prepared.save(path)
    return prepared


def _leaves(tree: object) -> list[object]:
    if isinstance(tree, dict):
        return [leaf for value in tree.values() for leaf in _leaves(value)]
    return [tree]


def test_four_stages_end_to_end_on_a_small_synthetic_dataset(tmp_path: Path) -> None:
    audit = Audit("synthetic", "membership", tmp_path)
    _synthetic_prepared(audit.prepared_path)

    pipeline.run_train(PARAMS, audit.name, root=tmp_path)
    manifest = read_manifest(audit)
    names = [s["name"] for s in manifest.facts["strategies"]]
    assert names == ["dp-z1", "dp-z8", "dp-eps3", "nondp-1ep", "nondp-30ep", "xgboost"]
    assert list(manifest.mechanisms) == names
    assert manifest.delta == pytest.approx(default_delta(120)) and manifest.seeds == {"seed": 3}
    assert manifest.sizes == {"members": 120, "nonmembers": 120, "candidates": 240, "repeats": 2}
    assert manifest.facts["inclusion_probability"] == 0.5
    counts = manifest.facts["member_counts"]
    assert len(counts) == 2 and all(0 < c < 240 for c in counts)
    assert manifest.mechanisms["dp-z1"].dp_event().event.sampling_probability == 0.25
    assert manifest.mechanisms["xgboost"].event == {"type": "NonPrivateDpEvent"}
    assert manifest.facts["poisson_sampling"] is True
    assert {p.name for p in audit.train_dir.glob("xgboost-r*.ubj")} == {"xgboost-r0.ubj", "xgboost-r1.ubj"}

    pipeline.run_losses(PARAMS, audit.name, root=tmp_path)
    with np.load(audit.losses_path) as f:
        assert f["ce"].shape == (12, 240) and f["logit"].shape == (12, 240)
        assert f["member_mask"].shape == (12, 240) and f["member_mask"].dtype == bool
        np.testing.assert_array_equal(f["member_mask"].sum(axis=1), np.tile(counts, 6))
        assert np.all(np.isfinite(f["ce"])) and np.all(f["ce"] >= 0)
        assert np.all((f["auroc"] > 0) & (f["auroc"] <= 1))
        np.testing.assert_array_equal(f["model_repeat"], [0, 1] * 6)
        assert f["accuracy"][f["model_strategy"] == 5].min() > 0.7  # XGBoost on an easy linear task

    pipeline.run_attack(PARAMS, audit.name, root=tmp_path)
    with np.load(audit.attack_dir / "attack.npz") as f:
        star = f["epsilon_star_parametric"]
        assert star.shape == (12,) and np.all(star >= 0)
        assert np.all(f["naive_advantage"] >= f["yeom_advantage"] - 1e-12)  # max over thresholds
        assert np.all(f["epsilon_star_spread_low"] <= f["epsilon_star_spread_high"])
        assert set(np.unique(f["epsilon_star_above_null"])) <= {0.0, 1.0}

    pipeline.run_bounds(PARAMS, audit.name, root=tmp_path)
    metrics = json.loads(audit.results_path.read_text())
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in _leaves(metrics))
    calibrated = metrics["strategies"]["dp-eps3"]
    assert calibrated["epsilon_upper"]["rdp"] == pytest.approx(3.0, rel=1e-3)
    for name in ("dp-z1", "dp-z8", "dp-eps3"):
        upper = metrics["strategies"][name]["epsilon_upper"]
        assert max(upper["rdp"], upper["pld"]) <= min(upper["naive"], upper["advanced"])
    assert "epsilon_upper" not in metrics["strategies"]["xgboost"]
    assert set(metrics["strategies"]["xgboost"]["epsilon_star_parametric"]) == {"mean", "min", "max"}
    # The one-run bound (Steinke et al. 2023) is a valid bound on the mechanism: below every accountant.
    for name in ("dp-z1", "dp-z8", "dp-eps3"):
        entry = metrics["strategies"][name]
        bound = entry["epsilon_lower_one_run"]
        assert 0 <= bound <= entry["epsilon_upper"]["pld"] + 1e-9
        assert bound == pytest.approx(entry["epsilon_one_run"]["min"])
        assert "epsilon_lower_valid" not in entry and "epsilon_per_model_test" in entry
    assert metrics["checks"]["one_run_above_rdp"] == 0

    with open(audit.plots_dir / "rotated_table.csv") as handle:
        rotated = list(csv.DictReader(handle))
    assert [float(r["noise_multiplier"]) for r in rotated] == sorted(
        (float(r["noise_multiplier"]) for r in rotated), reverse=True
    )
    assert {r["strategy"] for r in rotated} == {"dp-z1", "dp-z8", "dp-eps3"}
    with open(audit.plots_dir / "privacy_utility.csv") as handle:
        pu = list(csv.DictReader(handle))
    assert len(pu) == 6 and any(r["pareto"] == "True" for r in pu)
    # The region of privacy holds valid lower bounds and accountants only; estimates live elsewhere.
    with open(audit.plots_dir / "region.csv") as handle:
        region_columns = next(csv.reader(handle))
    assert region_columns == [
        "strategy",
        "noise_multiplier",
        "epsilon_lower_one_run",
        "epsilon_naive",
        "epsilon_advanced",
        "epsilon_rdp",
        "epsilon_pld",
    ]

    section = ReportSection.load(audit.section_path)
    assert len(section.rows) == 6 and section.headline.setting.startswith("DP-SGD ε=3")
    assert [t.id for t in section.tables] == [
        "synthetic-membership-rotated",
        "synthetic-membership-epsilon-star",
    ]
    region = next(f for f in section.figures if f.id.endswith("region"))
    assert region.x_log and region.y_log and region.data == "plots/synthetic-membership/region.csv"
    assert region.y == region_columns[2:]
    assert not any("estimate" in c or "star" in c or "per_model" in c for c in region.y)
    estimates = next(f for f in section.figures if f.id.endswith("estimates"))
    assert "not bounds" in estimates.title and "epsilon_star_parametric" in estimates.y
    headline = section.headline
    assert headline.epsilon_lower_estimator.startswith("one-run (Steinke et al. 2023)")
    assert "joint 95%" in headline.epsilon_lower_estimator
    assert "probability 1/2" in headline.epsilon_lower_assumes
    assert next(f for f in section.figures if f.id.endswith("privacy-utility")).highlight == "pareto"


def test_bounds_outputs_aggregate_repeats_and_flag_findings(tmp_path: Path) -> None:
    """bounds + section on hand-made per-model numbers: mean/min/max per strategy, accountants, checks."""
    from dpaudit.bounds.accountants import all_epsilons
    from dpaudit.experiments.membership.attack import ModelAttack
    from dpaudit.experiments.membership.design import Strategy

    dp = Strategy(
        "dp-z1",
        "dp",
        "dp",
        "DP-SGD z=1",
        noise_multiplier=1.0,
        clip_norm=1.0,
        sampling_rate=0.1,
        steps=10,
        epochs=1.0,
        learning_rate=1.0,
    )
    xgb = Strategy("xgboost", "xgboost", "xgboost", "XGBoost")
    audit = Audit("toy", "membership", tmp_path)
    manifest = TrainManifest(
        experiment="membership",
        dataset="toy",
        delta=1e-5,
        sizes={"members": 100, "nonmembers": 100, "repeats": 2},
        seeds={"seed": 0},
        mechanisms={"dp-z1": Mechanism.dpsgd(1.0, 0.1, 10, 1.0), "xgboost": Mechanism.non_private(0, 1.0)},
        facts={
            "strategies": [dp.to_dict(), xgb.to_dict()],
            "num_classes": 2,
            "hidden": None,
            "calibration_accountant": "rdp",
            "poisson_sampling": True,
            "inclusion_probability": 0.5,
        },
    )
    write_manifest(audit.train_dir, manifest)
    fields = list(ModelAttack.__dataclass_fields__)
    attack = {name: np.zeros(4) for name in fields}
    attack["epsilon_star_parametric"] = np.array([0.2, 0.4, 0.0, 3.0])  # xgboost r0: 0 despite a leak
    attack["naive_advantage"] = np.array([0.05, 0.1, 0.9, 0.9])
    attack["epsilon_star_above_null"] = np.array([1.0, 1.0, 0.0, 1.0])
    attack.update(
        model_strategy=np.array([0, 0, 1, 1]),
        fpr=np.asarray(0.05),
        confidence=np.asarray(0.95),
        selection=np.asarray("split"),
    )
    write_npz(audit.attack_dir / "attack.npz", attack)
    losses = {
        "accuracy": np.array([0.7, 0.8, 0.9, 0.95]),
        "auroc": np.array([0.75, 0.85, 0.9, 0.96]),
        "train_accuracy": np.ones(4),
        # 200 candidates per model; dp r1 separates members perfectly (an impossible leak for its
        # noise), so its one-run bound must exceed the RDP ε: a finding.
        "ce": np.tile(np.linspace(1.0, 2.0, 200), (4, 1)),
        "member_mask": np.tile(np.arange(200) % 2 == 0, (4, 1)),
    }
    losses["ce"][1] = np.where(losses["member_mask"][1], 0.0, 50.0)
    write_npz(audit.losses_path, losses)
    params = {
        "data": {"datasets": ["toy"]},
        "audits": {"toy-membership": {"dataset": "toy", "experiment": "membership"}},
        "membership": {**SMALL, "datasets": {"toy": {"members": 100, "nonmembers": 100}}},
    }
    pipeline.run_bounds(params, audit.name, root=tmp_path)

    metrics = json.loads(audit.results_path.read_text())
    star = metrics["strategies"]["dp-z1"]["epsilon_star_parametric"]
    assert star == pytest.approx({"mean": 0.3, "min": 0.2, "max": 0.4})
    assert metrics["strategies"]["xgboost"]["utility"] == pytest.approx(
        {"mean": 0.93, "min": 0.9, "max": 0.96}
    )
    expected = all_epsilons(1.0, 0.1, 10, 1e-5)
    assert metrics["strategies"]["dp-z1"]["epsilon_upper"] == pytest.approx(expected)
    checks = metrics["checks"]
    assert checks["dp_models"] == 2 and checks["one_run_above_rdp"] == 1
    assert checks["epsilon_star_not_above_null"] == 1
    one_run = metrics["strategies"]["dp-z1"]["epsilon_one_run"]
    assert one_run["min"] < 1.0 < expected["rdp"] < one_run["max"]
    # The reported bound on the mechanism is the smallest over repeats (each valid at the joint level).
    assert metrics["strategies"]["dp-z1"]["epsilon_lower_one_run"] == one_run["min"]
    assert checks["epsilon_star_zero_despite_leak"] == 1
    section = ReportSection.load(audit.section_path)
    assert "1 DP model(s) have a one-run lower bound above their RDP ε" in section.description
    assert "1 model(s) have an Epsilon* not above its null level" in section.description
    star_table = next(t for t in section.tables if t.id.endswith("epsilon-star"))
    above = star_table.columns.index("above the null level")
    assert star_table.rows[0][above] == "yes" and star_table.rows[1][above] == "1 of 2 models"
    assert "null level: 95th pct." in star_table.columns
    assert not any("interval" in c for c in star_table.columns)  # a bootstrap spread, not a CI
    assert section.rows[1].epsilon_upper == {} and section.rows[1].epsilon_star == pytest.approx(1.5)
    assert list(section.scores) == ["epsilon_star", "epsilon_star_null_high"]
    assert section.rows[1].scores["epsilon_star_null_high"] == 0.0
