"""New inputs are checked before any work: every problem a tester found stops ``check`` (or the
loader) with a message naming the file, column or key and the limit, instead of passing silently.

Covers: path-safe names, the Keras file as a per-audit DVC dependency, an uncommitted new data version,
complex numbers, sizes only the dataset can refuse (each refused by the real check stage in < 10 s),
numeric columns (inf, overflowing range), date- and list-like columns, identifier-like labels, the
non-finite optional float, and the Keras config allow-list.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpaudit.config import (
    MODEL_RECORDS_DIR,
    ParamsError,
    check_limits,
    check_names,
    dataset_entry,
    from_mapping,
    load_params,
    model_records,
)
from dpaudit.data.custom import (
    CustomDataError,
    CustomDatasetSpec,
    committed_record_md5,
    dataset_size,
    download_custom,
    load_custom,
)
from dpaudit.data.parsers import POPULATIONS
from dpaudit.data.prepare import DataConfig
from dpaudit.layout import Audit
from dpaudit.training.keras_import import (
    UnsafeKerasConfigError,
    check_keras_config,
    load_keras_model,
    model_from_keras_file,
)

REPO = Path(__file__).resolve().parents[1]
CHECK_SCRIPT = REPO / "stages" / "check.py"


def _params() -> dict:
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    # the check runs in a folder of its own, without examples/ (where the training audit's function lives)
    params["audits"].pop("digits-training_audit", None)
    return params


def _run_check(work: Path, params: dict) -> tuple[int, str, float]:
    """The real check stage in ``work``: exit status, its log, and its wall-clock seconds."""
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    (work / "models").mkdir(exist_ok=True)
    env = {**os.environ, "DPAUDIT_PROGRESS": "0", "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": str(REPO / "src")}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(CHECK_SCRIPT)], cwd=work, env=env, capture_output=True,
                          text=True)
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - started


# ------------------------------------------------------------------------------ 1. path-safe names


def test_escaping_target_and_audit_names_are_refused_by_key():
    params = _params()
    params["target"]["datasets"] = {"../../../esc": {"dataset": "digits"}}
    params["audits"] = {"../../../esc-target": {"dataset": "../../../esc", "experiment": "target"}}
    with pytest.raises(ParamsError, match=r"'target\.datasets\.\.\./\.\./\.\./esc' = '\.\./\.\./\.\./esc' "
                       r"is not a safe name.*no '/', no '\.\.'"):
        check_names(params)
    from dpaudit.experiments.target.config import config_from_params

    with pytest.raises(ParamsError, match=r"'target\.datasets\.\.\./\.\./\.\./esc'.*not a safe name"):
        config_from_params(params)  # at config parse too, not only in check
    params["target"]["datasets"] = {}
    params["audits"] = {"a..b-membership": {"dataset": "a..b", "experiment": "membership"}}
    with pytest.raises(ParamsError, match=r"'audits\.a\.\.b-membership'.*not a safe name"):
        check_names(params)
    with pytest.raises(ParamsError, match=r"'membership\.datasets\.\.\./x'.*not a safe name"):
        dataset_entry({}, "membership", "../x")
    check_names(_params())  # the shipped names pass
    for good in ("cancer", "cancer_model", "v1.2-data", "0abc"):
        check_names({"target": {"datasets": {good: {}}}, "audits": {f"{good}-target": {"dataset": good}}})


def test_the_check_stage_refuses_an_escaping_target_name(tmp_path):
    params = _params()
    params["target"]["datasets"] = {"../../../esc": {"dataset": "digits"}}
    params["audits"] = {"../../../esc-target": {"dataset": "../../../esc", "experiment": "target"}}
    status, log, _ = _run_check(tmp_path, params)
    assert status == 1 and "target.datasets.../../../esc" in log and "not a safe name" in log
    assert not (tmp_path / "data" / "check" / "params.ok").exists()


# --------------------------------------------------------------- 2. the Keras file is a DVC dependency


def test_dvc_yaml_makes_each_audits_keras_record_a_train_dependency():
    from dvc.repo import Repo

    repo = Repo(str(REPO))
    (check,) = repo.stage.collect("check")
    assert "models" in [str(d.def_path) for d in check.deps]
    assert str(MODEL_RECORDS_DIR) in [str(o.def_path) for o in check.outs]
    for audit in ("digits-identifiability", "adult-membership"):
        (train,) = repo.stage.collect(f"train@{audit}")
        assert f"{MODEL_RECORDS_DIR}/{audit}.json" in [str(d.def_path) for d in train.deps]


def test_editing_a_keras_file_changes_exactly_its_audits_record(tmp_path):
    import tensorflow as tf

    (tmp_path / "models").mkdir()
    model = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.save(tmp_path / "models" / "arch.keras")
    params = _params()
    params["identifiability"]["datasets"]["digits"] = {"hidden": [8], "model": {"keras": "models/arch.keras"}}
    audits = [Audit("digits", "identifiability"), Audit("adult", "identifiability"),
              Audit("digits", "membership")]
    before = model_records(params, audits, root=tmp_path)
    digest = hashlib.md5((tmp_path / "models" / "arch.keras").read_bytes()).hexdigest()
    assert before["digits-identifiability"] == {
        "audit": "digits-identifiability", "keras": "models/arch.keras", "md5": digest}
    assert before["adult-identifiability"]["md5"] is None and before["digits-membership"]["md5"] is None
    tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(16, activation="relu"),
                         tf.keras.layers.Dense(10)]).save(tmp_path / "models" / "arch.keras")
    after = model_records(params, audits, root=tmp_path)
    assert after["digits-identifiability"]["md5"] != digest
    assert {k: v for k, v in after.items() if k != "digits-identifiability"} == {
        k: v for k, v in before.items() if k != "digits-identifiability"}
    params["identifiability"]["datasets"]["digits"]["model"] = {"keras": "elsewhere/arch.keras"}
    with pytest.raises(ParamsError, match=r"'identifiability\.datasets\.digits\.model\.keras' = "
                       r"'elsewhere/arch\.keras'.*must be a file under models/"):
        model_records(params, audits, root=tmp_path)


# ------------------------------------------------------------------ 3. a new, uncommitted data version


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _track(path: Path) -> str:
    """What ``dvc add`` writes for ``path`` (md5 of its bytes, size); returns the md5."""
    md5 = hashlib.md5(path.read_bytes()).hexdigest()
    record = {"outs": [{"md5": md5, "size": path.stat().st_size, "hash": "md5", "path": path.name}]}
    path.with_name(path.name + ".dvc").write_text(yaml.safe_dump(record))
    return md5


def test_a_modified_data_file_is_audited_with_the_new_digest_named(tmp_path, caplog):
    frame = pd.DataFrame({"x": np.arange(40.0), "y": [0, 1] * 20})
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    old = _track(data)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "d.csv.dvc")
    _git(tmp_path, "commit", "-qm", "data")
    assert committed_record_md5(data) == old
    spec = CustomDatasetSpec(path=str(data), label="y", train_size=10, eval_size=5, name="d")
    assert download_custom(spec, tmp_path / "raw") == old
    manifest = json.loads((tmp_path / "raw" / "manifest.json").read_text())
    assert manifest["committed_md5"] == old and "the version committed to git" in manifest["note"]

    frame.loc[0, "x"] = 99.0  # `dvc repro` re-records the changed file before the stages run
    frame.to_csv(data, index=False)
    new = _track(data)
    with caplog.at_level(logging.WARNING):
        assert download_custom(spec, tmp_path / "raw") == new
    manifest = json.loads((tmp_path / "raw" / "manifest.json").read_text())
    assert manifest["md5"] == new and manifest["committed_md5"] == old
    assert f"a NEW version not committed to git: md5 {new} (git HEAD records md5 {old})" in manifest["note"]
    assert any(new in r.getMessage() and old in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------------- 4. complex numbers


def test_complex_npz_features_and_labels_are_refused_naming_file_and_key(tmp_path):
    path = tmp_path / "c.npz"
    np.savez(path, features=np.ones((20, 3)) * (1 + 2j), labels=np.arange(20) % 2)
    with pytest.raises(CustomDataError, match=r"c\.npz: array 'features' holds complex numbers \(complex128"):
        load_custom(CustomDatasetSpec(path=str(path), label="labels", train_size=5, eval_size=5))
    np.savez(path, features=np.ones((20, 3)), labels=(np.arange(20) % 2) * (1 + 1j))
    with pytest.raises(CustomDataError, match=r"c\.npz: array 'labels' holds complex numbers"):
        load_custom(CustomDatasetSpec(path=str(path), label="labels", train_size=5, eval_size=5))


def test_complex_scores_are_refused_by_the_scores_loader(tmp_path):
    from dpaudit.cli import CliError, load_losses

    path = tmp_path / "in.npy"
    np.save(path, np.array([0.5 + 0.1j, 0.2, 0.3]))
    with pytest.raises(CliError, match=r"argument --in: .*in\.npy holds complex numbers \(complex128\)"):
        load_losses(str(path), "--in", default_column="score")


# ---------------------------------------------------- 5. sizes only the dataset can refuse, in check


def test_builtin_population_shapes_match_the_parsers():
    from dpaudit.data.registry import get_dataset

    for name, raw in (("adult", REPO / "data" / "vendor" / "adult"), ("digits", Path("/nonexistent"))):
        parsed = get_dataset(name).parse(raw, None)
        shape = POPULATIONS[name]
        assert (len(parsed.X), tuple(parsed.X.shape[1:]), int(parsed.y.max()) + 1) == (
            shape.rows, shape.input_shape, shape.num_classes)


def test_dataset_size_is_known_before_prepare():
    size = dataset_size(DataConfig.from_params(_params()), "digits")
    assert (size.rows, size.train, size.eval, size.pool) == (1797, 100, 500, 1197)


def _limit_cases() -> list[tuple[str, object, str]]:
    return [
        # digits: |D| = 100, 1197 pool rows, 100 must remain → at most 1197
        ("instantiation.datasets.digits.train_size", 1198,
         r"'instantiation\.datasets\.digits\.train_size' = 1198 is invalid: must be at most 1197"),
        # digits MLP [32]: 64·32 + 32 + 32·10 + 10 = 2410 parameters
        ("instantiation.train.canary_sizes", [2, 2412],
         r"'instantiation\.train\.canary_sizes' = \[2, 2412\] is invalid: .*parameter count, 2410 on digits"),
        ("instantiation.train.canary_sizes", [3],
         r"'instantiation\.train\.canary_sizes' = \[3\] is invalid: must list even canary sizes"),
        # digits outside the evaluation split: 1797 − 500 = 1297 rows
        ("canaries.datasets.digits.base", 1200,
         r"'canaries\.datasets\.digits\.canaries' = .* base \+ canaries = 1200 \+ 200 = 1400 records must be "
         r"at most 1297"),
        ("canaries.datasets.digits.base", 1500,
         r"'canaries\.datasets\.digits\.base' = 1500 is invalid: .*must be at most 1297"),
        # membership: members and non-members come from D ∪ pool = 100 + 1197 rows (they passed check
        # and failed in train before)
        ("membership.datasets.digits.members", 10_000_000,
         r"'membership\.datasets\.digits\.members' = 10000000 is invalid: .*must be at most 1297"),
        # onerun input canaries are pool records: digits has 1197
        ("onerun.train", {"canary_kind": "input", "canaries": 50_000, "epsilon": 4.0},
         r"'onerun\.train\.canaries' = 50000 is invalid: .*digits has 1197 pool rows"),
    ]


def _set(params: dict, dotted: str, value: object) -> None:
    *path, last = dotted.split(".")
    node = params
    for key in path:
        node = node[key]
    node[last] = value


@pytest.mark.parametrize(("key", "value", "message"), _limit_cases())
def test_sizes_that_do_not_fit_are_refused_by_key_and_limit(key, value, message):
    params = _params()
    _set(params, key, value)
    audits = [Audit("digits", e) for e in ("instantiation", "canaries", "membership", "onerun")]
    with pytest.raises(ParamsError, match=message):
        check_names(params)
        from dpaudit.pipeline import check_params

        check_params(params)
        check_limits(params, audits)
    check_limits(_params(), audits)  # the shipped settings fit


def _check_body():
    """The check stage's body (``stages/check.py`` runs exactly this)."""
    from dpaudit.pipeline import run_check

    return run_check


def test_the_check_stage_refuses_each_size_in_under_10_seconds(tmp_path, monkeypatch):
    base = _params()
    base["audits"] = {f"digits-{e}": {"dataset": "digits", "experiment": e}
                      for e in ("instantiation", "canaries", "membership", "onerun")}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models").mkdir()
    check = _check_body()
    for key, value, message in _limit_cases():  # the stage's body, libraries loaded: the check's own time
        params = copy.deepcopy(base)
        _set(params, key, value)
        started = time.perf_counter()
        with pytest.raises(ParamsError, match=message):
            check(params)
        assert time.perf_counter() - started < 10, key
        assert not (tmp_path / "data" / "check" / "params.ok").exists()
    for key, value, message in _limit_cases()[::3]:  # the stage script as DVC runs it: exit 1, the message
        params = copy.deepcopy(base)
        _set(params, key, value)
        status, log, _ = _run_check(tmp_path, params)
        assert status == 1 and pd.Series([log]).str.contains(message, regex=True).iloc[0], log


# -------------------------------------------------------------------- 6. columns, labels, optional floats


def _csv(tmp_path: Path, frame: pd.DataFrame) -> CustomDatasetSpec:
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    return CustomDatasetSpec(path=str(path), label="y", train_size=10, eval_size=5)


def test_infinite_values_and_overflowing_ranges_are_refused_by_column(tmp_path):
    frame = pd.DataFrame({"a": np.arange(40.0), "y": [0, 1] * 20})
    frame.loc[7, "a"] = np.inf
    with pytest.raises(CustomDataError, match=r"t\.csv: column 'a' has an infinite value .* at row 8 "):
        load_custom(_csv(tmp_path, frame))
    frame.loc[7, "a"], frame.loc[8, "a"] = 1e308, -1e308
    with pytest.raises(CustomDataError, match=r"column 'a' spans \[-1e\+308, 1e\+308\]: its range max − min "
                       r"overflows float64 \(limit 1\.79769e\+308\)"):
        load_custom(_csv(tmp_path, frame))


def test_date_and_list_columns_are_refused_unless_declared(tmp_path):
    days = pd.date_range("2024-01-01", periods=40).strftime("%Y-%m-%d")
    frame = pd.DataFrame({"day": days, "a": np.arange(40.0), "y": [0, 1] * 20})
    with pytest.raises(CustomDataError, match=r"column 'day' holds dates \(e\.g\. '2024-01-01', 40 distinct "
                       r"values\).*list it under 'categorical'"):
        load_custom(_csv(tmp_path, frame))
    spec = _csv(tmp_path, frame)
    declared = CustomDatasetSpec(path=spec.path, label="y", train_size=10, eval_size=5, categorical=("day",))
    assert list(load_custom(declared)[0].columns) == ["day", "a"]
    frame["day"] = [f"[{i}, {i + 1}]" for i in range(40)]
    with pytest.raises(CustomDataError, match=r"column 'day' holds lists"):
        load_custom(_csv(tmp_path, frame))
    frame["day"] = ["red", "green"] * 20  # an ordinary category passes
    load_custom(_csv(tmp_path, frame))


def test_a_label_with_one_class_per_row_is_refused(tmp_path):
    frame = pd.DataFrame({"a": np.arange(40.0), "y": [f"id{i}" for i in range(40)]})
    with pytest.raises(CustomDataError, match=r"label column 'y' has 40 classes in 40 rows \(limit: at most"):
        load_custom(_csv(tmp_path, frame))


def test_a_non_finite_optional_float_says_so():
    from dpaudit.experiments.target.config import BoundsParams

    with pytest.raises(ParamsError, match=r"'target\.bounds\.delta' = inf must be a finite number or null"):
        from_mapping(BoundsParams, {"delta": float("inf")}, "target.bounds")


# ------------------------------------------------------------------------- 7. the Keras allow-list


def _keras_file(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "m.keras"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("metadata.json", json.dumps({"keras_version": "2.15.0"}))
    return path


def _dense(units: int, **extra: object) -> dict:
    return {"module": "keras.layers", "class_name": "Dense", "registered_name": None,
            "config": {"name": f"d{units}", "units": units, "activation": "linear",
                       "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
                                              "config": {"seed": None}, "registered_name": None}, **extra}}


def _sequential(**top: object) -> dict:
    layers = [{"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
               "config": {"batch_input_shape": [None, 4], "name": "in"}}, _dense(2)]
    return {"module": "keras", "class_name": "Sequential", "registered_name": None,
            "config": {"name": "s", "layers": layers}, **top}


def test_a_clean_config_passes_the_allow_list(tmp_path):
    assert model_from_keras_file(_keras_file(tmp_path, _sequential())).num_classes == 2


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c: c.update(module="dpaudit_evil_module"),
     r"config\.module = 'dpaudit_evil_module' is not allowed"),
    (lambda c: c["config"]["layers"][1]["config"]["kernel_initializer"].update(
        module="keras.config", class_name="enable_unsafe_deserialization"),
     r"config\.config\.layers\[1\]\.config\.kernel_initializer\.module = 'keras\.config' is not allowed"),
    (lambda c: c["config"]["layers"][1].update(registered_name="evil>Dense"),
     r"registered_name = 'evil>Dense' is not allowed \(custom"),
    (lambda c: c["config"]["layers"][1].update(class_name="Lambda"),
     r"class_name = 'Lambda' is not allowed \(a layer that carries Python code\)"),
    (lambda c: c.update(class_name="os.system"), r"config\.class_name = 'os\.system' is not allowed"),
    (lambda c: c.update(module="keras", class_name="Dense"), r"'keras' provides only"),
])
def test_modules_and_classes_outside_the_allow_list_never_reach_keras(tmp_path, mutate, message):
    config = _sequential()
    mutate(config)
    with pytest.raises(UnsafeKerasConfigError, match=message):
        check_keras_config(config)
    path = _keras_file(tmp_path, config)
    with pytest.raises(UnsafeKerasConfigError, match=r"m\.keras.*" + message):
        model_from_keras_file(path)
    with pytest.raises(UnsafeKerasConfigError):
        load_keras_model(path)
    assert "dpaudit_evil_module" not in sys.modules
