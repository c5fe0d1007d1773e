"""``data`` params validation, the seeded D / pool / eval split, and the prepare stage end to end."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dpaudit.config import ParamsError, load_params
from dpaudit.data.download import MIRROR_ENV, download_dataset
from dpaudit.data.prepare import DataConfig, draw_split, prepare_dataset
from dpaudit.data.prepared import PreparedData

BASE = {
    "data": {
        "mirror": None,
        "seed": 0,
        "datasets": ["adult", "digits"],
        "prepare": {
            "adult": {"train_size": 1000, "eval_size": 5000},
            "digits": {"train_size": 100, "eval_size": 500},
            "mnist": {"train_size": 100, "eval_size": 1000, "pool": "test"},
        },
    }
}


def _with(path: str, value: object) -> dict:
    params = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = params
    for key in parents:
        node = node[key]
    node[last] = value
    return params


def test_repository_params_are_valid(repo_root):
    if not (repo_root / "params.yaml").exists():
        pytest.skip("no params.yaml in the repository yet")
    config = DataConfig.from_params(load_params(repo_root / "params.yaml"))
    assert config.datasets[:2] == ("adult", "digits")
    assert config.prepare.adult.train_size == 1000 and config.pool_for("mnist") == "test"


def test_defaults_and_accessors():
    config = DataConfig.from_params(BASE)
    assert config.prepare_for("mnist").train_size == 100
    assert config.pool_for("mnist") == "test" and config.pool_for("adult") is None
    assert config.prepare.cifar10.eval_size == 5000  # not in BASE: the default applies


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("data.datasets", ["adult", "imagenet"], "'data.datasets[1]' = 'imagenet'"),
        ("data.datasets", ["adult", "adult"], "'data.datasets'"),
        ("data.prepare.adult.train_size", -5, "'data.prepare.adult.train_size' = -5"),
        ("data.prepare.digits.eval_size", -1, "'data.prepare.digits.eval_size' = -1"),
        ("data.prepare.digits.train_size", "9", "'data.prepare.digits.train_size' = '9' must be an integer"),
        ("data.prepare.mnist.pool", "validation", "'data.prepare.mnist.pool' = 'validation' must be one of"),
        ("data.prepare.adult.pool", "test", "unknown key 'data.prepare.adult.pool'"),
        ("data.prepare.imagenet", {"train_size": 1, "eval_size": 1}, "unknown key 'data.prepare.imagenet'"),
        ("data.seed", -1, "'data.seed' = -1"),
        ("data.mirrors", "/x", "unknown key 'data.mirrors'"),
    ],
)
def test_invalid_params_name_the_key(path, value, message):
    with pytest.raises(ParamsError) as info:
        DataConfig.from_params(_with(path, value))
    assert message in str(info.value)


def test_draw_split_is_a_seeded_partition():
    train, pool, evaluation = draw_split(1000, 100, 300, seed=7)
    assert (len(train), len(pool), len(evaluation)) == (100, 600, 300)
    np.testing.assert_array_equal(np.sort(np.concatenate([train, pool, evaluation])), np.arange(1000))
    assert all(np.all(np.diff(part) > 0) for part in (train, pool, evaluation))
    again = draw_split(1000, 100, 300, seed=7)
    assert all(np.array_equal(a, b) for a, b in zip((train, pool, evaluation), again, strict=True))
    assert not np.array_equal(train, draw_split(1000, 100, 300, seed=8)[0])
    assert len(draw_split(10, 4, 6, seed=0)[1]) == 0  # sizes may use up the whole population


def test_prepare_digits_writes_the_schema(tmp_path):
    config = DataConfig.from_params(BASE)
    out = tmp_path / "prepared" / "digits.npz"
    prepare_dataset("digits", tmp_path / "raw" / "digits", config, out)
    data = PreparedData.load(out)
    assert data.name == "digits" and data.kind == "image" and data.input_shape == (8, 8, 1)
    assert (len(data.train_idx), len(data.eval_idx), len(data.pool_idx)) == (100, 500, 1797 - 600)
    expected = draw_split(1797, 100, 500, seed=0)
    np.testing.assert_array_equal(data.train_idx, expected[0])
    X_train, y_train = data.split("train")
    assert X_train.shape == (100, 8, 8, 1) and y_train.dtype == np.int64


def test_sizes_larger_than_the_population_fail_at_prepare_time(tmp_path):
    config = DataConfig.from_params(_with("data.prepare.digits", {"train_size": 1000, "eval_size": 1000}))
    out = tmp_path / "digits.npz"
    pattern = r"'data.prepare.digits.train_size' = 1000 .*population of 1797 rows"
    with pytest.raises(ParamsError, match=pattern):
        prepare_dataset("digits", tmp_path, config, out)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_prepare_adult_from_the_download_stage_output(tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    config = DataConfig.from_params(BASE)
    download_dataset("adult", tmp_path / "raw" / "adult", config.mirror)
    data = prepare_dataset("adult", tmp_path / "raw" / "adult", config, tmp_path / "adult.npz")
    assert data.X.shape == (45_222, 104) and data.num_classes == 2
    assert (len(data.train_idx), len(data.eval_idx), len(data.pool_idx)) == (1000, 5000, 39_222)
    assert PreparedData.load(tmp_path / "adult.npz").feature_names == data.feature_names


def test_prepare_mnist_test_pool_from_the_mirror(mirror, tmp_path, monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    config = DataConfig.from_params(BASE)
    raw = tmp_path / "raw" / "mnist"
    download_dataset("mnist", raw, mirror, pool=config.pool_for("mnist"))
    data = prepare_dataset("mnist", raw, config, tmp_path / "mnist.npz")
    assert data.X.shape == (10_000, 28, 28, 1)
    assert (len(data.train_idx), len(data.eval_idx), len(data.pool_idx)) == (100, 1000, 8900)
    config_all = DataConfig.from_params(_with("data.prepare.mnist.pool", "all"))
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte.gz"):
        prepare_dataset("mnist", raw, config_all, tmp_path / "mnist-all.npz")
    assert not (tmp_path / "mnist-all.npz").exists()
