"""Canaries audit (Aerni et al.; LiRA of Carlini et al. 2022): config, design, attacks, end to end."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from dpaudit import pipeline
from dpaudit.attacks.lira import lira_scores
from dpaudit.bounds.auditor import _tpr_at_fpr
from dpaudit.config import ParamsError, load_params
from dpaudit.data.parsers import parse_digits
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import Audit, get_experiment
from dpaudit.experiments.canaries.attack import label_only_scores
from dpaudit.experiments.canaries.bounds import roc_points
from dpaudit.experiments.canaries.config import (
    CANARY_TYPES,
    AttackParams,
    BoundsParams,
    CanaryCounts,
    DatasetSettings,
    TrainParams,
    config_from_params,
)
from dpaudit.experiments.canaries.design import balanced_membership, build_audit_set, query_augmentations
from dpaudit.io import read_json
from dpaudit.results import ReportSection
from dpaudit.table import ResultsTable


def test_repository_params_section_matches_the_config_defaults(repo_root: Path) -> None:
    config = get_experiment("canaries").config_from_params(load_params(repo_root / "params.yaml"))
    assert config.train == TrainParams()
    assert config.attack == AttackParams()
    assert config.bounds == BoundsParams()
    assert config.settings_for("digits") == DatasetSettings()
    assert config.settings_for("digits").canaries.total == 200 and config.train.models == 64


def test_config_errors_name_the_key() -> None:
    with pytest.raises(ParamsError, match="canaries.train.models"):
        config_from_params({"canaries": {"datasets": {}, "train": {"models": 7}}})
    with pytest.raises(ParamsError, match="canaries.datasets.digits.canaries.zz"):
        config_from_params({"canaries": {"datasets": {"digits": {"canaries": {"zz": 1}}}}})
    with pytest.raises(ParamsError, match="canaries.attack.variance"):
        config_from_params({"canaries": {"datasets": {}, "attack": {"variance": "pooled"}}})


def test_each_canary_is_in_exactly_half_of_the_models() -> None:
    m = balanced_membership(50, 16, np.random.default_rng(0))
    assert m.shape == (50, 16) and np.all(m.sum(axis=1) == 8)
    assert len({tuple(r) for r in m}) > 40  # seeded, not one pattern repeated


def test_audit_set_builds_every_canary_type() -> None:
    rng = np.random.default_rng(1)
    X = rng.uniform(size=(400, 8, 8, 1)).astype(np.float32)
    y = rng.integers(0, 10, 400)
    settings = DatasetSettings(base=100, canaries=CanaryCounts(10, 5, 5, 4, 2, 6), duplicate_copies=3)
    a = build_audit_set(X, y, np.arange(400), 10, settings, models=8, seed=2)
    kinds = {name: np.flatnonzero(a.canary_type == i) for i, name in enumerate(CANARY_TYPES)}
    assert np.all(a.canary_y[kinds["mislabeled"]] != y[a.source[kinds["mislabeled"]]])
    assert np.all(a.canary_y[kinds["clean"]] == y[a.source[kinds["clean"]]])
    np.testing.assert_array_equal(a.canary_x[kinds["clean"]], X[a.source[kinds["clean"]]])
    blank = a.canary_x[kinds["blank"]]
    flat = blank.reshape(len(blank), -1)
    assert np.all(flat == flat[:, :1])
    assert np.all(a.copies[kinds["duplicates"]] == 3) and np.sum(a.copies != 1) == 6
    # Mislabeled duplicates: repeated like duplicates, with a label that is not the record's.
    both = kinds["mislabeled_duplicates"]
    assert np.all(a.copies[both] == 3) and np.all(a.canary_y[both] != y[a.source[both]])
    Xt, yt, mask = a.training_arrays()
    assert len(Xt) == 100 + 32 + 6 * 2 and mask.shape == (8, len(Xt)) and mask[:, :100].all()
    # A duplicated canary's copies are in or out together, with its design bit.
    k = kinds["duplicates"][0]
    rows = 100 + np.cumsum(np.r_[0, a.copies])[k] + np.arange(3)
    assert np.all(mask[:, rows] == a.membership[k][:, None])
    assert query_augmentations(a.canary_x, True).shape[1] == 5
    assert query_augmentations(a.canary_x, False).shape[1] == 1


def test_label_only_scores_match_a_hand_computation() -> None:
    hits = np.array([[1, 1, 0, 0, 1, 0]])
    member = np.array([[True, True, True, False, False, False]])
    scores = label_only_scores(hits, member)
    # Target 0 (in, hit): in-shadows {1, 2} = hits {1, 0}; out: the first 2 after 0 = models {3, 4}
    # = hits {0, 1} → p_in = p_out = 1.5/3: score 0.
    assert scores[0, 0] == pytest.approx(0.0)
    # Target 3 (out, miss): out-shadows {4, 5} = {1, 0}; in: first 2 after 3 cyclically = {0, 1}
    # = {1, 1} → p_in = 2.5/3, p_out = 1.5/3.
    assert scores[0, 3] == pytest.approx(math.log(1 - 2.5 / 3) - math.log(1 - 1.5 / 3))
    # Target 2 (in, miss): in {0, 1} = {1, 1}; out {3, 4} = {0, 1}.
    assert scores[0, 2] == pytest.approx(math.log(1 - 2.5 / 3) - math.log(1 - 1.5 / 3))


def test_lira_with_no_signal_has_tpr_at_fpr_near_fpr() -> None:
    """Identical in/out distributions: the TPR at each FPR level lies in its interval around the FPR."""
    rng = np.random.default_rng(3)
    k, m = 200, 32
    member = balanced_membership(k, m, rng)
    phi = rng.normal(size=(k, m)) + rng.normal(size=(k, 1))  # per-canary offsets, no membership effect
    scores = lira_scores(phi, member)
    for level in (0.01, 0.05):
        tpr, low, high, fpr = _tpr_at_fpr(scores[member], scores[~member], level, 0.99)
        assert low <= level <= high and fpr <= level


def test_lira_on_synthetic_gaussians_matches_the_hand_computation() -> None:
    """φ ~ N(1, 1) in, N(0, 1) out: online scores are the log-likelihood ratio of the LOO fits."""
    rng = np.random.default_rng(4)
    member = balanced_membership(3, 20, rng)
    phi = rng.normal(size=(3, 20)) + member
    scores = lira_scores(phi, member)
    k, t = 1, int(np.flatnonzero(member[1])[0])
    ins = [phi[k, j] for j in range(20) if member[k, j] and j != t]
    outs = [phi[k, j] for j in range(20) if not member[k, j]]
    hand = norm.logpdf(phi[k, t], np.mean(ins), np.std(ins, ddof=1)) - norm.logpdf(
        phi[k, t], np.mean(outs), np.std(outs, ddof=1)
    )
    assert scores[k, t] == pytest.approx(hand, rel=1e-9)


def test_roc_points_never_exceed_the_grid_fpr() -> None:
    rng = np.random.default_rng(5)
    pos, neg = rng.normal(1, 1, 500), rng.normal(0, 1, 500)
    grid = np.array([0.002, 0.01, 0.1, 1.0])
    fpr, tpr = roc_points(pos, neg, grid)
    assert np.all(fpr <= grid + 1e-12) and tpr[-1] == 1.0 and np.all(np.diff(tpr) >= 0)


SMALL = {
    "train": {
        "seed": 1,
        "models": 16,
        "sampling_rate": 0.2,
        "epochs": 16,
        "learning_rate": 1.0,
        "dp_learning_rate": 2.0,
        "noise_multipliers": [8.0],
        "utility_first_noise": None,
    },
    "datasets": {
        "digits": {
            "base": 300,
            "canaries": {"mislabeled": 20, "blank": 0, "ood": 0, "duplicates": 0, "clean": 20},
        }
    },
    "attack": {"confidence": "logit", "variance": "per_sample", "augment": False},
    "bounds": {"confidence": 0.95, "fpr_levels": [0.01, 0.05]},
}


def test_end_to_end_mislabeled_canaries_leak_more_and_dp_bounds_stay_valid(tmp_path: Path) -> None:
    """Scaled-down acceptance (issue 14): 16 models, 20 mislabeled and 20 clean canaries on digits.

    (1) with a stated margin: undefended TPR at 5 % FPR on mislabeled canaries ≥ 3× that on clean
    records (the full profile asks 5× at 1 %); (5) every DP-SGD ε lower bound ≤ the accountants' ε.
    """
    parsed = parse_digits()
    n = len(parsed.X)
    order = np.random.default_rng(0).permutation(n)
    train, pool, evaluation = (np.sort(order[:100]), np.sort(order[100:1400]), np.sort(order[1400:]))
    prepared = PreparedData(
        "digits", "image", parsed.X, parsed.y, 10, parsed.feature_names, train, pool, evaluation
    )
    prepared.save(tmp_path / "data/prepared/digits.npz")
    params = {
        "data": {"datasets": ["digits"]},
        "audits": {"digits-canaries": {"dataset": "digits", "experiment": "canaries"}},
        "canaries": SMALL,
    }
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(params, "digits-canaries", root=tmp_path)
    audit = Audit("digits", "canaries", tmp_path)
    metrics = read_json(audit.results_path)
    lira = "defence=undefended/attack=lira_online_logit"
    mislabeled, clean = metrics[f"canary_type=mislabeled/{lira}"], metrics[f"canary_type=clean/{lira}"]
    assert mislabeled["tpr_at_fpr_0p05"] >= 3 * max(clean["tpr_at_fpr_0p05"], 0.01)
    assert (
        mislabeled["tpr_at_fpr_0p05_low"]
        <= mislabeled["tpr_at_fpr_0p05"]
        <= mislabeled["tpr_at_fpr_0p05_high"]
    )
    assert metrics["defence=undefended"]["utility"] > 0.8
    assert "tpr_at_fpr_0p01" in clean and not any("canary_tpr" in k for g in metrics.values() for k in g)
    table = ResultsTable.load(audit.results_table_path)
    dp_bound = table.headline([g for g in table.groups() if "defence=dpsgd-z8" in g.split("/")])
    # 16 models give 16 per-model decisions, fewer than 10 per world: nothing is counted, the bound is 0.
    assert dp_bound.estimator == "none" and dp_bound.value == 0.0
    assert dp_bound.value <= min(r.value for r in table.select("epsilon_upper", "defence=dpsgd-z8"))
    section = ReportSection.load(audit.section_path)
    undefended = table.headline([g for g in table.groups() if "defence=undefended" in g.split("/")])
    assert section.rows[0].epsilon_lower == undefended.value
    assert (tmp_path / "plots/digits-canaries/roc.csv").is_file()
    # The report's findings name the heuristic found by its kind, at the checks' level (1 % here).
    described = section.description
    heuristic = table.one("tpr_at_fpr_0p01", "canary_type=clean/defence=label-only/attack=label_only").value
    assert f"label-only heuristic: population-style TPR at 1% FPR {heuristic:.3g} " in described
    assert "0 of 1 DP-SGD ε lower bounds exceed the tightest accountant's ε" in described
    assert "undefended: TPR at 1% FPR on mislabeled canaries" in described
    assert dataclasses.is_dataclass(get_experiment("canaries").config_from_params(params))


def test_readme_recipes_pass_the_check_stage(repo_root: Path) -> None:
    """The README's mnist and 500-canary recipes (the `-S` overrides applied) pass `check_params`."""
    params = load_params(repo_root / "params.yaml")
    params["data"]["datasets"] = ["adult", "digits", "mnist"]
    params["audits"]["mnist-canaries"] = {"dataset": "mnist", "experiment": "canaries"}
    params["canaries"]["train"].update(models=16, epochs=10)
    digits = params["canaries"]["datasets"]["digits"]
    digits.update(
        base=700, canaries={"mislabeled": 200, "blank": 50, "ood": 50, "duplicates": 50, "clean": 150}
    )
    params["canaries"]["attack"].update(augment=True, confidence="hinge")
    audits = pipeline.check_params(params)
    assert "mnist-canaries" in {a.name for a in audits}
    assert params["data"]["prepare"]["mnist"]["pool"] == "test"


def test_per_model_headline_is_joint_over_canary_types():
    # Three canary types whose scores come from randomised response at ε = 1 (non-Gaussian, heavy
    # ties). The headline is the best type: it must exceed ε = 1 in at most 5 % of repeats.
    import math

    from dpaudit.experiments.canaries.bounds import per_model_bounds

    rng = np.random.default_rng(3)
    reps, models, per_type, eps = 60, 400, 4, 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    ctype = np.repeat([1, 2, 3], per_type)
    over = 0
    for _ in range(reps):
        membership = rng.random((ctype.size, models)) < 0.5
        scores = (membership ^ (rng.random(membership.shape) >= p)).astype(float)
        found = per_model_bounds(scores, membership, ctype, [1, 2, 3], 1e-5, 0.95, None, (0.01,))
        assert set(found) == {1, 2, 3}
        over += max(found.values()) > eps
    assert over / reps <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
