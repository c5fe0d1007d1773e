"""The target experiment (issue 15): your own trained Keras model as the audit's target.

A small Keras MLP is trained in the test on real data (scikit-learn's breast-cancer table, encoded
by the custom-dataset preparation) for many epochs, so it overfits its members; saved as ``.keras``
with a DVC record, with a membership CSV. ``target-prepare`` bundles them, and the pipeline runner
runs train → losses → attack → bounds: membership metrics for both attacks, Epsilon* with its
interval, and a report section whose provenance shows the model file's DVC digest. The mapped model
reproduces Keras' losses on the same weights.
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
from dpaudit.experiments.target.design.inputs import load_target_model, prepare_target, read_membership
from dpaudit.io import read_json
from dpaudit.report.spec import ReportSection
from dpaudit.sensitivity.search import SensitivityConfig, run_sensitivity

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
    metrics = read_json(audited["root"] / "metrics" / "mine-target.json")
    for attack in ("loss_threshold", "lira_offline"):
        m = metrics[attack]
        assert 0.0 <= m["auroc"] <= 1.0 and any(k.startswith("tpr_at_fpr") for k in m)
        assert any(k.startswith("epsilon_lower_best_valid") for k in m)
    # 150 epochs on 60 records: members' losses are lower, so the attack beats guessing.
    assert metrics["loss_threshold"]["auroc"] > 0.5
    assert metrics["loss_threshold"]["yeom_tpr"] >= metrics["loss_threshold"]["yeom_fpr"]
    star = metrics["epsilon_star"]
    assert star["interval_low"] <= star["value"] <= star["interval_high"] or star["value"] == 0.0
    assert 0.5 <= metrics["utility"]["accuracy_nonmembers"] <= 1.0


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
