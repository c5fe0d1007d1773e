"""Unit tests of the one-run audit (Steinke, Nasr & Jagielski 2023) as a pipeline experiment.

Config errors name their key; the gradient canaries' game is exactly the Gaussian canary game of the
declared full-batch mechanism (closed-form mean and spread of the scores, trainer injection equal to
the linear path); the bounds stage's headline is the largest counted analysis at its Bonferroni level;
a tiny train → bounds run on synthetic data catches a broken pipeline that the correct one does not
trip. The contract test runs every stage with ``onerun/smoke.yaml``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpaudit import pipeline
from dpaudit.bounds.onerun import audit_one_run
from dpaudit.config import ParamsError, load_params
from dpaudit.data.prepared import PreparedData
from dpaudit.experiments import get_experiment
from dpaudit.experiments.base import Mechanism, TrainManifest, read_manifest
from dpaudit.experiments.onerun.attack import score_set
from dpaudit.experiments.onerun.bounds import bounds
from dpaudit.experiments.onerun.config import BoundsParams, OneRunConfig, TrainParams, config_from_params
from dpaudit.experiments.onerun.design import (
    analysis_counts,
    canary_coordinates,
    clip_canaries,
    curve_sizes,
    padding_for,
    setting_seed,
)
from dpaudit.io import read_json, write_npz
from dpaudit.layout import Audit
from dpaudit.precision import measured
from dpaudit.results import ReportSection
from dpaudit.scores import read_score_sets, write_score_sets
from dpaudit.table import ResultsTable

DELTA = 1e-5


def _params(train: dict[str, Any] | None = None, bounds: dict[str, Any] | None = None) -> dict[str, Any]:
    section: dict[str, Any] = {"datasets": {"adult": {"hidden": [4]}}}
    if train is not None:
        section["train"] = train
    if bounds is not None:
        section["bounds"] = bounds
    return {"onerun": section}


# ------------------------------------------------------------------------------------------ config


def test_repository_params_section_matches_the_config_defaults(repo_root: Path) -> None:
    config = get_experiment("onerun").config_from_params(load_params(repo_root / "params.yaml"))
    assert config.train == TrainParams() and config.bounds == BoundsParams()
    assert config.train.break_ == "none" and config.train.canaries == 1000


@pytest.mark.parametrize(
    ("train", "bounds", "key"),
    [
        ({"break": "noise_div2"}, None, r"'onerun\.train\.break' = 'noise_div2'"),
        ({"canaries": 5}, None, r"'onerun\.train\.canaries' = 5"),
        ({"epsilon": 2.0, "noise_multiplier": 1.0}, None, r"'onerun\.train\.epsilon'"),
        ({"epsilon": None}, None, r"'onerun\.train\.epsilon'"),
        (
            {"canary_kind": "input", "break": "unclipped_layer"},
            None,
            r"'onerun\.train\.break' = 'unclipped_layer'",
        ),
        ({"break": "unclipped_layer", "canary_norm": 1.0}, None, r"'onerun\.train\.canary_norm' = 1\.0"),
        ({"sampling_rate": 0.0}, None, r"'onerun\.train\.sampling_rate' = 0\.0"),
        ({"break_": "none"}, None, r"unknown key 'onerun\.train\.break_'"),
        ({"zz": 1}, None, r"unknown key 'onerun\.train\.zz'"),
        (None, {"analyses": ["steinke", "steinke"]}, r"'onerun\.bounds\.analyses'"),
        (None, {"analyses": ["gdp"]}, r"'onerun\.bounds\.analyses\[0\]' = 'gdp'"),
        (None, {"confidence": 1.0}, r"'onerun\.bounds\.confidence' = 1\.0"),
        # Counts above m were silently replaced by m.
        ({"canaries": 500}, {"curve_canaries": [100, 1000]},
         r"'onerun\.bounds\.curve_canaries' = \[100, 1000\] .*at most train\.canaries = 500"),
    ],
)
def test_config_rejects_bad_values_naming_the_key(
    train: dict[str, Any] | None, bounds: dict[str, Any] | None, key: str
) -> None:
    with pytest.raises(ParamsError, match=key):
        config_from_params(_params(train, bounds))


def test_break_is_read_from_its_params_key() -> None:
    config = config_from_params(_params({"break": "noise_div10", "noise_multiplier": 2.0, "epsilon": None}))
    assert config.train.break_ == "noise_div10" and config.train.noise_multiplier == 2.0
    with pytest.raises(ParamsError, match=r"missing key 'onerun\.datasets\.digits'"):
        config.dataset("digits")


# ------------------------------------------------------------------------------------------ design


def test_setting_seed_is_a_stable_function_of_the_values() -> None:
    a = setting_seed({"seed": 0, "canaries": 1000, "dataset": "adult"})
    assert a == setting_seed({"dataset": "adult", "canaries": 1000, "seed": 0})  # order-free
    assert a != setting_seed({"seed": 1, "canaries": 1000, "dataset": "adult"})
    assert 0 <= a < 2**31


def test_canaries_sit_on_distinct_inert_coordinates() -> None:
    zero = np.array([False, True, False, True])  # features 1 and 3 are 0 in every record
    assert padding_for(zero, units=3, canaries=6) == 0
    assert padding_for(zero, units=3, canaries=10) == 2  # 6 inert weights, 4 more need 2 features
    coords = canary_coordinates(zero, 3, 6, seed=[0, 2])
    assert sorted(coords) == [3, 4, 5, 9, 10, 11]  # W[1, :] and W[3, :] of a row-major [4, 3] kernel
    with pytest.raises(ValueError, match="7 canaries need 7 inert coordinates"):
        canary_coordinates(zero, 3, 7, seed=0)


def test_clipping_of_canaries_and_the_unclipped_layer_break() -> None:
    raw, layer = np.array([10.0, 0.5, -4.0]), np.array([0, 0, 2])
    assert clip_canaries(raw, layer, 1.0) == pytest.approx([1.0, 0.5, -1.0])
    assert clip_canaries(raw, layer, 1.0, unclipped_layers=[0]) == pytest.approx([10.0, 0.5, -1.0])


def test_fdp_gaussian_counts_only_for_the_full_batch_gaussian_mechanism() -> None:
    assert analysis_counts("steinke", 0.1) and analysis_counts("steinke", 1.0)
    assert analysis_counts("fdp_gaussian", 1.0) and not analysis_counts("fdp_gaussian", 0.1)
    assert curve_sizes([100, 250, 5000], 1000) == [100, 250, 1000]


# ------------------------------------------------------------------------- the gradient canary game


def _tiny_game(q: float, z: float, steps: int, m: int = 600) -> tuple[Any, ...]:
    from dpaudit.experiments.onerun.train import run_gradient_canaries  # noqa: F401  (TF import)
    from dpaudit.training import dpsgd, models

    rng = np.random.default_rng(3)
    X = np.hstack([rng.normal(size=(40, 3)), np.zeros((40, 150))]).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    model = models.mlp("toy", X.shape[1], 2, [4])
    coords = canary_coordinates(np.all(X == 0, axis=0), 4, m, seed=1)
    included = np.random.default_rng(2).random(m) < 0.5
    entered = clip_canaries(np.full(m, 5.0), np.zeros(m, int), 1.0)
    cfg = dpsgd.DPSGDConfig(
        clip_norm=1.0, noise_multiplier=z, learning_rate=0.3, steps=steps, sampling_rate=q
    )
    return model, X, y, cfg, coords, entered, included


def test_trainer_injection_equals_the_linear_path_on_inert_coordinates() -> None:
    """At q = 1 the two ways of adding the canaries give the same θ_T: the data never touches the
    canary coordinates, so the linear path used under Poisson sampling is exact."""
    from dpaudit.experiments.onerun.train import run_gradient_canaries

    model, X, y, cfg, coords, entered, included = _tiny_game(1.0, 2.0, 5)
    via_trainer, steps_a = run_gradient_canaries(model, X, y, cfg, coords, entered, included, 7, linear=False)
    linear, steps_b = run_gradient_canaries(model, X, y, cfg, coords, entered, included, 7, linear=True)
    assert np.array_equal(steps_a, steps_b) and set(steps_a) == {0, 5}
    np.testing.assert_allclose(via_trainer, linear, rtol=0, atol=2e-6)
    with pytest.raises(ValueError, match="linear=True for q < 1"):
        run_gradient_canaries(
            model, X, y, _tiny_game(0.5, 2.0, 5)[3], coords, entered, included, 7, linear=False
        )


@pytest.mark.parametrize("q", [1.0, 0.25])
def test_gradient_canary_scores_follow_the_gaussian_canary_game(q: float) -> None:
    """Score = movement along the canary in summed-gradient units = C·(steps entered) + N(0, z²C²T):
    excluded canaries have mean 0 and sd z·√T, included ones mean T·q (C = 1)."""
    from dpaudit.experiments.onerun.attack import canary_scores
    from dpaudit.experiments.onerun.train import run_gradient_canaries

    z, steps = 2.0, 8
    model, X, y, cfg, coords, entered, included = _tiny_game(q, z, steps)
    flat, steps_in = run_gradient_canaries(model, X, y, cfg, coords, entered, included, 11)
    theta0 = np.concatenate([p[0].ravel() for p in model.init(1, 11)])
    scale = cfg.learning_rate / max(q * len(X), 1.0)
    run = {"theta0": theta0[coords], "theta_final": flat[coords], "update_scale": np.float64(scale)}
    score = canary_scores("gradient", run, {})
    noise = score - steps_in * entered
    sd = z * math.sqrt(steps)
    assert abs(noise.mean()) < 4 * sd / math.sqrt(noise.size)
    assert noise.std() == pytest.approx(sd, rel=0.1)
    assert score[included].mean() == pytest.approx(steps * q, abs=4 * sd / math.sqrt(included.sum()) + 0.1)


# ---------------------------------------------------------------------------------- bounds stage


def _bounds_inputs(
    root: Path, scores: np.ndarray, included: np.ndarray, q: float, claimed: float, config: OneRunConfig
) -> tuple[Audit, TrainManifest]:
    audit = Audit("adult", "onerun", root)
    audit.losses_path.parent.mkdir(parents=True, exist_ok=True)
    write_npz(audit.losses_path, {"test_accuracy": np.float64(0.8)})
    manifest = TrainManifest(
        experiment="onerun",
        dataset="adult",
        delta=DELTA,
        sizes={"D": 100, "canaries": scores.size, "included": int(included.sum()), "padding": 0},
        seeds={"seed": 0, "setting_seed": 5},
        mechanisms={"declared": Mechanism.dpsgd(3.0, q, 30, 1.0)},
        facts={"canary_kind": "gradient", "break": "none", "epsilon_claimed": claimed, "sampling_rate": q,
               "noise_multiplier_used": 3.0},
    )  # fmt: skip
    audit.attack_dir.mkdir(parents=True, exist_ok=True)
    write_score_sets(audit.scores_path, [score_set(config, manifest, scores, included)])
    return audit, manifest


@pytest.mark.parametrize("q", [1.0, 0.1])
def test_bounds_stage_headline_is_the_largest_counted_analysis_at_its_share(tmp_path: Path, q: float) -> None:
    rng = np.random.default_rng(0)
    included = rng.random(400) < 0.5
    scores = rng.normal(size=400) + 4.0 * included  # μ = 4: far more than ε = 1 allows
    config = OneRunConfig(bounds=BoundsParams(curve_canaries=[100], ceiling_repeats=3))
    audit, manifest = _bounds_inputs(tmp_path, scores, included, q, 1.0, config)
    (s,) = read_score_sets(audit.scores_path)
    assert s.key == "canary_type=gradient" and s.assumes == ("gaussian" if q == 1.0 else "one-run")
    result = bounds(config, audit, manifest)
    # Full batch: both analyses count and share 5 %; subsampled: only steinke counts, at 95 % alone,
    # and fdp_gaussian is reported at 95 %, uncounted.
    level = 0.975 if q == 1.0 else 0.95
    direct = {
        a: audit_one_run(scores, included, delta=DELTA, confidence=level, analysis=a, seed=5).epsilon_lower
        for a in ("steinke", "fdp_gaussian")
    }
    table = result.table
    assert table is not None
    rows = {a: table.one("epsilon_lower", s.key, estimator=f"one_run_{a}") for a in direct}
    assert rows["steinke"].value == pytest.approx(direct["steinke"]) and rows["steinke"].counted
    assert rows["fdp_gaussian"].value == pytest.approx(direct["fdp_gaussian"])
    assert rows["fdp_gaussian"].counted == (q == 1.0) and rows["fdp_gaussian"].assumes == "gaussian"
    assert rows["steinke"].level == pytest.approx(level) and rows["steinke"].assumes == "one-run"
    expected = max(direct.values()) if q == 1.0 else direct["steinke"]  # fdp counts only for full batch
    head = result.metrics["headline"]["audit"]
    assert head["epsilon_lower"] == pytest.approx(expected) and head["epsilon_lower"] > 1.0
    assert head["epsilon_lower_level"] == pytest.approx(0.95)
    row = result.summary[0]
    assert row.epsilon_lower == pytest.approx(expected) and row.confidence == pytest.approx(0.95)
    assert row.scores["caught"] == 1.0 and row.scores["epsilon_claimed"] == 1.0
    assert set(row.epsilon_upper) == {"rdp", "pld", "naive", "advanced"} and row.epsilon_upper["pld"] > 0
    assert result.metrics["audit"]["utility"] == pytest.approx(0.8)
    assert result.metrics[s.key]["epsilon_lower_one_run_steinke"] == pytest.approx(direct["steinke"])
    curve = result.plots["curve.csv"]
    assert list(curve["canaries"]) == [100, 400]
    assert curve["epsilon_lower_steinke"].iloc[-1] == pytest.approx(direct["steinke"])
    assert (curve["ceiling_fdp_gaussian"] >= 0).all()
    assert curve["ceiling_fdp_gaussian"].iloc[-1] > 0 or q < 1.0  # 3 Monte Carlo runs: may be 0 at 95 %


def test_bounds_stage_does_not_catch_scores_that_ignore_inclusion(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    included = rng.random(400) < 0.5
    config = OneRunConfig(bounds=BoundsParams(curve_canaries=[100], ceiling_repeats=3))
    audit, manifest = _bounds_inputs(tmp_path, rng.normal(size=400), included, 1.0, 1.0, config)
    result = bounds(config, audit, manifest)
    assert result.metrics["headline"]["audit"]["epsilon_lower"] < 0.5
    assert result.summary[0].scores["caught"] == 0.0


# ---------------------------------------------------------------------------- train → bounds


def _synthetic_adult(root: Path) -> None:
    rng = np.random.default_rng(0)
    n, d = 600, 5
    X = rng.normal(size=(n, d)).astype(np.float32)
    y = (X[:, 0] + rng.normal(scale=0.5, size=n) > 0).astype(np.int64)
    order = rng.permutation(n)
    train, pool, evaluation = np.sort(order[:60]), np.sort(order[60:450]), np.sort(order[450:])
    audit = Audit("adult", "onerun", root)
    names = tuple(f"f{i}" for i in range(d))
    PreparedData("adult", "tabular", X, y, 2, names, train, pool, evaluation).save(audit.prepared_path)


def _run(root: Path, train: dict[str, Any]) -> dict[str, Any]:
    params = {
        "data": {"datasets": ["adult"]},
        "audits": {"adult-onerun": {"dataset": "adult", "experiment": "onerun"}},
        **_params(
            {"canaries": 300, "epsilon": 2.0, "steps": 4, **train},
            {"curve_canaries": [100], "ceiling_repeats": 3},
        ),
    }
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(params, "adult-onerun", root=root)
    audit = Audit("adult", "onerun", root)
    row = ReportSection.load(audit.section_path).rows[0]
    table = ResultsTable.load(audit.results_table_path)
    assert table.headline().value == measured(row.epsilon_lower, "down")  # the CSV's: rounded down
    manifest = read_manifest(audit)
    return {
        "epsilon_lower": row.epsilon_lower,
        **row.scores,
        "noise_multiplier": manifest.mechanisms["declared"].noise_multiplier,
        "noise_multiplier_used": manifest.facts["noise_multiplier_used"],
    }


def test_a_broken_pipeline_gives_a_larger_bound_and_is_caught(tmp_path: Path) -> None:
    _synthetic_adult(tmp_path)
    correct = _run(tmp_path, {})
    assert correct["caught"] == 0.0 and correct["epsilon_lower"] <= correct["epsilon_claimed"]
    manifest = read_json(Audit("adult", "onerun", tmp_path).manifest_path)
    assert manifest["sizes"]["padding"] == 75  # 300 canaries on 4 units: 75 all-zero features
    broken = _run(tmp_path, {"break": "noise_div10"})
    assert broken["epsilon_claimed"] == correct["epsilon_claimed"]  # the claim stays the declared one
    assert broken["noise_multiplier_used"] == pytest.approx(correct["noise_multiplier"] / 10)
    assert broken["epsilon_lower"] > correct["epsilon_lower"] and broken["caught"] == 1.0
    unclipped = _run(tmp_path, {"break": "unclipped_layer"})
    assert unclipped["epsilon_lower"] > correct["epsilon_lower"] and unclipped["caught"] == 1.0


def test_input_canaries_give_a_valid_bound(tmp_path: Path) -> None:
    _synthetic_adult(tmp_path)
    metrics = _run(tmp_path, {"canary_kind": "input", "canaries": 200, "epsilon": 4.0})
    assert 0.0 <= metrics["epsilon_lower"] <= metrics["epsilon_claimed"] and metrics["caught"] == 0.0
    manifest = read_json(Audit("adult", "onerun", tmp_path).manifest_path)
    assert manifest["sizes"]["padding"] == 0 and manifest["facts"]["input_dim"] == 5
    with pytest.raises(ValueError, match="onerun.train.canaries = 400: input canaries are pool records"):
        _run(tmp_path, {"canary_kind": "input", "canaries": 400})


def test_break_is_read_and_named_by_its_params_key() -> None:
    """``break`` is a Python keyword: the field is ``break_``, but params and errors say ``break``."""
    from dpaudit.config import ParamsError
    from dpaudit.experiments.onerun.config import config_from_params

    config = config_from_params({"onerun": {"train": {"break": "noise_div10"}}})
    assert config.train.break_ == "noise_div10"
    with pytest.raises(ParamsError, match=r"'onerun\.train\.break' = 'sometimes'"):
        config_from_params({"onerun": {"train": {"break": "sometimes"}}})
    with pytest.raises(ParamsError, match=r"unknown key 'onerun\.train\.break_'.*\bbreak\b"):
        config_from_params({"onerun": {"train": {"break_": "none"}}})
    with pytest.raises(ParamsError, match=r"onerun\.train\.break"):
        config_from_params({"onerun": {"train": {"break": "unclipped_layer", "canary_kind": "input"}}})


def test_the_ceiling_does_not_reseed_on_the_last_digits_of_epsilon() -> None:
    """Two CPUs' accountants gave ε = 3.9999982113978327 and 3.999998211445642; the ceiling was seeded
    from that float and moved by up to 15 % between them. It is seeded from the setting alone now."""
    from dpaudit.experiments.onerun.bounds import ideal_ceiling

    a = ideal_ceiling(3.9999982113978327, 1e-5, 100, "steinke", 0.95, 8)
    b = ideal_ceiling(3.999998211445642, 1e-5, 100, "steinke", 0.95, 8)
    assert a == pytest.approx(b, rel=1e-6)


def test_the_verdict_says_when_the_audit_could_not_catch_a_violation() -> None:
    """A ceiling below the claim reads as 'could not catch a violation', never as a bare number."""
    from dpaudit.experiments.onerun.report import verdict_words

    words = verdict_words(False, 0.2, 4.0, 1.83, 0.95)
    assert words.startswith("no violation found") and "1.83" in words and "below the claim 4" in words
    assert "could not catch a violation" in words
    assert "could not catch" not in verdict_words(False, 0.2, 4.0, 6.0, 0.95)
    assert verdict_words(True, 9.0, 4.0, 6.0, 0.95).startswith("VIOLATION PROVEN: ε ≥ 9 > claimed 4")
