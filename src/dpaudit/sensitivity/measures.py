"""Dissimilarity measures between records, for the dataset-sensitivity search (Bernau et al. §6.1).

Every measure maps two sets of records ``A`` ([a, ...]) and ``B`` ([m, ...], same trailing shape)
to the matrix of pairwise dissimilarities ``[a, m]`` in float64; larger means more different.
Bernau et al. §6.1 consider negative SSIM and euclidean distance for images, and hamming,
euclidean, manhattan and cosine distance for tabular data.

The tabular measures call :func:`scipy.spatial.distance.cdist`, which evaluates every pair on its
own in double precision. That keeps a pair's value independent of how the search chunks the
rows, so chunked and unchunked searches agree bit for bit.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from scipy.spatial.distance import cdist

MeasureName = Literal["ssim", "euclidean", "manhattan", "hamming", "cosine"]

#: Every measure by name, in the order of Bernau et al. §6.1.
MEASURES: tuple[str, ...] = ("ssim", "euclidean", "manhattan", "hamming", "cosine")

#: Which data kinds (``PreparedData.kind``) each measure is meant for (Bernau et al. §6.1).
MEASURE_KINDS: dict[str, tuple[str, ...]] = {
    "ssim": ("image",),
    "euclidean": ("image", "tabular"),
    "manhattan": ("tabular",),
    "hamming": ("tabular",),
    "cosine": ("tabular",),
}


class Measure(abc.ABC):
    """A pairwise dissimilarity: ``measure(A, B)`` is the float64 matrix ``[len(A), len(B)]``."""

    name: ClassVar[str]

    def __call__(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Validate shapes, compute all pairs and check that every value is finite."""
        A = np.asarray(A)
        B = np.asarray(B)
        if A.ndim < 2 or B.ndim < 2:
            raise ValueError(f"{self.name}: expected record sets [n, ...], got shapes {A.shape}, {B.shape}")
        if A.shape[1:] != B.shape[1:]:
            raise ValueError(f"{self.name}: records differ in shape: {A.shape[1:]} vs {B.shape[1:]}")
        if len(A) == 0 or len(B) == 0:
            return np.zeros((len(A), len(B)), dtype=np.float64)
        out = np.ascontiguousarray(self._pairwise(A, B), dtype=np.float64)
        if out.shape != (len(A), len(B)):
            raise AssertionError(f"{self.name}: produced shape {out.shape}, expected {(len(A), len(B))}")
        if not np.all(np.isfinite(out)):
            raise ValueError(f"{self.name}: a dissimilarity is not finite (NaN or inf in the input?)")
        return out

    @abc.abstractmethod
    def _pairwise(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """All pairwise dissimilarities of two non-empty record sets of equal trailing shape."""


def _flat64(X: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(X.reshape(len(X), -1), dtype=np.float64)


class Euclidean(Measure):
    """L2 distance between flattened records (images or tabular rows)."""

    name = "euclidean"

    def _pairwise(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return cdist(_flat64(A), _flat64(B), "euclidean")


class Manhattan(Measure):
    """L1 (city-block) distance; Bernau et al. found it the most informative for Adult."""

    name = "manhattan"

    def _pairwise(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return cdist(_flat64(A), _flat64(B), "cityblock")


class Hamming(Measure):
    """Number of coordinates in which two records differ (a count, not scipy's fraction)."""

    name = "hamming"

    def _pairwise(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        A2, B2 = _flat64(A), _flat64(B)
        # scipy returns count / d; the product with d is an integer up to rounding, so round it back.
        return np.rint(cdist(A2, B2, "hamming") * A2.shape[1])


class Cosine(Measure):
    """Cosine distance 1 − u·v / (‖u‖‖v‖) in [0, 2].

    The direction of an all-zero record is undefined; we take its distance to a non-zero record
    as 1 (no shared direction, as ``sklearn.metrics.pairwise.cosine_distances`` does) and to
    another all-zero record as 0 (identical records).
    """

    name = "cosine"

    def _pairwise(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        A2, B2 = _flat64(A), _flat64(B)
        zero_a = ~np.any(A2 != 0, axis=1)
        zero_b = ~np.any(B2 != 0, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = cdist(A2, B2, "cosine")
        out[zero_a, :] = 1.0
        out[:, zero_b] = 1.0
        out[np.ix_(zero_a, zero_b)] = 0.0
        return np.clip(out, 0.0, 2.0)


@dataclass(frozen=True)
class NegativeSSIM(Measure):
    """Negative structural similarity −SSIM(x, y) ∈ [−1, 1] of images [h, w, c] (Bernau et al. §6.1).

    SSIM is defined as in ``tf.image.ssim`` (Wang et al. 2004): Gaussian window of ``filter_size``
    pixels and width ``filter_sigma``, VALID windows only, constants ``(k1·max_val)²`` and
    ``(k2·max_val)²``, the mean over windows and channels. Two backends:

    - ``"tensorflow"`` calls ``tf.image.ssim`` on broadcast batches of at most ``pair_batch`` pairs.
      It filters two product images per pair with a 2-D depthwise convolution: 4.6k pairs/s on 2
      shared CPU cores, 195 s for MNIST's 100 × 8.9k pairs (the numpy path: 12 s, same choices).
    - ``"numpy"`` (default) is hand-written for speed: the Gaussian window is separable, so each
      filter is two matrix products with banded matrices, and by linearity the window means of
      x, y, x² and y² are filtered once per image; only x·y is filtered per pair. It works in
      float64: ``tf.image.ssim`` works in float32, where E[x²] − μ² cancels and flat regions lose
      up to ~1e-4 (two constant images: 0.60018 instead of 0.60010). The tests check the two agree
      to 5e-6 on random images.
    """

    filter_size: int = 11
    filter_sigma: float = 1.5
    max_val: float = 1.0
    k1: float = 0.01
    k2: float = 0.03
    pair_batch: int = 1024
    backend: Literal["numpy", "tensorflow"] = "numpy"

    name: ClassVar[str] = "ssim"

    def __post_init__(self) -> None:
        if self.filter_size < 1:
            raise ValueError(f"ssim: filter_size must be a positive integer, got {self.filter_size}")
        if self.filter_sigma <= 0 or self.max_val <= 0:
            raise ValueError(f"ssim: filter_sigma and max_val must be positive, got {self.filter_sigma}, "
                             f"{self.max_val}")
        if self.pair_batch < 1:
            raise ValueError(f"ssim: pair_batch must be at least 1, got {self.pair_batch}")
        if self.backend not in ("numpy", "tensorflow"):
            raise ValueError(f"ssim: backend must be 'numpy' or 'tensorflow', got {self.backend!r}")

    def check_shape(self, shape: tuple[int, ...]) -> None:
        """Refuse record shapes that are not [h, w, c] images at least one window large."""
        if len(shape) != 3:
            raise ValueError(f"ssim: needs images [h, w, c], got records of shape {tuple(shape)}")
        h, w = shape[0], shape[1]
        if h < self.filter_size or w < self.filter_size:
            raise ValueError(
                f"ssim: images of {h}×{w} pixels are smaller than the {self.filter_size}×{self.filter_size} "
                f"SSIM window; use a filter_size of at most {min(h, w)} or the euclidean measure"
            )

    def _check_range(self, X: np.ndarray) -> None:
        lo, hi = float(np.min(X)), float(np.max(X))
        if lo < 0 or hi > self.max_val * (1 + 1e-6):
            raise ValueError(f"ssim: pixel values must lie in [0, {self.max_val}], found [{lo}, {hi}]")

    def _pairwise(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        self.check_shape(A.shape[1:])
        self._check_range(A)
        self._check_range(B)
        ssim = self._ssim_tensorflow(A, B) if self.backend == "tensorflow" else self._ssim_numpy(A, B)
        return -ssim

    def _ssim_tensorflow(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        import tensorflow as tf

        A = np.asarray(A, dtype=np.float32)
        B = np.asarray(B, dtype=np.float32)
        out = np.empty((len(A), len(B)), dtype=np.float64)
        step = max(1, self.pair_batch // len(A))
        a = tf.constant(A[:, None])
        for j in range(0, len(B), step):
            b = tf.constant(B[None, j : j + step])
            value = tf.image.ssim(a, b, max_val=self.max_val, filter_size=self.filter_size,
                                  filter_sigma=self.filter_sigma, k1=self.k1, k2=self.k2)
            out[:, j : j + step] = value.numpy()
        return out

    def _band(self, n: int) -> np.ndarray:
        """[n, n − f + 1] matrix whose column p holds the normalised 1-D Gaussian at rows p..p+f−1."""
        f = self.filter_size
        coords = np.arange(f, dtype=np.float64) - (f - 1) / 2.0
        g = np.exp(-0.5 * coords**2 / self.filter_sigma**2)
        g /= g.sum()  # the outer product g gᵀ equals tf.image.ssim's softmax-normalised 2-D kernel
        band = np.zeros((n, n - f + 1), dtype=np.float64)
        for p in range(n - f + 1):
            band[p : p + f, p] = g
        return band

    @staticmethod
    def _filter(X: np.ndarray, band_h: np.ndarray, band_w: np.ndarray) -> np.ndarray:
        """Gaussian window means of images [N, h, w] as [N, w', h'] (transposed; used consistently)."""
        n, h, w = X.shape
        t = (X.reshape(n * h, w) @ band_w).reshape(n, h, -1)
        t = np.ascontiguousarray(t.transpose(0, 2, 1))
        return (t.reshape(-1, h) @ band_h).reshape(n, band_w.shape[1], band_h.shape[1])

    def _ssim_numpy(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        a, h, w, c = A.shape
        m = len(B)
        band_h, band_w = self._band(h), self._band(w)
        A_ = np.ascontiguousarray(A.transpose(0, 3, 1, 2), dtype=np.float64)  # [a, c, h, w]
        B_ = np.ascontiguousarray(B.transpose(0, 3, 1, 2), dtype=np.float64)
        c1 = np.float64((self.k1 * self.max_val) ** 2)
        c2 = np.float64((self.k2 * self.max_val) ** 2)

        def stats(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Window mean μ and variance E[x²] − μ² of each image and channel, [n, c, w', h']."""
            flat = X.reshape(-1, h, w)
            mu = self._filter(flat, band_h, band_w).reshape(len(X), c, band_w.shape[1], band_h.shape[1])
            var = self._filter(flat * flat, band_h, band_w).reshape(mu.shape) - mu * mu
            return mu, var

        mu_a, var_a = stats(A_)
        mu_b, var_b = stats(B_)
        # Per-image pieces of luminance (2μaμb + c1)/(μa² + μb² + c1) and contrast-structure
        # (2σab + c2)/(σa² + σb² + c2), with σab = E[ab] − μaμb, arranged to need few passes per pair.
        two_mu_a = (2 * mu_a)[:, None]
        mu_b_row = mu_b[None]
        sq_a_c1 = (mu_a * mu_a + c1)[:, None]
        sq_b = (mu_b * mu_b)[None]
        var_a_c2 = (var_a + c2)[:, None]
        var_b_row = var_b[None]
        band_w2 = 2 * band_w  # the product filter yields 2·E[ab] directly
        out = np.empty((a, m), dtype=np.float64)
        step = max(1, self.pair_batch // (a * c))
        for j in range(0, m, step):
            cols = slice(j, min(j + step, m))
            k = cols.stop - cols.start
            prod = (A_[:, None] * B_[None, cols]).reshape(-1, h, w)
            cs_num = self._filter(prod, band_h, band_w2).reshape(a, k, *mu_a.shape[1:])
            num0 = two_mu_a * mu_b_row[:, cols]  # 2 μa μb
            cs_num -= num0
            cs_num += c2
            num0 += c1
            num0 *= cs_num  # numerator of luminance × contrast-structure
            den = sq_a_c1 + sq_b[:, cols]
            den *= var_a_c2 + var_b_row[:, cols]
            num0 /= den
            out[:, cols] = num0.reshape(a, k, -1).mean(axis=2, dtype=np.float64)
        return out


def make_measure(
    name: str,
    *,
    kind: str | None = None,
    record_shape: tuple[int, ...] | None = None,
    ssim_filter_size: int = 11,
    ssim_backend: Literal["numpy", "tensorflow"] = "numpy",
) -> Measure:
    """Build the measure ``name``; with ``kind``/``record_shape`` also check it suits the data.

    A measure meant for another data kind (e.g. hamming on images) or SSIM on images smaller than
    its window is refused with an error naming both.
    """
    if name not in MEASURES:
        raise ValueError(f"unknown dissimilarity measure {name!r}; choose one of {', '.join(MEASURES)}")
    if kind is not None and kind not in MEASURE_KINDS[name]:
        fits = [m for m in MEASURES if kind in MEASURE_KINDS[m]]
        raise ValueError(f"measure {name!r} is for {'/'.join(MEASURE_KINDS[name])} data, not {kind} data; "
                         f"choose one of {', '.join(fits)}")
    measure: Measure
    if name == "ssim":
        ssim = NegativeSSIM(filter_size=ssim_filter_size, backend=ssim_backend)
        if record_shape is not None:
            ssim.check_shape(tuple(record_shape))
        measure = ssim
    else:
        classes: dict[str, type[Measure]] = {
            "euclidean": Euclidean, "manhattan": Manhattan, "hamming": Hamming, "cosine": Cosine
        }
        measure = classes[name]()
    return measure
