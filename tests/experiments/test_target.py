"""The target experiment (issue 15): your own trained Keras model as the audit's target.

A small Keras MLP is trained in the test on real data (scikit-learn's breast-cancer table, encoded
by the custom-dataset preparation) for many epochs, so it overfits its members; saved as ``.keras``
with a DVC record, with a membership CSV. ``target-prepare`` bundles them, and the pipeline runner
runs train → losses → attack → bounds: per-model membership evidence for both attacks (never an ε
lower bound), Epsilon* beside its null level, and a report section whose provenance shows the model
file's DVC digest. The mapped model reproduces Keras' losses on the same weights. Synthetic score
files drive the bounds stage alone: a leak-free mechanism whose members differ from its
non-members by a distribution shift, and a declared DP configuration.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from tests.data.test_custom_pipeline import cancer_frame, dvc_record, write_tracked

from dpaudit import pipeline
from dpaudit.config import load_params
from dpaudit.data.custom import CustomDataError, prepare_custom_stage
from dpaudit.data.prepare import DataConfig
from dpaudit.experiments.base import TrainManifest
from dpaudit.experiments.target import bounds as target_bounds
from dpaudit.experiments.target import report as target_report
from dpaudit.experiments.target.config import (
    AttackParams,
    BoundsParams,
    DeclaredTraining,
    TargetConfig,
)
from dpaudit.experiments.target.design.inputs import load_target_model, prepare_target, read_membership
from dpaudit.io import read_json, write_npz
from dpaudit.layout import Audit
from dpaudit.results import ReportSection
from dpaudit.scores import ScoreSet, read_score_sets, write_score_sets
from dpaudit.sensitivity.search import SensitivityConfig, run_sensitivity
from dpaudit.table import ResultsTable

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    import tensorflow as tf

    from dpaudit.data.prepared import PreparedData

    tmp = tmp_path_factory.mktemp("target")
    root = tmp / "repo"
    data = write_tracked(cancer_frame(400), tmp / "cancer.csv")
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    params["data"]["datasets"] = []
    params["data"]["custom"] = {
        "cancer": {"path": str(data), "label": "target", "train_size": 60, "eval_size": 60,
                   "measure": "euclidean"}
    }
    spec = DataConfig.from_params(params).custom_spec("cancer")
    prepared_path = root / "data" / "prepared" / "cancer.npz"
    prepare_custom_stage(spec, _raw_copy(data, root), prepared_path)
    run_sensitivity(PreparedData.load(prepared_path), SensitivityConfig.from_params(params),
                    root / "data" / "sensitivity" / "cancer.json", measure="euclidean")
    prepared = PreparedData.load(prepared_path)
    X, y = prepared.split("train")
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([
        tf.keras.Input(shape=X.shape[1:]),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(prepared.num_classes, activation="softmax"),
    ])
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    model.fit(X, y, epochs=150, batch_size=60, verbose=0)
    model_path = tmp / "model.keras"
    model.save(model_path)
    dvc_record(model_path)
    membership = tmp / "membership.csv"
    rows = np.concatenate([prepared.train_idx, prepared.eval_idx])
    member = np.concatenate([np.ones(len(prepared.train_idx), int), np.zeros(len(prepared.eval_idx), int)])
    pd.DataFrame({"index": rows, "member": member}).to_csv(membership, index=False)
    dvc_record(membership)
    params["target"]["datasets"] = {
        "mine": {"dataset": "cancer", "model": str(model_path), "membership": str(membership)}
    }
    params["target"]["train"].update({"shadows": 6, "epochs": 20, "sampling_rate": 0.5, "learning_rate": 0.5})
    params["target"]["bounds"]["bootstrap"] = 30
    params["audits"] = {"mine-target": {"dataset": "mine", "experiment": "target"}}
    pipeline.check_params(params)
    entry = params["target"]["datasets"]["mine"]
    from dpaudit.experiments.target.config import config_from_params

    prepare_target("mine", config_from_params(params).model_for("mine"),
                   prepared_path, root / "data" / "sensitivity" / "cancer.json",
                   root / "data" / "prepared" / "mine.npz", root / "data" / "sensitivity" / "mine.json")
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(params, "mine-target", root=root)
    keras_losses = tf.keras.losses.sparse_categorical_crossentropy(
        prepared.y[rows], model.predict(prepared.X[rows], verbose=0)
    ).numpy()
    return {"root": root, "model": model_path, "entry": entry, "keras_losses": keras_losses, "params": params}


def _raw_copy(data: Path, root: Path) -> Path:
    raw = root / "data" / "raw" / "cancer"
    raw.mkdir(parents=True)
    (raw / data.name).write_bytes(data.read_bytes())
    return raw


def test_trained_keras_target_gets_membership_metrics(audited: dict[str, Any]) -> None:
    audit = Audit("mine", "target", audited["root"])
    metrics = read_json(audit.results_path)
    assert [s.key for s in read_score_sets(audit.scores_path)] == [
        "attack=lira_offline",
        "attack=loss_threshold",
        "attack=logit_loss",
    ]
    for attack in ("loss_threshold", "lira_offline"):
        m = metrics[f"attack={attack}"]
        assert m["auroc_low"] <= m["auroc"] <= m["auroc_high"]
        # One spelling per quantity: the FPR is part of the name (default levels 1, 5, 10 %).
        assert {"tpr_at_fpr_0p01", "tpr_at_fpr_0p05", "tpr_at_fpr_0p1"} <= set(m)
        advantage = "advantage" if attack == "lira_offline" else "advantage_scores"
        assert m[f"{advantage}_low"] <= m[advantage] <= m[f"{advantage}_high"]
    assert not [k for k in _keys(metrics) if "epsilon_lower" in k or "valid" in k]  # evidence, not bounds
    assert not any(r.counted for r in ResultsTable.load(audit.results_table_path).rows)
    # 150 epochs on 60 records: members' losses are lower, so the attack beats guessing.
    assert metrics["attack=loss_threshold"]["auroc"] > 0.5
    assert metrics["attack=loss_threshold"]["advantage_yeom"] >= 0
    star = metrics["attack=logit_loss"]
    assert star["epsilon_star_parametric_low"] <= star["epsilon_star_parametric_high"]
    assert 0.0 <= star["epsilon_star_null_mean"] <= star["epsilon_star_null_high"]
    assert not any("epsilon_upper" in k for k in _keys(metrics))  # nothing declared: no accountant's ε
    assert 0.5 <= metrics["audit"]["utility"] <= 1.0


def test_the_mapped_model_reproduces_keras_losses(audited: dict[str, Any]) -> None:
    with np.load(audited["root"] / "data" / "losses" / "mine" / "target.npz") as f:
        loss = f["loss"]
    np.testing.assert_allclose(loss, audited["keras_losses"], rtol=1e-3, atol=1e-4)


def test_report_section_shows_the_model_digest(audited: dict[str, Any]) -> None:
    import yaml

    root = audited["root"]
    md5 = yaml.safe_load(Path(str(audited["model"]) + ".dvc").read_text())["outs"][0]["md5"]
    section = ReportSection.load(root / "data" / "bounds" / "mine-target" / "section.json")
    cells = [str(c) for t in section.tables for row in t.rows for c in row]
    assert md5 in cells and md5 in section.description
    manifest = read_json(root / "data" / "train" / "mine" / "target" / "manifest.json")
    assert manifest["facts"]["model"]["model_md5"] == md5 and manifest["facts"]["source"] == "keras"
    bundled = load_target_model(root / "data" / "prepared" / "mine.npz")
    assert bundled is not None and bundled["bytes"] == Path(audited["model"]).read_bytes()
    from dpaudit.report.render import build_report

    out = root / "reports" / "index.html"
    build_report(root, out, root / "metrics" / "summary.json", "t", audits=["mine-target"])
    assert md5 in out.read_text()


def test_membership_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    pd.DataFrame({"row": [0, 1]}).to_csv(path, index=False)
    with pytest.raises(CustomDataError, match=rf"{path}: no column 'index'"):
        read_membership(path, 10)
    pd.DataFrame({"index": [0, 1, 2, 30], "member": [1, 1, 0, 0]}).to_csv(path, index=False)
    with pytest.raises(CustomDataError, match="30"):
        read_membership(path, 10)
    pd.DataFrame({"index": [0, 1, 2, 3], "member": [1, "yes", 0, 0]}).to_csv(path, index=False)
    with pytest.raises(CustomDataError, match="'yes'"):
        read_membership(path, 10)


def _keys(tree: Any, prefix: str = "") -> list[str]:
    if isinstance(tree, dict):
        return [k for key, value in tree.items() for k in _keys(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def _synthetic_audit(root: Path, shift: float, n: int, seed: int) -> tuple[Audit, TrainManifest]:
    """Score files of an ε = 0 "mechanism": every score depends only on the record, and members are
    drawn from a distribution shifted by ``shift`` sd (higher score / lower loss), not leaked."""
    rng = np.random.default_rng(seed)
    audit = Audit("mine", "target", root)
    is_member = np.r_[np.ones(n, bool), np.zeros(n, bool)]
    record = rng.normal(size=2 * n) + shift * is_member  # what the model sees of each record
    params = {"delta": 1e-4, "seed": seed, "fpr_levels": "0.01,0.1"}
    audit.attack_dir.mkdir(parents=True)
    write_score_sets(audit.scores_path, [
        ScoreSet({"attack": "lira_offline"}, record + 0.1 * rng.normal(size=2 * n), is_member, ("rates",),
                 params=params),
        ScoreSet({"attack": "loss_threshold"}, record, is_member, ("rates",), params=params),
        ScoreSet({"attack": "logit_loss"}, record, is_member, ("epsilon_star",), params=params),
    ])
    write_npz(audit.losses_path, {"accuracy": np.array(0.8)})
    manifest = TrainManifest(experiment="target", dataset="mine", delta=1e-4,
                             sizes={"members": n, "nonmembers": n, "pool": 0, "shadows": 4},
                             seeds={"seed": seed}, mechanisms={}, facts={"source": "reference"})
    return audit, manifest


def test_shift_under_a_leak_free_mechanism_is_never_an_epsilon_lower_bound(tmp_path: Path) -> None:
    """The old "valid" bound was positive in 38 of 50 repeats here; now no ε lower bound exists at all."""
    config = TargetConfig(attack=AttackParams(confidence=0.95, fpr_levels=(0.01, 0.1)),
                          bounds=BoundsParams(bootstrap=10))
    aurocs = []
    for seed in range(5):
        audit, manifest = _synthetic_audit(tmp_path / str(seed), shift=0.2, n=2000, seed=seed)
        result = target_bounds.bounds(config, audit, manifest)
        assert not [k for k in _keys(result.metrics) if "epsilon_lower" in k or "valid" in k]
        for row in result.summary:
            assert row.epsilon_lower is None and row.epsilon_upper == {}
            assert row.epsilon_lower_estimator == target_bounds.EVIDENCE_ONLY
        aurocs.append(result.metrics["attack=lira_offline"]["auroc_low"])
        assert not any(r.counted or r.kind == "bound" for r in result.table.rows)
        section = target_report.section(config, audit, manifest, result)
        text = " ".join([section.description, *(t.title for t in section.tables),
                         *(str(c) for t in section.tables for c in t.columns)])
        assert "ε lower" not in text and "valid" not in text and "best" not in text
        assert "not a bound on the ε of the training algorithm" in section.description
        assert section.headline.epsilon_lower is None
    # The evidence does see the shift (AUROC ≈ Φ(0.2/√2) = 0.556): it is real, about these records,
    # and says nothing about the training algorithm.
    assert np.mean(aurocs) > 0.5


def test_declared_configuration_gives_every_accountants_epsilon(tmp_path: Path) -> None:
    from dpaudit.bounds.accountants import all_epsilons

    declared = DeclaredTraining(batch_size=100, dataset_size=2000, epochs=5, noise_multiplier=1.2,
                                clip_norm=1.0, delta=1e-5)
    assert declared.q == pytest.approx(0.05) and declared.total_steps == 100
    config = TargetConfig(attack=AttackParams(fpr_levels=(0.1,)), bounds=BoundsParams(bootstrap=10,
                                                                                      declared=declared))
    audit, manifest = _synthetic_audit(tmp_path, shift=0.0, n=300, seed=1)
    result = target_bounds.bounds(config, audit, manifest)
    expected = all_epsilons(1.2, 0.05, 100, 1e-5)
    upper = {k.removeprefix("epsilon_upper_"): v for k, v in result.metrics["audit"].items() if "upper" in k}
    assert upper == pytest.approx(expected)
    assert result.context["declared"]["steps"] == 100 and result.context["declared"]["clip_norm"] == 1.0
    assert result.summary[0].epsilon_upper == pytest.approx(expected)
    assert result.summary[0].epsilon_lower is None
    section = target_report.section(config, audit, manifest, result)
    table = next(t for t in section.tables if t.id.endswith("declared"))
    assert [r[0] for r in table.rows] == list(expected)
    assert f"ε ≤ {min(expected.values()):.3g}" in section.description


@pytest.mark.parametrize(
    ("declared", "key"),
    [
        ({"batch_size": 100, "steps": 10, "noise_multiplier": 1.0}, "declared.dataset_size"),
        ({"sampling_rate": 0.1, "batch_size": 10, "dataset_size": 100, "steps": 10, "noise_multiplier": 1.0},
         "declared.sampling_rate"),
        ({"sampling_rate": 0.1, "noise_multiplier": 1.0}, "declared.steps"),
        ({"sampling_rate": 0.1, "steps": 10}, "declared.noise_multiplier"),
        ({"sampling_rate": 1.5, "steps": 10, "noise_multiplier": 1.0}, "declared.sampling_rate"),
        ({"sampling_rate": 0.1, "steps": 10, "noise_multiplier": 1.0, "clip": 1.0}, "declared.clip"),
    ],
)
def test_declared_configuration_errors_name_the_key(declared: dict[str, Any], key: str) -> None:
    from dpaudit.config import ParamsError
    from dpaudit.experiments.target.config import config_from_params

    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    params["target"]["bounds"]["declared"] = declared
    with pytest.raises(ParamsError, match=f"target.bounds.{key}"):
        config_from_params(params)
