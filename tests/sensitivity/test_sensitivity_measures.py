"""Dissimilarity measures on hand-computed pairs, and negative SSIM against tf.image.ssim."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.sensitivity.measures import (
    MEASURES,
    Cosine,
    Euclidean,
    Hamming,
    Manhattan,
    NegativeSSIM,
    make_measure,
)


def one(measure, x, y) -> float:
    out = measure(np.asarray([x], dtype=np.float32), np.asarray([y], dtype=np.float32))
    assert out.shape == (1, 1) and out.dtype == np.float64
    return float(out[0, 0])


def test_hamming_counts_differing_coordinates():
    assert one(Hamming(), [0, 1, 1], [1, 1, 0]) == 2.0
    assert one(Hamming(), [0.5, 2, 3, 4], [0.5, 2, 3, 4]) == 0.0
    assert one(Hamming(), [0.5, 2, 3, 4], [0.25, 1, 2, 3]) == 4.0


def test_manhattan_and_euclidean():
    assert one(Manhattan(), [1, 2, 3], [4, 0, 3]) == 5.0
    assert one(Manhattan(), [0, 1, 1], [1, 1, 0]) == 2.0
    assert one(Euclidean(), [0, 0], [3, 4]) == 5.0
    assert one(Euclidean(), [1, 1, 1, 1], [0, 0, 0, 0]) == 2.0


def test_euclidean_flattens_images():
    x = np.zeros((1, 2, 2, 1), np.float32)
    y = np.full((1, 2, 2, 1), 0.5, np.float32)
    assert Euclidean()(x, y)[0, 0] == pytest.approx(1.0)


def test_cosine_orthogonal_parallel_opposite_and_zero():
    assert one(Cosine(), [1, 0], [0, 3]) == pytest.approx(1.0)
    assert one(Cosine(), [1, 2], [2, 4]) == pytest.approx(0.0, abs=1e-12)
    assert one(Cosine(), [1, 2], [-1, -2]) == pytest.approx(2.0)
    assert one(Cosine(), [1, 1], [1, 0]) == pytest.approx(1 - 1 / np.sqrt(2))
    # all-zero records: distance 1 to a non-zero record, 0 to another all-zero record
    assert one(Cosine(), [0, 0], [1, 2]) == 1.0
    assert one(Cosine(), [0, 0], [0, 0]) == 0.0


def test_pairwise_matrix_shape_and_values():
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(4, 6)), rng.normal(size=(7, 6))
    out = Manhattan()(A, B)
    assert out.shape == (4, 7) and out.dtype == np.float64
    np.testing.assert_allclose(out, np.abs(A[:, None] - B[None]).sum(-1), rtol=1e-12)
    out = Cosine()(A, B)
    expect = 1 - (A @ B.T) / np.outer(np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1))
    np.testing.assert_allclose(out, expect, rtol=1e-10, atol=1e-12)


def test_shape_mismatch_and_nan_are_refused():
    with pytest.raises(ValueError, match="differ in shape"):
        Euclidean()(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match="not finite"):
        Euclidean()(np.array([[np.nan, 0.0]]), np.zeros((2, 2)))
    assert Euclidean()(np.zeros((0, 3)), np.zeros((5, 3))).shape == (0, 5)


def test_ssim_of_an_image_with_itself_is_minus_one():
    rng = np.random.default_rng(1)
    X = rng.random((3, 28, 28, 1), dtype=np.float32)
    for backend in ("numpy", "tensorflow"):
        out = NegativeSSIM(backend=backend)(X, X)
        np.testing.assert_allclose(np.diag(out), -1.0, atol=1e-6)
        assert np.all(out > -1 - 1e-6) and np.all(out < 1 + 1e-6)


def test_ssim_of_constant_images_closed_form():
    # With zero variance SSIM reduces to the luminance term (2ab + c1) / (a² + b² + c1), c1 = 0.01².
    x = np.full((1, 11, 11, 1), 0.2, np.float32)
    y = np.full((1, 11, 11, 1), 0.6, np.float32)
    a, b, c1 = float(np.float32(0.2)), float(np.float32(0.6)), 1e-4
    expect = (2 * a * b + c1) / (a**2 + b**2 + c1)  # 0.6001 to 4 digits
    assert NegativeSSIM()(x, y)[0, 0] == pytest.approx(-expect, abs=1e-12)


def test_ssim_single_window_matches_weighted_moments():
    # filter_size = image size: one Gaussian-weighted window, SSIM from its weighted moments.
    rng = np.random.default_rng(2)
    x, y = rng.random((5, 5)), rng.random((5, 5))
    g = np.exp(-0.5 * (np.arange(5) - 2.0) ** 2 / 1.5**2)
    W = np.outer(g, g) / np.outer(g, g).sum()
    mx, my = (W * x).sum(), (W * y).sum()
    vx, vy = (W * x * x).sum() - mx**2, (W * y * y).sum() - my**2
    cxy = (W * x * y).sum() - mx * my
    c1, c2 = 0.01**2, 0.03**2
    expect = (2 * mx * my + c1) * (2 * cxy + c2) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
    got = NegativeSSIM(filter_size=5)(x[None, :, :, None], y[None, :, :, None])[0, 0]
    assert got == pytest.approx(-expect, abs=1e-12)


@pytest.mark.parametrize(("shape", "filter_size"), [((28, 28, 1), 11), ((12, 13, 3), 11), ((8, 8, 1), 5)])
def test_ssim_numpy_backend_equals_tf_image_ssim(shape, filter_size):
    import tensorflow as tf

    rng = np.random.default_rng(3)
    A = rng.random((4, *shape), dtype=np.float32)
    B = rng.random((23, *shape), dtype=np.float32)
    B[1] = np.clip(0.7 * A[0] + 0.1, 0, 1)  # a strongly similar pair
    ref = -tf.image.ssim(A[:, None], B[None], max_val=1.0, filter_size=filter_size).numpy()
    fast = NegativeSSIM(filter_size=filter_size, pair_batch=10)(A, B)
    via_tf = NegativeSSIM(filter_size=filter_size, pair_batch=10, backend="tensorflow")(A, B)
    np.testing.assert_allclose(fast, ref, atol=5e-6)
    np.testing.assert_allclose(via_tf, ref, atol=1e-7)
    assert fast[0, 1] < -0.5  # the similar pair is recognised


def test_ssim_refuses_images_smaller_than_its_window():
    digits = np.zeros((2, 8, 8, 1), np.float32)
    with pytest.raises(ValueError, match=r"8×8 pixels are smaller than the 11×11"):
        NegativeSSIM()(digits, digits)
    with pytest.raises(ValueError, match="smaller than the 11×11"):
        make_measure("ssim", kind="image", record_shape=(8, 8, 1))
    assert make_measure("ssim", kind="image", record_shape=(8, 8, 1), ssim_filter_size=7).filter_size == 7


def test_ssim_refuses_out_of_range_pixels_and_tabular_records():
    with pytest.raises(ValueError, match=r"pixel values must lie in \[0, 1.0\]"):
        NegativeSSIM()(np.full((1, 11, 11, 1), 255.0), np.zeros((1, 11, 11, 1)))
    with pytest.raises(ValueError, match=r"needs images \[h, w, c\]"):
        NegativeSSIM()(np.zeros((2, 121)), np.zeros((2, 121)))


def test_make_measure_checks_name_and_kind():
    assert [make_measure(name).name for name in MEASURES] == list(MEASURES)
    with pytest.raises(ValueError, match="unknown dissimilarity measure 'jaccard'"):
        make_measure("jaccard")
    with pytest.raises(ValueError, match="'hamming' is for tabular data, not image data"):
        make_measure("hamming", kind="image")
    with pytest.raises(ValueError, match="'ssim' is for image data, not tabular data"):
        make_measure("ssim", kind="tabular")
