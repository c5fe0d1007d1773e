"""The user's own dataset: reading CSV/Parquet/NPZ, bad input, the DVC digest check, pool-fitted encoding.

Real data only: UCI Adult rows from the repository's vendored copy (numeric and categorical columns)
and scikit-learn's bundled wine and breast-cancer tables, written to ``tmp_path`` in each format.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sklearn.datasets import load_breast_cancer, load_wine

from dpaudit.config import ParamsError, from_mapping
from dpaudit.data.custom import (
    CustomDataError,
    CustomDatasetSpec,
    DvcDigestError,
    load_custom,
    prepare_custom,
    verify_against_dvc,
)
from dpaudit.data.parsers import ADULT_CATEGORICAL, ADULT_NUMERIC, read_adult_table
from dpaudit.data.prepare import draw_split

REPO = Path(__file__).resolve().parents[2]
DVC = Path(sys.executable).parent / "dvc"


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    table = read_adult_table(REPO / "data" / "vendor" / "adult" / "adult.data.gz").head(600)
    table["income"] = table["income"].map({0: "<=50K", 1: ">50K"})
    return table.reset_index(drop=True)


def _wine() -> pd.DataFrame:
    return load_wine(as_frame=True).frame


def _spec(path: Path, **kw: object) -> CustomDatasetSpec:
    base: dict = {"path": str(path), "label": "income", "train_size": 100, "eval_size": 200, "seed": 3}
    base.update(kw)
    return CustomDatasetSpec(**base)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ round trip


def test_csv_auto_detects_types_and_prepares_the_contract(adult, tmp_path):
    path = tmp_path / "adult.csv"
    adult.to_csv(path, index=False)
    features, labels = load_custom(_spec(path))
    assert set(features.columns) == set(ADULT_NUMERIC) | set(ADULT_CATEGORICAL)
    for column in ADULT_NUMERIC:
        assert features[column].dtype == np.float64
    prepared, provenance = prepare_custom(_spec(path))
    train, pool, evaluation = draw_split(600, 100, 200, 3)
    np.testing.assert_array_equal(prepared.train_idx, train)
    np.testing.assert_array_equal(prepared.pool_idx, pool)
    np.testing.assert_array_equal(prepared.eval_idx, evaluation)
    assert prepared.kind == "tabular" and prepared.X.dtype == np.float32 and prepared.y.dtype == np.int64
    assert prepared.num_classes == 2 and provenance["label"]["classes"] == ["<=50K", ">50K"]
    np.testing.assert_array_equal(prepared.y, (adult["income"] == ">50K").to_numpy().astype(int))
    assert prepared.feature_names[: len(ADULT_NUMERIC)] == ADULT_NUMERIC
    assert "sex=Female" in prepared.feature_names
    assert prepared.X.shape == (600, len(prepared.feature_names))
    assert provenance["numeric"]["columns"] == list(ADULT_NUMERIC)
    assert provenance["md5"] == hashlib.md5(path.read_bytes()).hexdigest()
    assert provenance["sizes"] == {"train": 100, "pool": 300, "eval": 200}
    json.dumps(provenance)  # JSON-able as it stands
    assert set(provenance["categorical"]["columns"]) == set(ADULT_CATEGORICAL)
    # Written and read back with the schema every later stage uses.
    prepared.save(tmp_path / "adult.npz")
    again = type(prepared).load(tmp_path / "adult.npz")
    np.testing.assert_array_equal(again.X, prepared.X)
    assert again.feature_names == prepared.feature_names


def test_parquet_and_npz_round_trip(tmp_path):
    wine = _wine()
    wine.to_parquet(tmp_path / "wine.parquet")
    spec = _spec(tmp_path / "wine.parquet", label="target", train_size=50, eval_size=50)
    features, labels = load_custom(spec)
    pd.testing.assert_frame_equal(features, wine.drop(columns="target").astype(np.float64))
    prepared, _ = prepare_custom(spec)
    assert prepared.num_classes == 3 and prepared.X.shape == (178, 13)

    cancer = load_breast_cancer()
    np.savez(tmp_path / "cancer.npz", features=cancer.data, labels=cancer.target)
    spec = _spec(tmp_path / "cancer.npz", label="labels", train_size=100, eval_size=100)
    prepared, provenance = prepare_custom(spec)
    assert prepared.X.shape == cancer.data.shape and prepared.feature_names[0] == "x0"
    np.testing.assert_array_equal(prepared.y, cancer.target)
    pool = cancer.data[prepared.pool_idx]
    expected = (cancer.data - pool.min(0)) / (pool.max(0) - pool.min(0))
    np.testing.assert_allclose(prepared.X, expected, rtol=1e-5, atol=1e-6)


def test_transformer_is_fitted_on_the_pool_only(adult, tmp_path):
    path = tmp_path / "adult.csv"
    adult.to_csv(path, index=False)
    prepared, provenance = prepare_custom(_spec(path))
    pool = adult.iloc[prepared.pool_idx]
    numeric = provenance["numeric"]
    np.testing.assert_allclose(numeric["data_min"], pool[list(ADULT_NUMERIC)].min().to_numpy())
    np.testing.assert_allclose(numeric["data_max"], pool[list(ADULT_NUMERIC)].max().to_numpy())
    # The pool's statistics, not the population's (D's or eval's extremes would show here otherwise).
    assert numeric["data_max"] != adult[list(ADULT_NUMERIC)].max().tolist()
    for column in ADULT_CATEGORICAL:
        assert provenance["categorical"]["categories"][column] == sorted(pool[column].unique())
    pool_X = prepared.X[prepared.pool_idx, : len(ADULT_NUMERIC)]
    np.testing.assert_allclose(pool_X.min(0), 0.0, atol=1e-6)
    np.testing.assert_allclose(pool_X.max(0), 1.0, atol=1e-6)


# ------------------------------------------------------------------------------------------ bad input


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(CustomDataError, match=r"nothere\.csv: file does not exist"):
        load_custom(_spec(tmp_path / "nothere.csv"))
    (tmp_path / "zero.csv").write_bytes(b"")
    with pytest.raises(CustomDataError, match=r"zero\.csv: the file is empty \(0 bytes\)"):
        load_custom(_spec(tmp_path / "zero.csv"))
    (tmp_path / "header.csv").write_text("age,income\n")
    with pytest.raises(CustomDataError, match=r"header\.csv: the file has a header but no rows"):
        load_custom(_spec(tmp_path / "header.csv"))
    (tmp_path / "blank.csv").write_text("\n\n")
    with pytest.raises(CustomDataError, match=r"blank\.csv: the file is empty"):
        load_custom(_spec(tmp_path / "blank.csv"))
    pd.DataFrame({"age": pd.Series([], dtype=float), "income": pd.Series([], dtype=str)}).to_parquet(
        tmp_path / "empty.parquet"
    )
    with pytest.raises(CustomDataError, match=r"empty\.parquet: the file has a header but no rows"):
        load_custom(_spec(tmp_path / "empty.parquet"))


def test_missing_label_column_lists_the_columns(adult, tmp_path):
    path = tmp_path / "adult.csv"
    adult.to_csv(path, index=False)
    with pytest.raises(CustomDataError, match=r"adult\.csv: no label column 'salary'; columns present: "
                       r"\['age', 'workclass'"):
        load_custom(_spec(path, label="salary"))
    np.savez(tmp_path / "a.npz", X=np.zeros((3, 2)), y=np.arange(3))
    with pytest.raises(CustomDataError, match=r"a\.npz: no array 'features' .*arrays present: \['X', 'y'\]"):
        load_custom(_spec(tmp_path / "a.npz", label="y"))


def test_single_class_and_missing_labels(adult, tmp_path):
    path = tmp_path / "one.csv"
    adult[adult["income"] == "<=50K"].to_csv(path, index=False)
    single = r"one\.csv: label column 'income' has a single class \('<=50K'\)"
    with pytest.raises(CustomDataError, match=single):
        load_custom(_spec(path))
    wine = _wine().astype({"target": float})
    wine.loc[7, "target"] = np.nan
    wine.to_csv(tmp_path / "nan.csv", index=False)
    with pytest.raises(CustomDataError, match=r"nan\.csv: label column 'target' is missing at row 8 "
                       r"\(line 9\) \(1 rows without a label\)"):
        load_custom(_spec(tmp_path / "nan.csv", label="target"))
    wine = _wine()
    wine.to_csv(tmp_path / "continuous.csv", index=False)
    with pytest.raises(CustomDataError, match=r"continuous\.csv: label column 'alcohol' holds a non-integer "
                       r"number 14\.23 at row 1 \(line 2\)"):
        load_custom(_spec(tmp_path / "continuous.csv", label="alcohol"))


def test_junk_in_a_numeric_column_names_column_row_and_value(adult, tmp_path):
    table = adult.astype({"age": object})
    table.loc[41, "age"] = "forty"
    path = tmp_path / "junk.csv"
    table.to_csv(path, index=False)
    # Auto-detected: the column is numbers but for one value, so it is not silently categorical.
    with pytest.raises(CustomDataError, match=r"junk\.csv: column 'age' \(looks numeric: 599 of 600 values "
                       r"are numbers\) has a non-numeric value 'forty' at row 42 \(line 43\)"):
        load_custom(_spec(path))
    # Declared numeric: any junk is an error, however many values are junk.
    table["age"] = adult["age"]
    table["hours-per-week"] = adult["hours-per-week"].astype(str)  # a string column, as Parquet keeps it
    table.loc[:400, "hours-per-week"] = "n/a"
    table.to_parquet(tmp_path / "junk.parquet")
    with pytest.raises(CustomDataError, match=r"junk\.parquet: column 'hours-per-week' \(declared numeric\) "
                       r"has a non-numeric value 'n/a' at row 1 "):
        load_custom(_spec(tmp_path / "junk.parquet", numeric=["hours-per-week"]))
    # Declared categorical: the same column is taken as categories, as the user asked.
    features, _ = load_custom(_spec(tmp_path / "junk.parquet", categorical=["hours-per-week"]))
    assert features["hours-per-week"].iloc[0] == "n/a"


def test_missing_feature_value(tmp_path):
    wine = _wine()
    wine.loc[5, "alcohol"] = np.nan
    wine.to_csv(tmp_path / "gap.csv", index=False)
    with pytest.raises(CustomDataError, match=r"gap\.csv: column 'alcohol' has a missing value at row 6"):
        load_custom(_spec(tmp_path / "gap.csv", label="target"))


def test_spec_errors_name_the_key(tmp_path):
    ok = {"path": "a.csv", "label": "y", "train_size": 10, "eval_size": 5}
    cases = {
        "path": ("a.txt", "must end in one of"),
        "train_size": (0, "must be >= 1"),
        "eval_size": (-1, "must be >= 0"),
        "measure": ("ssim", "must be a tabular measure"),
        "name": ("adult", "is a built-in dataset"),
        "seed": (-2, "must be >= 0"),
        "numeric": (["y"], "must not contain the label column"),
    }
    for key, (value, expectation) in cases.items():
        with pytest.raises(ParamsError, match=rf"'data\.custom\.loans\.{key}' = .*{expectation}"):
            from_mapping(CustomDatasetSpec, {**ok, key: value}, "data.custom.loans")
    with pytest.raises(ParamsError, match=r"unknown key 'data\.custom\.loans\.lable'"):
        from_mapping(CustomDatasetSpec, {**ok, "lable": "y"}, "data.custom.loans")
    with pytest.raises(ParamsError, match=r"'numeric' = \['a'\] .*\['a'\] also declared categorical"):
        CustomDatasetSpec(**ok, numeric=("a",), categorical=("a",))  # type: ignore[arg-type]
    with pytest.raises(ParamsError, match=r"leaves no pool rows"):
        wine = _wine()
        wine.to_csv(tmp_path / "w.csv", index=False)
        prepare_custom(_spec(tmp_path / "w.csv", label="target", train_size=100, eval_size=78))


# ------------------------------------------------------------------------------------------------ DVC


def _dvc_repo(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, DVC_NO_ANALYTICS="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, env=env)
    subprocess.run([str(DVC), "init", "-q"], cwd=tmp_path, check=True, env=env)
    return env


def test_dvc_digest_match_and_mismatch(tmp_path):
    env = _dvc_repo(tmp_path)
    path = tmp_path / "wine.csv"
    _wine().to_csv(path, index=False)
    with pytest.raises(CustomDataError, match=r"wine\.csv: not tracked by DVC .*Run `dvc add "):
        verify_against_dvc(path)
    subprocess.run([str(DVC), "add", "-q", "wine.csv"], cwd=tmp_path, check=True, env=env)
    record = yaml.safe_load((tmp_path / "wine.csv.dvc").read_text())
    digest = verify_against_dvc(path)
    assert digest == record["outs"][0]["md5"]

    # Edit one row, keeping the size: the md5 differs.
    original = path.read_bytes()
    text = path.read_text().splitlines(keepends=True)
    text[5] = text[5].replace("1", "2", 1)
    path.write_text("".join(text))
    with pytest.raises(DvcDigestError) as err:
        verify_against_dvc(path)
    message = str(err.value)
    assert f"{path}: does not match its DVC record" in message
    assert f"md5 expected {digest}, actual " in message and f"run `dvc add {path}`" in message
    # A row appended: the recorded size already differs.
    with path.open("a") as handle:
        handle.write(text[5])
    with pytest.raises(DvcDigestError, match=r"size expected \d+, actual \d+"):
        verify_against_dvc(path)
    # The recorded version verifies again once restored.
    path.write_bytes(original)
    assert verify_against_dvc(path) == digest


def test_dvc_legacy_text_digest_and_bad_records(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"a,b\r\n1,2\r\n")
    legacy = hashlib.md5(b"a,b\n1,2\n").hexdigest()
    (tmp_path / "t.csv.dvc").write_text(yaml.safe_dump({"outs": [{"md5": legacy, "path": "t.csv"}]}))
    assert verify_against_dvc(path) == legacy  # DVC 2 record: CRLF → LF for text files
    (tmp_path / "t.csv.dvc").write_text(
        yaml.safe_dump({"outs": [{"md5": legacy, "path": "t.csv", "hash": "md5"}]})
    )
    with pytest.raises(DvcDigestError, match=rf"md5 expected {legacy}"):
        verify_against_dvc(path)  # DVC 3 record: raw bytes only
    (tmp_path / "t.csv.dvc").write_text(yaml.safe_dump({"outs": [{"md5": "x.dir", "path": "other.csv"}]}))
    with pytest.raises(CustomDataError, match=r"records 'other\.csv', not 't\.csv'"):
        verify_against_dvc(path)
    (tmp_path / "t.csv.dvc").write_text("stages: {}\n")
    with pytest.raises(CustomDataError, match=r"expected one entry under 'outs'"):
        verify_against_dvc(path)


@pytest.mark.parametrize("declared", [(), ("lst",)])
def test_a_parquet_list_column_is_refused_naming_file_column_and_row(tmp_path, declared):
    """A list in a cell used to fail deep in pandas (TypeError: unhashable type: 'numpy.ndarray')."""
    rows = 40
    table = pd.DataFrame({"a": np.arange(rows, dtype=float), "lst": [[i, i + 1] for i in range(rows)],
                          "y": np.arange(rows) % 2})  # fmt: skip
    path = tmp_path / "lists.parquet"
    table.to_parquet(path)
    spec = _spec(path, label="y", train_size=10, eval_size=10, categorical=declared)
    with pytest.raises(CustomDataError, match=r"lists\.parquet: column 'lst' holds a \w+ at row 1 \(40 such"):
        load_custom(spec)
