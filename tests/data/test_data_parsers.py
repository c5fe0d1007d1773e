"""Parsers on the real files (vendored adult, mirrored MNIST) and on small files in the real formats."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest

from dpaudit.data import parsers

VENDOR = Path(__file__).resolve().parents[2] / "data" / "vendor" / "adult"


@pytest.fixture(scope="module")
def adult_tables():
    return tuple(parsers.read_adult_table(VENDOR / name) for name in ("adult.data.gz", "adult.test.gz"))


@pytest.fixture(scope="module")
def adult(adult_tables):
    import pandas as pd

    return parsers.encode_adult(pd.concat(adult_tables, ignore_index=True))


def test_adult_row_counts_after_dropping_missing(adult_tables):
    train, test = adult_tables
    # UCI: 32,561 rows of which 2,399 have a '?'; the test file 16,281 rows of which 1,221 have one.
    assert len(train) == 32_561 - 2_399 == 30_162
    assert len(test) == 16_281 - 1_221 == 15_060
    # Labels ">50K" among complete rows (test labels had a trailing dot).
    assert int(train["income"].sum()) == 7_508
    assert int(test["income"].sum()) == 3_700
    assert not train.isna().any().any() and not test.isna().any().any()


def test_adult_one_hot_width_and_scaling(adult):
    assert adult.X.shape == (45_222, 104)
    assert adult.X.dtype == np.float32 and adult.y.dtype == np.int64
    # 6 numerics + categories present after cleaning: workclass 7 (Never-worked only occurs with '?'),
    # education 16, marital-status 7, occupation 14, relationship 6, race 5, sex 2, native-country 41.
    names = adult.feature_names
    groups = {c: [i for i, n in enumerate(names) if n.startswith(c + "=")] for c in parsers.ADULT_CATEGORICAL}
    assert {c: len(v) for c, v in groups.items()} == {
        "workclass": 7,
        "education": 16,
        "marital-status": 7,
        "occupation": 14,
        "relationship": 6,
        "race": 5,
        "sex": 2,
        "native-country": 41,
    }
    assert "workclass=Never-worked" not in adult.feature_names
    for columns in groups.values():
        np.testing.assert_array_equal(adult.X[:, columns].sum(axis=1), 1.0)
    assert adult.X.min() == 0.0 and adult.X.max() == 1.0
    # First row of adult.data: age 39, hours 40, State-gov, <=50K. Min-max over the population: age 17..90,
    # hours-per-week 1..99.
    assert adult.X[0, names.index("age")] == pytest.approx((39 - 17) / (90 - 17))
    assert adult.X[0, names.index("hours-per-week")] == pytest.approx((40 - 1) / (99 - 1))
    assert adult.X[0, names.index("workclass=State-gov")] == 1.0
    assert adult.y[0] == 0
    assert adult.num_classes == 2


def test_adult_vendor_copy_is_byte_exact(mirror):
    for name in ("adult.data.gz", "adult.test.gz", "adult.names.gz"):
        assert (VENDOR / name).read_bytes() == (mirror / "adult" / name).read_bytes(), name


def test_adult_test_file_quirks_and_bad_rows(tmp_path):
    row = (
        "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, "
        "2174, 0, 40"
    )
    text = f"|1x3 Cross validator\n{row}, United-States, >50K.\n{row}, ?, <=50K.\n{row}, Cuba, <=50K.\n\n"
    path = tmp_path / "adult.test.gz"
    path.write_bytes(gzip.compress(text.encode()))
    table = parsers.read_adult_table(path)
    assert list(table["income"]) == [1, 0]
    assert list(table["native-country"]) == ["United-States", "Cuba"]
    bad = tmp_path / "adult.data"
    bad.write_text(f"{row}, United-States, >50K\n{row}, >50K\n")
    with pytest.raises(ValueError, match=r"adult\.data:2: expected 15 fields, found 14"):
        parsers.read_adult_table(bad)
    bad.write_text(f"{row}, United-States, >70K\n")
    with pytest.raises(ValueError, match="unknown income label '>70K'"):
        parsers.read_adult_table(bad)


def test_mnist_test_split_from_mirror(mirror):
    # The mirror has no train-images file: pool="test" must not need it.
    assert not (mirror / "mnist" / "train-images-idx3-ubyte.gz").exists()
    data = parsers.parse_mnist(mirror / "mnist", pool="test")
    assert data.X.shape == (10_000, 28, 28, 1) and data.X.dtype == np.float32
    assert data.X.min() == 0.0 and data.X.max() == 1.0
    # Class counts of the official test labels (mirror README).
    counts = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    np.testing.assert_array_equal(np.bincount(data.y), counts)
    labels = parsers.read_idx(mirror / "mnist" / "train-labels-idx1-ubyte.gz", parsers.IDX_LABELS_MAGIC)
    assert labels.shape == (60_000,)
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        parsers.parse_mnist(mirror / "mnist", pool="all")


def test_idx_magic_numbers_are_checked(mirror):
    with pytest.raises(ValueError, match="magic number 0x00000801, expected 0x00000803"):
        parsers.read_idx(mirror / "mnist" / "t10k-labels-idx1-ubyte.gz", parsers.IDX_IMAGES_MAGIC)


def _write_idx(path: Path, array: np.ndarray) -> None:
    header = struct.pack(">I", 0x0800 | array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(gzip.compress(header + array.astype(np.uint8).tobytes()))


def test_mnist_pools_on_small_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    sizes = {"train": 3, "test": 2}
    images = {s: rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8) for s, n in sizes.items()}
    labels = {"train": np.array([5, 0, 4]), "test": np.array([7, 2])}
    for split, (img_name, lbl_name) in parsers.MNIST_SPLIT_FILES.items():
        _write_idx(tmp_path / img_name, images[split])
        _write_idx(tmp_path / lbl_name, labels[split])
    both = parsers.parse_mnist(tmp_path, pool="all")
    np.testing.assert_array_equal(both.y, [5, 0, 4, 7, 2])
    np.testing.assert_allclose(both.X[3, :, :, 0], images["test"][0] / 255.0, rtol=1e-6)
    assert parsers.parse_mnist(tmp_path, pool="train").X.shape == (3, 28, 28, 1)
    # A header that promises more bytes than the file holds.
    data = gzip.decompress((tmp_path / "t10k-labels-idx1-ubyte.gz").read_bytes())
    (tmp_path / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(data[:-1]))
    with pytest.raises(ValueError, match=r"header says shape \(2,\)"):
        parsers.parse_mnist(tmp_path, pool="test")


def _tgz(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))


def test_purchase100_parser_on_a_small_tarball(tmp_path):
    rng = np.random.default_rng(1)
    labels = np.array([1, 100, 37, 5])
    features = rng.integers(0, 2, size=(4, 600))
    rows = [",".join(map(str, [lab, *row])) for lab, row in zip(labels, features, strict=True)]
    text = "\n".join(rows) + "\n"
    path = tmp_path / "dataset_purchase.tgz"
    _tgz(path, {"dataset_purchase": text.encode()})
    data = parsers.parse_purchase100(path)
    np.testing.assert_array_equal(data.y, [0, 99, 36, 4])
    np.testing.assert_array_equal(data.X, features)
    assert data.X.dtype == np.float32 and data.num_classes == 100 and len(data.feature_names) == 600
    _tgz(path, {"dataset_purchase": text.replace("\n100,", "\n101,").encode()})
    with pytest.raises(ValueError, match="labels span 1..101"):
        parsers.parse_purchase100(path)
    _tgz(path, {"dataset_purchase": text.replace(",0,", ",2,", 1).encode()})
    with pytest.raises(ValueError, match="not all 0 or 1"):
        parsers.parse_purchase100(path)
    _tgz(path, {"other": text.encode()})
    with pytest.raises(ValueError, match="no file named 'dataset_purchase'"):
        parsers.parse_purchase100(path)


def _cifar_batch(data: np.ndarray, labels: list[int]) -> bytes:
    names = [b"x.png"] * len(labels)
    batch = {b"batch_label": b"testing", b"labels": labels, b"data": data, b"filenames": names}
    return pickle.dumps(batch, protocol=2)


def test_cifar10_parser_on_a_small_tarball(tmp_path):
    rng = np.random.default_rng(2)
    batches = {name: rng.integers(0, 256, size=(2, 3072), dtype=np.uint8) for name in parsers.CIFAR_BATCHES}
    members = {
        f"cifar-10-batches-py/{name}": _cifar_batch(data, [i % 10, (i + 3) % 10])
        for i, (name, data) in enumerate(batches.items())
    }
    members["cifar-10-batches-py/batches.meta"] = pickle.dumps({b"label_names": [b"airplane"]}, protocol=2)
    path = tmp_path / "cifar-10-python.tar.gz"
    _tgz(path, members)
    data = parsers.parse_cifar10(path)
    assert data.X.shape == (12, 32, 32, 3) and data.X.dtype == np.float32
    np.testing.assert_array_equal(data.y, [0, 3, 1, 4, 2, 5, 3, 6, 4, 7, 5, 8])
    # Row layout: 1024 red, 1024 green, 1024 blue values, each plane row-major.
    test_row = batches["test_batch"][1]
    assert data.X[11, 2, 5, 0] == pytest.approx(test_row[2 * 32 + 5] / 255.0)
    assert data.X[11, 2, 5, 1] == pytest.approx(test_row[1024 + 2 * 32 + 5] / 255.0)
    assert data.X[11, 31, 0, 2] == pytest.approx(test_row[2048 + 31 * 32] / 255.0)
    # A pickle that would run code is refused, not executed.
    members["cifar-10-batches-py/test_batch"] = pickle.dumps(os.system, protocol=2)
    _tgz(path, members)
    with pytest.raises(ValueError, match="refusing to load"):
        parsers.parse_cifar10(path)
    del members["cifar-10-batches-py/test_batch"]
    _tgz(path, members)
    with pytest.raises(ValueError, match="no file 'cifar-10-batches-py/test_batch'"):
        parsers.parse_cifar10(path)


def test_digits_shape_and_range():
    data = parsers.parse_digits()
    assert data.X.shape == (1_797, 8, 8, 1) and data.kind == "image"
    assert data.X.min() == 0.0 and data.X.max() == 1.0
    np.testing.assert_array_equal(np.bincount(data.y), [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])
