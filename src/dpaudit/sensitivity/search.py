"""Dataset-sensitivity search: which neighbouring dataset D′ differs most from D (Bernau et al. Def. 6).

Unbounded DP (Eq. 18): D′ = D \\ {x̂}, where x̂ maximises the summed dissimilarity to the rest of D.
Bounded DP (Eq. 20): D′ = D with x̂ replaced by x̂′, the pair (x̂ ∈ D, x̂′ ∈ U \\ D) of largest
dissimilarity. The identifiability trainer then measures the local sensitivity of the clipped
gradients between D and that D′ (Eqs. 19, 21). Besides the maximiser we keep the top-k and
bottom-k candidates, whose local sensitivities Bernau et al. compare in Fig. 4.

The search is O(|D|·|U|) pairs. Rows of D are processed in chunks of ``chunk_size`` against the
whole other set, so at most a [chunk_size, |U|] block of distances exists at once; top/bottom
lists are merged chunk by chunk. Ties are broken towards the lowest global index (then the lowest
replacement index). With the scipy-based measures every pair is computed on its own, so the
result is bit-identical for any chunk size; SSIM's filters are BLAS products, whose last bit can
depend on the block shape (values agree to ~1e-15, choices among exact duplicates may swap).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dpaudit.config import ParamsError, from_mapping, require, section
from dpaudit.data.prepared import PreparedData
from dpaudit.data.registry import DATASETS
from dpaudit.io import read_json, write_json
from dpaudit.logs import progress
from dpaudit.sensitivity.measures import MEASURE_KINDS, MEASURES, Measure, MeasureName, make_measure

logger = logging.getLogger(__name__)

#: Default measure per dataset. adult, mnist, purchase100 follow Bernau et al. §6.1 (manhattan,
#: negative SSIM, hamming). digits are 8×8 images, smaller than SSIM's standard 11×11 window, and a
#: shrunken window would be a different measure from the paper's: we use euclidean, the other image
#: measure of §6.1 (``ssim_filter_size`` ≤ 8 enables SSIM there). cifar10 (not in the paper):
#: euclidean as well.
DEFAULT_MEASURES: dict[str, str] = {
    "adult": "manhattan",
    "digits": "euclidean",
    "mnist": "ssim",
    "purchase100": "hamming",
    "cifar10": "euclidean",
}

#: Data kind of each known dataset, to reject e.g. SSIM for adult before any stage runs.
DATASET_KINDS: dict[str, str] = {name: spec.kind for name, spec in DATASETS.items()}


@dataclass(frozen=True)
class SensitivityConfig:
    """The ``sensitivity`` section of params.yaml.

    ``measures`` overrides :data:`DEFAULT_MEASURES` per dataset (datasets left out keep their
    default). ``chunk_size`` is the number of rows of D compared at once (memory ≈ chunk_size ×
    |U| × 8 bytes). ``top_k`` candidates are kept at both ends. ``ssim_filter_size`` is the SSIM
    window; ``ssim_backend`` picks the fast numpy path or ``tf.image.ssim`` itself.
    """

    measures: dict[str, MeasureName] = field(default_factory=lambda: dict(DEFAULT_MEASURES))  # type: ignore[arg-type]
    chunk_size: int = 64
    top_k: int = 3
    ssim_filter_size: int = 11
    ssim_backend: Literal["numpy", "tensorflow"] = "numpy"

    def __post_init__(self) -> None:
        for dataset, measure in self.measures.items():
            key = f"sensitivity.measures.{dataset}"
            require(dataset in DATASET_KINDS, key, measure,
                    f"unknown dataset '{dataset}' (known: {', '.join(DATASET_KINDS)})")
            require(measure in MEASURES, key, measure, f"must be one of {', '.join(MEASURES)}")
            kind = DATASET_KINDS[dataset]
            require(kind in MEASURE_KINDS[measure], key, measure,
                    f"{dataset} is {kind} data; choose one of "
                    f"{', '.join(m for m in MEASURES if kind in MEASURE_KINDS[m])}")
        merged = {**DEFAULT_MEASURES, **self.measures}
        object.__setattr__(self, "measures", merged)
        require(self.chunk_size >= 1, "sensitivity.chunk_size", self.chunk_size, "must be at least 1")
        require(self.top_k >= 1, "sensitivity.top_k", self.top_k, "must be at least 1")
        require(self.ssim_filter_size >= 3, "sensitivity.ssim_filter_size", self.ssim_filter_size,
                "must be at least 3 (a smaller window compares single pixels)")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SensitivityConfig:
        """Build and validate from the whole params mapping (its ``sensitivity`` section)."""
        return from_mapping(cls, section(params, "sensitivity"), "sensitivity")

    def measure_for(self, dataset: str) -> str:
        """The measure name configured for ``dataset``."""
        if dataset not in self.measures:
            raise ParamsError(f"params: 'sensitivity.measures' has no measure for dataset '{dataset}'")
        return self.measures[dataset]


@dataclass(frozen=True)
class Candidate:
    """A record of D (global index) and its summed dissimilarity to the rest of D (Eq. 18)."""

    index: int
    score: float


@dataclass(frozen=True)
class PairCandidate:
    """A record of D and a replacement from U \\ D (global indices) with their dissimilarity (Eq. 20)."""

    index: int
    replacement_index: int
    distance: float


@dataclass(frozen=True)
class UnboundedChoice:
    """x̂ of Eq. 18 with its score, and the top-k / bottom-k candidates (best first / smallest first)."""

    index: int
    score: float
    top: list[Candidate]
    bottom: list[Candidate]


@dataclass(frozen=True)
class BoundedChoice:
    """(x̂, x̂′) of Eq. 20 with their distance, and the top-k / bottom-k pairs."""

    index: int
    replacement_index: int
    distance: float
    top: list[PairCandidate]
    bottom: list[PairCandidate]


@dataclass(frozen=True)
class SensitivityResult:
    """What ``data/sensitivity/<ds>.json`` holds: the unbounded and bounded choices and the measure."""

    dataset: str
    measure: str
    unbounded: UnboundedChoice
    bounded: BoundedChoice

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "sensitivity result") -> SensitivityResult:
        """Rebuild from :meth:`to_dict` output; a missing or mistyped field names ``where`` and the key."""
        try:
            unb, bnd = data["unbounded"], data["bounded"]
            unbounded = UnboundedChoice(
                index=int(unb["index"]),
                score=float(unb["score"]),
                top=[Candidate(int(c["index"]), float(c["score"])) for c in unb["top"]],
                bottom=[Candidate(int(c["index"]), float(c["score"])) for c in unb["bottom"]],
            )
            pairs = [
                [PairCandidate(int(p["index"]), int(p["replacement_index"]), float(p["distance"]))
                 for p in bnd[end]]
                for end in ("top", "bottom")
            ]
            bounded = BoundedChoice(
                index=int(bnd["index"]),
                replacement_index=int(bnd["replacement_index"]),
                distance=float(bnd["distance"]),
                top=pairs[0],
                bottom=pairs[1],
            )
            return cls(dataset=str(data["dataset"]), measure=str(data["measure"]),
                       unbounded=unbounded, bounded=bounded)
        except KeyError as exc:
            raise ValueError(f"{where}: missing field {exc.args[0]!r}") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: malformed content: {exc}") from exc

    def save(self, path: str | Path) -> None:
        """Write JSON atomically."""
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> SensitivityResult:
        """Read a result written by :meth:`save` (errors name the file)."""
        data = read_json(path)
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
        return cls.from_dict(data, where=str(path))


def _as_measure(measure: Measure | str) -> Measure:
    return make_measure(measure) if isinstance(measure, str) else measure


def _global_index(index: np.ndarray | None, n: int, what: str) -> np.ndarray:
    if index is None:
        return np.arange(n, dtype=np.int64)
    index = np.asarray(index, dtype=np.int64)
    if index.shape != (n,):
        raise ValueError(f"{what}: {len(index)} indices for {n} records")
    return index


def _order(values: np.ndarray, keys: tuple[np.ndarray, ...], largest: bool) -> np.ndarray:
    """Positions sorted best first (largest or smallest value), ties by the keys in order, ascending."""
    primary = -values if largest else values
    return np.lexsort((*reversed(keys), primary))


def _check_chunk_size(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")


def search_unbounded(
    X_D: np.ndarray,
    measure: Measure | str,
    chunk_size: int = 64,
    *,
    top_k: int = 3,
    index: np.ndarray | None = None,
) -> UnboundedChoice:
    """x̂ = argmax over x ∈ D of Σ_{x₂ ∈ D \\ {x}} d(x, x₂) (Bernau et al. Eq. 18), with top/bottom-k.

    ``index`` gives the global index of each row of ``X_D`` (default 0..n−1); results carry it and
    ties go to the lowest. Memory: one [chunk_size, |D|] block at a time.
    """
    measure = _as_measure(measure)
    _check_chunk_size(chunk_size)
    n = len(X_D)
    if n < 2:
        raise ValueError(f"unbounded search needs at least 2 records in D, got {n}")
    gidx = _global_index(index, n, "index")
    scores = np.empty(n, dtype=np.float64)
    with progress(total=n, desc=f"sensitivity unbounded ({measure.name})", unit="row") as bar:
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            block = measure(X_D[start:stop], X_D)
            rows = np.arange(stop - start)
            block[rows, start + rows] = 0.0  # the sum runs over D without x itself
            scores[start:stop] = block.sum(axis=1)
            bar.update(stop - start)
    k = min(top_k, n)
    top = _order(scores, (gidx,), largest=True)[:k]
    bottom = _order(scores, (gidx,), largest=False)[:k]
    best = int(top[0])
    logger.info("unbounded: x̂ = %d (summed %s %.6g over %d records)",
                gidx[best], measure.name, scores[best], n)
    return UnboundedChoice(
        index=int(gidx[best]),
        score=float(scores[best]),
        top=[Candidate(int(gidx[i]), float(scores[i])) for i in top],
        bottom=[Candidate(int(gidx[i]), float(scores[i])) for i in bottom],
    )


class _PairSelector:
    """Running k best pairs (largest or smallest distance; ties to the lowest indices) over blocks."""

    def __init__(self, k: int, largest: bool) -> None:
        self.k = k
        self.largest = largest
        self.values = np.empty(0, dtype=np.float64)
        self.rows = np.empty(0, dtype=np.int64)
        self.cols = np.empty(0, dtype=np.int64)

    def add(self, block: np.ndarray, row_idx: np.ndarray, col_idx: np.ndarray) -> None:
        flat = block.ravel()
        if flat.size > self.k:
            # Keep every entry at least as good as the k-th best, so ties survive to the sort below.
            if self.largest:
                kth = np.partition(flat, flat.size - self.k)[flat.size - self.k]
                pos = np.flatnonzero(flat >= kth)
            else:
                kth = np.partition(flat, self.k - 1)[self.k - 1]
                pos = np.flatnonzero(flat <= kth)
        else:
            pos = np.arange(flat.size)
        r, c = np.divmod(pos, block.shape[1])
        values = np.concatenate([self.values, flat[pos]])
        rows = np.concatenate([self.rows, row_idx[r]])
        cols = np.concatenate([self.cols, col_idx[c]])
        keep = _order(values, (rows, cols), self.largest)[: self.k]
        self.values, self.rows, self.cols = values[keep], rows[keep], cols[keep]

    def candidates(self) -> list[PairCandidate]:
        return [PairCandidate(int(r), int(c), float(v))
                for v, r, c in zip(self.values, self.rows, self.cols, strict=True)]


def search_bounded(
    X_D: np.ndarray,
    X_U: np.ndarray,
    measure: Measure | str,
    chunk_size: int = 64,
    *,
    top_k: int = 3,
    index: np.ndarray | None = None,
    replacement_index: np.ndarray | None = None,
) -> BoundedChoice:
    """(x̂, x̂′) = argmax over x ∈ D, x′ ∈ U \\ D of d(x, x′) (Bernau et al. Eq. 20), with top/bottom-k pairs.

    ``X_U`` holds the pool U \\ D; ``index`` / ``replacement_index`` give global indices of the rows
    of ``X_D`` / ``X_U`` (default positions). Ties go to the lowest (index, replacement_index).
    Memory: one [chunk_size, |U \\ D|] block at a time.
    """
    measure = _as_measure(measure)
    _check_chunk_size(chunk_size)
    n, m = len(X_D), len(X_U)
    if n < 1 or m < 1:
        raise ValueError(f"bounded search needs records in D and in U \\ D, got {n} and {m}")
    gidx = _global_index(index, n, "index")
    uidx = _global_index(replacement_index, m, "replacement_index")
    k = min(top_k, n * m)
    top, bottom = _PairSelector(k, largest=True), _PairSelector(k, largest=False)
    with progress(total=n, desc=f"sensitivity bounded ({measure.name}, |U\\D|={m})", unit="row") as bar:
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            block = measure(X_D[start:stop], X_U)
            top.add(block, gidx[start:stop], uidx)
            bottom.add(block, gidx[start:stop], uidx)
            bar.update(stop - start)
    best = top.candidates()
    logger.info("bounded: (x̂, x̂′) = (%d, %d) (%s %.6g over %d × %d pairs)",
                best[0].index, best[0].replacement_index, measure.name, best[0].distance, n, m)
    return BoundedChoice(
        index=best[0].index,
        replacement_index=best[0].replacement_index,
        distance=best[0].distance,
        top=best,
        bottom=bottom.candidates(),
    )


def run_sensitivity(
    prepared: PreparedData, config: SensitivityConfig, out_path: Path, measure: str | None = None
) -> SensitivityResult:
    """The ``sensitivity@<ds>`` stage: search D and U \\ D of ``prepared`` and write the result JSON.

    ``measure`` overrides ``config.measures`` (a custom dataset's own ``data.custom.<name>.measure``).
    """
    name = measure if measure is not None else config.measure_for(prepared.name)
    try:
        measure = make_measure(name, kind=prepared.kind, record_shape=prepared.input_shape,
                               ssim_filter_size=config.ssim_filter_size, ssim_backend=config.ssim_backend)
    except ValueError as exc:
        raise ParamsError(f"params: 'sensitivity.measures.{prepared.name}' = {name!r} is invalid for "
                          f"{prepared.name}: {exc}") from exc
    if len(prepared.train_idx) < 2 or len(prepared.pool_idx) < 1:
        raise ValueError(
            f"{prepared.name}: the search needs |D| >= 2 and a non-empty pool U \\ D, got |D| = "
            f"{len(prepared.train_idx)}, |U \\ D| = {len(prepared.pool_idx)}; lower "
            f"data.prepare.{prepared.name}.train_size or eval_size"
        )
    X_D = prepared.X[prepared.train_idx]
    X_U = prepared.X[prepared.pool_idx]
    logger.info("%s: dataset sensitivity with %s over |D| = %d, |U \\ D| = %d",
                prepared.name, name, len(X_D), len(X_U))
    unbounded = search_unbounded(X_D, measure, config.chunk_size, top_k=config.top_k,
                                 index=prepared.train_idx)
    bounded = search_bounded(X_D, X_U, measure, config.chunk_size, top_k=config.top_k,
                             index=prepared.train_idx, replacement_index=prepared.pool_idx)
    result = SensitivityResult(dataset=prepared.name, measure=name, unbounded=unbounded, bounded=bounded)
    result.save(out_path)
    return result
