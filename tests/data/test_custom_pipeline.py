"""Custom datasets in the pipeline (issue 15): params, the check stage, the custom stages.

Bad input is refused by the check stage (:func:`dpaudit.pipeline.run_check`) before any training,
with an error naming the file and the problem, and no output written: a missing label column, a file
that does not match its DVC digest, an empty file, a single class, non-numeric junk in a numeric
column, and an unsupported Keras layer in a target model. The custom stages verify, copy and prepare
the file, and every experiment runs on it (identifiability here, in-process with tiny settings;
membership and target in ``tests/test_readme_own_data.py``). Real data: scikit-learn's breast-cancer
table.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.datasets import load_breast_cancer

from dpaudit import pipeline
from dpaudit.config import ParamsError, load_params
from dpaudit.data.custom import CustomDataError, DvcDigestError, download_custom, prepare_custom_stage
from dpaudit.data.prepare import DataConfig

REPO = Path(__file__).resolve().parents[2]


def dvc_record(path: Path) -> None:
    """Write ``<path>.dvc`` as ``dvc add`` (DVC 3) does: md5 of the bytes, size, hash: md5."""
    data = path.read_bytes()
    out = {"md5": hashlib.md5(data).hexdigest(), "size": len(data), "hash": "md5", "path": path.name}
    record = {"outs": [out]}
    path.with_name(path.name + ".dvc").write_text(yaml.safe_dump(record))


def cancer_frame(rows: int = 300) -> pd.DataFrame:
    frame = load_breast_cancer(as_frame=True).frame.head(rows).copy()
    frame["target"] = frame["target"].map({0: "malignant", 1: "benign"})
    return frame


def write_tracked(frame: pd.DataFrame, path: Path) -> Path:
    frame.to_csv(path, index=False)
    dvc_record(path)
    return path


def params_for(path: Path, **entry: Any) -> dict[str, Any]:
    """The repository's params with one custom dataset ``cancer`` at ``path`` and no audits."""
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    params["data"]["datasets"] = []
    params["data"]["custom"] = {
        "cancer": {"path": str(path), "label": "target", "train_size": 60, "eval_size": 60, **entry}
    }
    params["audits"] = {}
    return params


def refused(params: dict[str, Any], tmp_path: Path) -> str:
    """Run the check stage's body; it must fail and leave no marker behind. Returns the message."""
    out = tmp_path / "check" / "params.ok"
    with pytest.raises((CustomDataError, DvcDigestError, ParamsError, ValueError)) as info:
        pipeline.run_check(params, out_path=out)
    assert not out.exists() and not out.parent.exists()
    return str(info.value)


def test_params_declare_a_custom_dataset_and_audits_may_use_it(tmp_path: Path) -> None:
    path = write_tracked(cancer_frame(), tmp_path / "cancer.csv")
    params = params_for(path, measure="euclidean")
    params["audits"] = {"cancer-membership": {"dataset": "cancer", "experiment": "membership"}}
    params["membership"]["datasets"]["cancer"] = {"members": 50, "nonmembers": 50}
    audits = pipeline.check_params(params)
    assert [a.name for a in audits] == ["cancer-membership"]
    spec = DataConfig.from_params(params).custom_spec("cancer")
    assert spec.name == "cancer" and spec.measure == "euclidean" and spec.seed == params["data"]["seed"]


def test_unknown_key_wrong_measure_and_listing_in_datasets_name_the_key(tmp_path: Path) -> None:
    path = write_tracked(cancer_frame(), tmp_path / "cancer.csv")
    with pytest.raises(ParamsError, match=r"unknown key 'data.custom.cancer.lable'"):
        DataConfig.from_params(params_for(path, lable="x"))
    with pytest.raises(ParamsError, match=r"'data.custom.cancer.measure' = 'ssim'"):
        DataConfig.from_params(params_for(path, measure="ssim"))
    params = params_for(path)
    params["data"]["datasets"] = ["cancer"]
    with pytest.raises(ParamsError, match=r"data.datasets\[0\].*custom dataset"):
        DataConfig.from_params(params)


def test_missing_label_column(tmp_path: Path) -> None:
    path = write_tracked(cancer_frame().drop(columns="target"), tmp_path / "cancer.csv")
    message = refused(params_for(path), tmp_path)
    assert str(path) in message and "no label column 'target'" in message


def test_file_not_matching_its_dvc_digest(tmp_path: Path) -> None:
    path = write_tracked(cancer_frame(), tmp_path / "cancer.csv")
    frame = cancer_frame()
    frame.loc[3, "mean radius"] = 99.0
    frame.to_csv(path, index=False)
    message = refused(params_for(path), tmp_path)
    assert str(path) in message and "does not match its DVC record" in message and "dvc add" in message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "cancer.csv"
    path.write_bytes(b"")
    dvc_record(path)
    message = refused(params_for(path), tmp_path)
    assert str(path) in message and "empty" in message


def test_single_class(tmp_path: Path) -> None:
    frame = cancer_frame()
    frame["target"] = "benign"
    path = write_tracked(frame, tmp_path / "cancer.csv")
    message = refused(params_for(path), tmp_path)
    assert str(path) in message and "single class" in message


def test_non_numeric_junk_in_a_numeric_column(tmp_path: Path) -> None:
    frame = cancer_frame().astype({"mean area": object})
    frame.loc[7, "mean area"] = "n/a?"
    path = write_tracked(frame, tmp_path / "cancer.csv")
    message = refused(params_for(path), tmp_path)
    assert str(path) in message and "'mean area'" in message and "'n/a?'" in message


def test_unsupported_keras_layer_in_a_target_model(tmp_path: Path) -> None:
    import tensorflow as tf

    data = write_tracked(cancer_frame(), tmp_path / "cancer.csv")
    model = tf.keras.Sequential(
        [tf.keras.Input(shape=(30,)), tf.keras.layers.Dense(8, activation="relu"),
         tf.keras.layers.BatchNormalization(name="bn"), tf.keras.layers.Dense(2, activation="softmax")]
    )
    model_path = tmp_path / "model.keras"
    model.save(model_path)
    dvc_record(model_path)
    membership = tmp_path / "membership.csv"
    pd.DataFrame({"index": [0, 1, 2, 3], "member": [1, 1, 0, 0]}).to_csv(membership, index=False)
    dvc_record(membership)
    params = params_for(data)
    params["target"]["datasets"] = {
        "mine": {"dataset": "cancer", "model": str(model_path), "membership": str(membership)}
    }
    message = refused(params, tmp_path)
    assert "'bn'" in message and "BatchNormalization" in message and str(model_path) in message
    assert "per-example" in message


def test_download_stage_verifies_and_leaves_nothing_on_a_mismatch(tmp_path: Path) -> None:
    path = write_tracked(cancer_frame(), tmp_path / "cancer.csv")
    spec = DataConfig.from_params(params_for(path)).custom_spec("cancer")
    out = tmp_path / "raw" / "cancer"
    md5 = download_custom(spec, out)
    assert (out / "cancer.csv").read_bytes() == path.read_bytes()
    assert yaml.safe_load((out / "manifest.json").read_text())["md5"] == md5
    path.write_text(path.read_text().replace("malignant", "Malignant", 1))
    other = tmp_path / "raw" / "other"
    with pytest.raises(DvcDigestError, match="does not match its DVC record"):
        download_custom(spec, other)
    assert not other.exists()


@pytest.fixture(scope="module")
def custom_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The custom stages (download, prepare with provenance, sensitivity with the spec's measure) in a
    temporary root, and params with a tiny identifiability and membership audit on the dataset."""
    from dpaudit.data.prepared import PreparedData
    from dpaudit.io import read_json
    from dpaudit.sensitivity.search import SensitivityConfig, run_sensitivity

    tmp = tmp_path_factory.mktemp("custom")
    path = write_tracked(cancer_frame(200), tmp / "cancer.csv")
    params = params_for(path, measure="euclidean", train_size=40, eval_size=40)
    params["audits"] = {
        "cancer-identifiability": {"dataset": "cancer", "experiment": "identifiability"},
        "cancer-membership": {"dataset": "cancer", "experiment": "membership"},
    }
    params["identifiability"]["train"].update(
        {"rho_beta": [0.9], "sensitivities": ["global"], "neighbours": ["unbounded"], "trials": 20,
         "epochs": 2, "candidate_trials": 0}
    )
    # Architectures from params through modelling.build_model: a layer list for each experiment.
    params["identifiability"]["datasets"]["cancer"] = {
        "hidden": [4], "model": {"layers": [{"type": "dense", "units": 3}]}
    }
    params["membership"]["train"].update(
        {"repeats": 1, "dpsgd": {"sampling_rate": 0.5, "epochs": 2, "noise_multipliers": [1.0],
                                 "target_epsilons": []},
         "baselines": {"epochs": [2], "sampling_rate": 0.5}, "xgboost": {"enabled": False}}
    )
    params["membership"]["datasets"]["cancer"] = {
        "members": 50, "nonmembers": 50, "model": {"layers": [{"type": "dense", "units": 5}]}
    }
    pipeline.check_params(params)
    spec = DataConfig.from_params(params).custom_spec("cancer")
    root = tmp / "repo"
    download_custom(spec, root / "data" / "raw" / "cancer")
    prepared, provenance = prepare_custom_stage(spec, root / "data" / "raw" / "cancer",
                                                root / "data" / "prepared" / "cancer.npz")
    saved = read_json(root / "data" / "prepared" / "cancer.provenance.json")
    assert saved["file"] == str(path) and saved["md5"] == provenance["md5"] and saved["fitted_on"] == "pool"
    result = run_sensitivity(PreparedData.load(root / "data" / "prepared" / "cancer.npz"),
                             SensitivityConfig.from_params(params),
                             root / "data" / "sensitivity" / "cancer.json", measure=spec.measure)
    assert result.measure == "euclidean" and len(prepared.train_idx) == 40
    return root, params


@pytest.mark.parametrize("experiment", ["identifiability", "membership"])
def test_every_experiment_runs_on_a_custom_dataset(
    custom_repo: tuple[Path, dict[str, Any]], experiment: str
) -> None:
    from dpaudit.io import read_json

    root, params = custom_repo
    name = f"cancer-{experiment}"
    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(params, name, root=root)
    manifest = read_json(root / "data" / "train" / "cancer" / experiment / "manifest.json")
    assert manifest["facts"]["model"]["layers"][0]["type"] == "dense"
    metrics = read_json(root / "results" / f"{name}.json")
    leaves = pd.json_normalize(metrics).iloc[0]
    numbers = [v for k, v in leaves.items() if not k.endswith(("_assumes", "_estimator"))]
    assert numbers and all(np.isfinite(float(v)) for v in numbers)


def test_model_choice_layer_list_and_keras_file(tmp_path: Path) -> None:
    """Architectures for custom datasets from params (``model: {layers: …}`` / ``{keras: …}``)."""
    import tensorflow as tf

    from dpaudit.training.keras_import import UnsupportedLayerError
    from dpaudit.training.modelling import build_model

    listed = build_model("cancer", (30,), 2, None, {"layers": [{"type": "dense", "units": 8}]})
    assert listed.param_shapes == ((30, 8), (8,), (8, 2), (2,))
    keras = tf.keras.Sequential([tf.keras.Input(shape=(30,)), tf.keras.layers.Dense(5, activation="relu"),
                                 tf.keras.layers.Dense(2, activation="softmax")])
    keras.save(tmp_path / "arch.keras")
    (tmp_path / "arch.json").write_text(keras.to_json())
    for name in ("arch.keras", "arch.json"):
        mapped = build_model("cancer", (30,), 2, None, {"keras": str(tmp_path / name)})
        assert mapped.param_shapes == ((30, 5), (5,), (5, 2), (2,))
    with pytest.raises(ParamsError, match=r"'m.keras'.*\(30,\).*\(12,\)"):
        build_model("cancer", (12,), 2, None, {"keras": str(tmp_path / "arch.keras")}, where="m")
    with pytest.raises(UnsupportedLayerError, match=r"m.layers\[1\].*BatchNormalization|batch"):
        layers = [{"type": "dense", "units": 4}, {"type": "batchnorm"}]
        build_model("cancer", (30,), 2, None, {"layers": layers}, where="m")
    with pytest.raises(ParamsError, match="exactly one"):
        build_model("cancer", (30,), 2, None, {"layers": [{"type": "dense", "units": 4}], "keras": "a.keras"})
