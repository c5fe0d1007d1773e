"""Dataset-sensitivity search (Bernau et al. Eqs. 18, 20) against brute force, chunking, config, I/O."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from dpaudit.config import ParamsError, load_params
from dpaudit.data.prepared import PreparedData
from dpaudit.sensitivity.measures import Measure, make_measure
from dpaudit.sensitivity.search import (
    DEFAULT_MEASURES,
    BoundedChoice,
    Candidate,
    PairCandidate,
    SensitivityConfig,
    SensitivityResult,
    UnboundedChoice,
    run_sensitivity,
    search_bounded,
    search_unbounded,
)

K = 3


# Per-pair reference definitions, written independently of the library code.
def _cos(x, y):
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:  # the documented convention for all-zero records
        return 0.0 if nx == ny else 1.0
    return 1 - float(x @ y) / (nx * ny)


PAIR = {
    "euclidean": lambda x, y: float(np.sqrt(((x - y) ** 2).sum())),
    "manhattan": lambda x, y: float(np.abs(x - y).sum()),
    "hamming": lambda x, y: float((x != y).sum()),
    "cosine": _cos,
}


def brute_unbounded(X, d, gidx, k=K):
    n = len(X)
    scores = [sum(d(X[i], X[j]) for j in range(n) if j != i) for i in range(n)]
    top = sorted(range(n), key=lambda i: (-scores[i], gidx[i]))[:k]
    bottom = sorted(range(n), key=lambda i: (scores[i], gidx[i]))[:k]
    return [(gidx[i], scores[i]) for i in top], [(gidx[i], scores[i]) for i in bottom]


def brute_bounded(X_D, X_U, d, gidx, uidx, k=K):
    grid = itertools.product(range(len(X_D)), range(len(X_U)))
    pairs = [(gidx[i], uidx[j], d(X_D[i], X_U[j])) for i, j in grid]
    top = sorted(pairs, key=lambda p: (-p[2], p[0], p[1]))[:k]
    bottom = sorted(pairs, key=lambda p: (p[2], p[0], p[1]))[:k]
    return top, bottom


def assert_unbounded(got: UnboundedChoice, top, bottom, atol=1e-9):
    assert [c.index for c in got.top] == [i for i, _ in top]
    assert [c.index for c in got.bottom] == [i for i, _ in bottom]
    np.testing.assert_allclose([c.score for c in got.top], [s for _, s in top], rtol=1e-12, atol=atol)
    np.testing.assert_allclose([c.score for c in got.bottom], [s for _, s in bottom], rtol=1e-12, atol=atol)
    assert (got.index, got.score) == (got.top[0].index, got.top[0].score)


def assert_bounded(got: BoundedChoice, top, bottom, atol=1e-9):
    assert [(p.index, p.replacement_index) for p in got.top] == [(i, j) for i, j, _ in top]
    assert [(p.index, p.replacement_index) for p in got.bottom] == [(i, j) for i, j, _ in bottom]
    for got_list, want in ((got.top, top), (got.bottom, bottom)):
        distances = [p.distance for p in got_list]
        np.testing.assert_allclose(distances, [v for *_, v in want], rtol=1e-12, atol=atol)
    assert (got.index, got.replacement_index, got.distance) == (
        got.top[0].index, got.top[0].replacement_index, got.top[0].distance)


def tabular(data: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if data == "continuous":
        return rng.normal(size=(n, 5))
    # small integers: many exact ties, so the lowest-index tie-break is exercised
    return rng.integers(0, 2, size=(n, 4)).astype(np.float64) + (data == "shifted")


CASES = [(name, data) for name in PAIR for data in ("continuous", "binary", "shifted")
         # shifted data hold parallel records ([1,1,1,1], [2,2,2,2]) whose cosine distance is 0 only up to
         # rounding, so the reference and scipy order those mathematical ties differently
         if (name, data) != ("cosine", "shifted")]


@pytest.mark.parametrize(("name", "data"), CASES)
def test_tabular_search_equals_brute_force(name, data):
    rng = np.random.default_rng(CASES.index((name, data)))
    X_D, X_U = tabular(data, rng, 12), tabular(data, rng, 17)
    gidx = rng.permutation(np.arange(100, 112))  # global indices, unsorted
    uidx = rng.permutation(np.arange(200, 217))
    measure = make_measure(name)
    top, bottom = brute_unbounded(X_D, PAIR[name], list(gidx))
    assert_unbounded(search_unbounded(X_D, measure, 5, top_k=K, index=gidx), top, bottom)
    top, bottom = brute_bounded(X_D, X_U, PAIR[name], list(gidx), list(uidx))
    assert_bounded(search_bounded(X_D, X_U, measure, 5, top_k=K, index=gidx, replacement_index=uidx),
                   top, bottom)


def test_ties_go_to_the_lowest_global_index():
    X_D = np.array([[0.0], [1.0], [1.0], [0.0]])  # rows 1 and 2 tie, and rows 0 and 3
    gidx = np.array([7, 5, 3, 9])
    got = search_unbounded(X_D, "manhattan", 1, top_k=4, index=gidx)
    assert [c.index for c in got.top] == [3, 5, 7, 9]  # all score 2: lowest global index first
    X_U = np.array([[1.0], [0.0], [1.0]])
    uidx = np.array([40, 20, 30])
    got_b = search_bounded(X_D, X_U, "manhattan", 2, top_k=3, index=gidx, replacement_index=uidx)
    assert [(p.index, p.replacement_index) for p in got_b.top] == [(3, 20), (5, 20), (7, 30)]
    assert [(p.index, p.replacement_index) for p in got_b.bottom] == [(3, 30), (3, 40), (5, 30)]


@pytest.mark.parametrize("name", ["euclidean", "ssim"])
def test_image_search_equals_brute_force(name):
    import tensorflow as tf

    rng = np.random.default_rng(4)
    X_D = rng.random((8, 9, 9, 1), dtype=np.float32)
    X_U = rng.random((11, 9, 9, 1), dtype=np.float32)
    if name == "euclidean":
        d = PAIR["euclidean"]
        measure = make_measure("euclidean")
        atol = 1e-9
    else:
        # tf.image.ssim on every explicit pair (one batched call), looked up by the pair's bytes
        images = np.concatenate([X_D, X_U])
        i, j = np.array(list(itertools.product(range(len(images)), repeat=2))).T
        values = -tf.image.ssim(images[i], images[j], max_val=1.0, filter_size=5).numpy().astype(np.float64)
        table = {(images[a].tobytes(), images[b].tobytes()): v for a, b, v in zip(i, j, values, strict=True)}

        def d(x, y):
            return table[(x.tobytes(), y.tobytes())]

        measure = make_measure("ssim", ssim_filter_size=5)
        atol = 1e-5
    X_D64, X_U64 = X_D.astype(np.float64), X_U.astype(np.float64)
    top, bottom = brute_unbounded(X_D64 if name == "euclidean" else X_D, d, list(range(8)))
    assert_unbounded(search_unbounded(X_D, measure, 3, top_k=K), top, bottom, atol=atol)
    top, bottom = brute_bounded(X_D64 if name == "euclidean" else X_D,
                                X_U64 if name == "euclidean" else X_U, d, list(range(8)), list(range(11)))
    assert_bounded(search_bounded(X_D, X_U, measure, 3, top_k=K), top, bottom, atol=atol)


class Recording(Measure):
    """Wraps a measure and records the largest row block it was asked for."""

    name = "recording"

    def __init__(self, inner: Measure) -> None:
        self.inner = inner
        self.max_rows = 0

    def _pairwise(self, A, B):
        self.max_rows = max(self.max_rows, len(A))
        return self.inner(A, B)


@pytest.mark.parametrize("name", ["manhattan", "ssim"])
def test_chunk_size_does_not_change_results_and_bounds_memory(name):
    rng = np.random.default_rng(5)
    if name == "ssim":
        X_D = rng.random((10, 11, 11, 1), dtype=np.float32)
        X_U = rng.random((13, 11, 11, 1), dtype=np.float32)
    else:
        X_D, X_U = rng.integers(0, 3, size=(10, 3)).astype(np.float32), rng.normal(size=(13, 3))
    results = []
    for chunk in (1, 3, 7, 10, 1000):
        measure = Recording(make_measure(name))
        results.append((search_unbounded(X_D, measure, chunk), search_bounded(X_D, X_U, measure, chunk)))
        assert measure.max_rows == min(chunk, 10)
    if name == "manhattan":  # scipy evaluates each pair on its own: bit-identical
        assert all(r == results[0] for r in results)
    else:  # SSIM's filters are BLAS products whose last bit may depend on the block shape
        for unbounded, bounded in results[1:]:
            assert_unbounded(unbounded, [(c.index, c.score) for c in results[0][0].top],
                             [(c.index, c.score) for c in results[0][0].bottom], atol=1e-12)
            assert_bounded(bounded, [(p.index, p.replacement_index, p.distance) for p in results[0][1].top],
                           [(p.index, p.replacement_index, p.distance) for p in results[0][1].bottom],
                           atol=1e-12)


def test_top_k_larger_than_candidates_and_input_errors():
    X = np.arange(6, dtype=np.float64).reshape(3, 2)
    got = search_unbounded(X, "euclidean", top_k=10)
    assert len(got.top) == len(got.bottom) == 3
    assert len(search_bounded(X[:1], X[1:], "euclidean", top_k=10).top) == 2
    with pytest.raises(ValueError, match="at least 2 records"):
        search_unbounded(X[:1], "euclidean")
    with pytest.raises(ValueError, match="needs records in D and in U"):
        search_bounded(X, X[:0], "euclidean")
    with pytest.raises(ValueError, match="chunk_size must be at least 1"):
        search_unbounded(X, "euclidean", 0)
    with pytest.raises(ValueError, match="2 indices for 3 records"):
        search_unbounded(X, "euclidean", index=np.array([1, 2]))


def test_negative_ssim_sum_excludes_the_record_itself():
    # Eq. 18 sums over D \ {x}: with d(x, x) = -1 included every score would shift by -1.
    X = np.random.default_rng(6).random((3, 11, 11, 1), dtype=np.float32)
    measure = make_measure("ssim")
    full = measure(X, X)
    got = search_unbounded(X, measure)
    expect = full.sum(axis=1) - np.diag(full)
    assert got.score == pytest.approx(expect.max(), abs=1e-9)


def prepared(name: str, kind: str, X: np.ndarray, seed: int = 0) -> PreparedData:
    n = len(X)
    perm = np.random.default_rng(seed).permutation(n)
    a, b = n // 4, (3 * n) // 4
    return PreparedData(name=name, kind=kind, X=X.astype(np.float32), y=np.zeros(n, np.int64), num_classes=2,
                        feature_names=tuple(f"f{i}" for i in range(int(np.prod(X.shape[1:])))),
                        train_idx=perm[:a], pool_idx=perm[a:b], eval_idx=perm[b:])


def test_run_sensitivity_writes_the_contract_json(tmp_path):
    rng = np.random.default_rng(7)
    data = prepared("adult", "tabular", rng.integers(0, 2, size=(40, 6)) * rng.random((40, 6)))
    out = tmp_path / "sensitivity" / "adult.json"
    result = run_sensitivity(data, SensitivityConfig(), out)
    assert result.measure == "manhattan" and result.dataset == "adult"
    assert result.unbounded.index in data.train_idx and result.bounded.index in data.train_idx
    assert result.bounded.replacement_index in data.pool_idx
    assert all(c.index in data.train_idx for c in result.unbounded.top + result.unbounded.bottom)
    assert all(p.replacement_index in data.pool_idx for p in result.bounded.top + result.bounded.bottom)
    # same answer as searching the global arrays directly
    X_D, X_U = data.split("train")[0], data.split("pool")[0]
    assert result.bounded == search_bounded(X_D, X_U, "manhattan", index=data.train_idx,
                                            replacement_index=data.pool_idx)
    assert SensitivityResult.load(out) == result
    raw = json.loads(out.read_text())
    assert set(raw) == {"dataset", "measure", "unbounded", "bounded"}
    assert set(raw["unbounded"]) == {"index", "score", "top", "bottom"}
    assert set(raw["bounded"]) == {"index", "replacement_index", "distance", "top", "bottom"}
    assert set(raw["bounded"]["top"][0]) == {"index", "replacement_index", "distance"}
    assert len(raw["unbounded"]["top"]) == len(raw["bounded"]["bottom"]) == 3


def test_run_sensitivity_on_images_and_ssim_window_errors(tmp_path):
    rng = np.random.default_rng(8)
    mnist_like = prepared("mnist", "image", rng.random((24, 12, 12, 1)))
    result = run_sensitivity(mnist_like, SensitivityConfig(), tmp_path / "mnist.json")
    assert result.measure == "ssim" and result.unbounded.index in mnist_like.train_idx
    digits_like = prepared("digits", "image", rng.random((24, 8, 8, 1)))
    assert run_sensitivity(digits_like, SensitivityConfig(), tmp_path / "d.json").measure == "euclidean"
    config = SensitivityConfig(measures={"digits": "ssim"})
    with pytest.raises(ParamsError, match=r"'sensitivity.measures.digits' = 'ssim'.*8×8 pixels"):
        run_sensitivity(digits_like, config, tmp_path / "d2.json")
    assert not (tmp_path / "d2.json").exists()
    small = SensitivityConfig(measures={"digits": "ssim"}, ssim_filter_size=5)
    assert run_sensitivity(digits_like, small, tmp_path / "d3.json").measure == "ssim"


def test_run_sensitivity_refuses_an_empty_pool(tmp_path):
    X = np.random.default_rng(9).random((8, 3))
    data = PreparedData(name="adult", kind="tabular", X=X.astype(np.float32), y=np.zeros(8, np.int64),
                        num_classes=2, feature_names=("a", "b", "c"), train_idx=np.arange(4),
                        pool_idx=np.arange(0), eval_idx=np.arange(4, 8))
    with pytest.raises(ValueError, match=r"adult: .*\|U \\ D\| = 0; lower data.prepare.adult"):
        run_sensitivity(data, SensitivityConfig(), tmp_path / "a.json")


def test_result_round_trip_and_load_errors(tmp_path):
    result = SensitivityResult(
        dataset="x", measure="hamming",
        unbounded=UnboundedChoice(3, 2.5, [Candidate(3, 2.5)], [Candidate(1, 0.5)]),
        bounded=BoundedChoice(3, 9, 4.0, [PairCandidate(3, 9, 4.0)], [PairCandidate(1, 8, 0.0)]),
    )
    path = tmp_path / "r.json"
    result.save(path)
    assert SensitivityResult.load(path) == result
    raw = json.loads(path.read_text())
    del raw["bounded"]["replacement_index"]
    path.write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=r"r.json: missing field 'replacement_index'"):
        SensitivityResult.load(path)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        SensitivityResult.load(tmp_path / "missing.json")


def test_config_defaults_and_params_yaml(repo_root):
    config = SensitivityConfig.from_params(load_params(repo_root / "params.yaml"))
    assert config.top_k == 3
    assert config.measure_for("adult") == "manhattan" and config.measure_for("mnist") == "ssim"
    assert config.measure_for("purchase100") == "hamming" and config.measure_for("digits") == "euclidean"
    merged = SensitivityConfig.from_params({"sensitivity": {"measures": {"adult": "cosine"}}})
    assert merged.measures == {**DEFAULT_MEASURES, "adult": "cosine"}


@pytest.mark.parametrize(
    ("section", "key"),
    [
        ({"chunk": 3}, "sensitivity.chunk"),
        ({"chunk_size": 0}, "sensitivity.chunk_size"),
        ({"chunk_size": "big"}, "sensitivity.chunk_size"),
        ({"top_k": 0}, "sensitivity.top_k"),
        ({"ssim_filter_size": 1}, "sensitivity.ssim_filter_size"),
        ({"ssim_backend": "torch"}, "sensitivity.ssim_backend"),
        ({"measures": {"adult": "jaccard"}}, "sensitivity.measures.adult"),
        ({"measures": {"adult": "ssim"}}, "sensitivity.measures.adult"),
        ({"measures": {"mnist": "hamming"}}, "sensitivity.measures.mnist"),
        ({"measures": {"adlt": "manhattan"}}, "sensitivity.measures.adlt"),
    ],
)
def test_config_errors_name_the_key(section, key):
    with pytest.raises(ParamsError, match=f"'{key}'"):
        SensitivityConfig.from_params({"sensitivity": section})


def test_config_missing_section_and_dataset():
    with pytest.raises(ParamsError, match="missing section 'sensitivity'"):
        SensitivityConfig.from_params({})
    config = SensitivityConfig()
    object.__setattr__(config, "measures", {})
    with pytest.raises(ParamsError, match="no measure for dataset 'adult'"):
        config.measure_for("adult")
