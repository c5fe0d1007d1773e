"""The user's own dataset: a DVC-tracked CSV, Parquet or NPZ file → :class:`PreparedData`.

Three steps, each a pure function of the file and the spec, each failing with an error that names
the file and the problem before any training starts:

1. :func:`verify_against_dvc` checks the file against the digest ``dvc add`` recorded in
   ``<file>.dvc``, so an audit always runs on the data version that git + DVC describe.
2. :func:`load_custom` reads the file into a feature table and a label vector, detecting numeric and
   categorical columns, and rejects empty files, a missing label column, missing labels, a single
   class and non-numeric junk in a numeric column.
3. :func:`prepare_custom` draws D, the pool U \\ D and the evaluation set exactly as the built-in
   datasets do (:func:`dpaudit.data.splits.draw_split`), then encodes features with scikit-learn's
   ``ColumnTransformer`` (one-hot for categoricals, min-max scaling for numerics) **fitted on the
   pool rows only**, and records the fitted parameters for provenance.

Why fit on the pool: a transformer fitted on D would let D's records shape the preprocessing (a
scaler's minimum and maximum, the set of one-hot categories) outside the DP-SGD mechanism, so the
audited model would leak D through a channel the privacy accounting does not cover. The evaluation
set is held out too. Categories that occur only outside the pool encode as all zeros
(``handle_unknown="ignore"``); numeric values of D outside the pool's range map outside [0, 1].

Why min-max scaling rather than standardisation: it matches the built-in ``adult`` preparation
(:func:`dpaudit.data.parsers.encode_adult`), so numeric and one-hot features share the range [0, 1];
the tabular dissimilarity measures of the sensitivity search (manhattan, hamming, cosine; Bernau et
al. §6.1) then weigh a numeric column like a categorical one, and outliers do not produce the large
unbounded inputs that standardisation gives them.

Modules: :mod:`.custom_spec` (the params entry, formats, errors), :mod:`.custom_dvc` (step 1),
:mod:`.custom_load` (step 2) and this one (step 3, the stages' entry points and the check's sizes);
every name stays importable from here.
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sklearn
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

from dpaudit.config import require
from dpaudit.data.custom_dvc import committed_record_md5, file_md5, verify_against_dvc
from dpaudit.data.custom_load import column_types, load_custom
from dpaudit.data.custom_spec import (
    FORMATS,
    TABULAR_MEASURES,
    CustomDataError,
    CustomDatasetSpec,
    DvcDigestError,
)
from dpaudit.data.prepared import PreparedData
from dpaudit.data.registry import DATASET_NAMES
from dpaudit.data.splits import draw_split

__all__ = [
    "FORMATS",
    "TABULAR_MEASURES",
    "CustomDataError",
    "CustomDatasetSpec",
    "DatasetSize",
    "DvcDigestError",
    "column_types",
    "committed_record_md5",
    "dataset_size",
    "download_custom",
    "load_custom",
    "make_transformer",
    "prepare_custom",
    "prepare_custom_stage",
    "provenance_path",
    "transformer_provenance",
    "verify_against_dvc",
]

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------- preparing


def _one_hot_name(feature: str, category: Any) -> str:
    return f"{feature}={category}"


def _json_floats(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64)]


def make_transformer(numeric: list[str], categorical: list[str]) -> ColumnTransformer:
    """Min-max scaling of ``numeric`` and one-hot encoding of ``categorical`` (numerics first)."""
    parts: list[tuple[str, Any, list[str]]] = []
    if numeric:
        parts.append(("numeric", MinMaxScaler(), numeric))
    if categorical:
        encoder = OneHotEncoder(
            handle_unknown="ignore", sparse_output=False, feature_name_combiner=_one_hot_name
        )
        parts.append(("categorical", encoder, categorical))
    return ColumnTransformer(parts, remainder="drop", sparse_threshold=0.0, verbose_feature_names_out=False)


def transformer_provenance(transformer: ColumnTransformer) -> dict[str, Any]:
    """The fitted transformer's parameters as a JSON-able dict (what the model's inputs mean)."""
    record: dict[str, Any] = {
        "transformer": "sklearn.compose.ColumnTransformer",
        "sklearn_version": sklearn.__version__,
        "feature_names": [str(n) for n in transformer.get_feature_names_out()],
    }
    for name, fitted, columns in transformer.transformers_:
        if name == "numeric":
            record["numeric"] = {
                "scaler": "sklearn.preprocessing.MinMaxScaler",
                "columns": list(columns),
                "data_min": _json_floats(fitted.data_min_),
                "data_max": _json_floats(fitted.data_max_),
                "scale": _json_floats(fitted.scale_),
                "min": _json_floats(fitted.min_),
            }
        elif name == "categorical":
            record["categorical"] = {
                "encoder": "sklearn.preprocessing.OneHotEncoder",
                "handle_unknown": "ignore",
                "columns": list(columns),
                "categories": {c: [str(v) for v in cats] for c, cats in zip(columns, fitted.categories_,
                                                                             strict=True)},
            }
    return record


def prepare_custom(spec: CustomDatasetSpec, seed: int | None = None) -> tuple[PreparedData, dict[str, Any]]:
    """Load, split and encode a custom dataset: ``(PreparedData, provenance)``; no files are written.

    The split is :func:`dpaudit.data.splits.draw_split` over the file's rows with ``spec.seed`` (or
    ``seed``, the ``data.seed`` default, when the spec has none): D = ``train_idx``, the evaluation
    set = ``eval_idx``, the pool U \\ D = every other row (``pool_idx``), exactly as for the built-in
    datasets. The transformer is fitted on the pool rows and applied to all rows; ``X`` is float32
    ``[n, d]`` (kind ``tabular``), ``y`` the labels encoded as 0..K−1 in sorted order of the class
    values. ``provenance`` records the file and its md5 (the digest ``dvc add`` records), the split
    sizes, the fitted parameters and the classes.
    """
    effective = spec.seed if spec.seed is not None else seed
    if effective is None:
        raise CustomDataError(f"{spec.path}: no split seed: set 'seed' or pass data.seed")
    features, raw_labels = load_custom(spec)
    n = len(features)
    train, pool, evaluation = draw_split(n, spec.train_size, spec.eval_size, effective, where=spec.name)
    require(
        len(pool) > 0,
        f"{spec.name}.train_size",
        spec.train_size,
        f"train_size + eval_size = {spec.train_size} + {spec.eval_size} leaves no pool rows of the "
        f"{n} in {spec.path} to fit the preprocessing on",
    )
    numeric = [c for c in features.columns if pd.api.types.is_float_dtype(features[c])]
    categorical = [c for c in features.columns if c not in numeric]
    transformer = make_transformer(numeric, categorical)
    transformer.fit(features.iloc[pool])
    X = np.asarray(transformer.transform(features), dtype=np.float32)
    classes, y = np.unique(raw_labels.astype(str) if raw_labels.dtype == object else raw_labels,
                           return_inverse=True)
    record = transformer_provenance(transformer)
    provenance: dict[str, Any] = {
        "name": spec.name,
        "file": str(spec.path),
        "md5": file_md5(Path(spec.path)),
        "rows": n,
        "seed": int(effective),
        "sizes": {"train": len(train), "pool": len(pool), "eval": len(evaluation)},
        "fitted_on": "pool",
        "label": {"column": spec.label, "classes": [_plain(c) for c in classes]},
        **record,
    }
    prepared = PreparedData(
        name=spec.name,
        kind="tabular",
        X=X,
        y=y.astype(np.int64),
        num_classes=len(classes),
        feature_names=tuple(record["feature_names"]),
        train_idx=train,
        pool_idx=pool,
        eval_idx=evaluation,
    )
    return prepared, provenance


def _plain(value: Any) -> str | int | float | bool:
    """A class value as a JSON scalar (numpy scalars → Python; non-finite floats → strings)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value if isinstance(value, str | int | float | bool) else str(value)


# ------------------------------------------------------------------------------------- the stages


def provenance_path(prepared_path: str | Path) -> Path:
    """Where the prepare stage writes a custom dataset's provenance: next to ``<name>.npz``."""
    prepared_path = Path(prepared_path)
    return prepared_path.with_name(f"{prepared_path.stem}.provenance.json")


def download_custom(spec: CustomDatasetSpec, out_dir: str | Path) -> str:
    """``download-custom@<name>``: verify the file against its ``.dvc`` digest and copy it into ``out_dir``.

    ``out_dir`` (``data/raw/<name>/``) receives the verified copy under the file's own name and a
    ``manifest.json`` recording the source path, the md5 ``dvc add`` recorded, the md5 git's HEAD
    records (:func:`committed_record_md5`; a differing or missing one is logged as a warning and
    named in the note the report's provenance shows), the sha256 and the size. Everything is written
    atomically: a mismatch leaves no ``out_dir`` behind. Returns the md5.
    """
    import shutil

    from dpaudit.data.registry import MANIFEST_NAME
    from dpaudit.io import atomic_directory, write_json

    source = Path(spec.path)
    md5 = verify_against_dvc(source)
    sha256 = hashlib.sha256(source.read_bytes()).hexdigest()
    committed = committed_record_md5(source)
    if committed == md5:
        version = f"the version committed to git (DVC md5 {md5})"
    else:
        before = f"git HEAD records md5 {committed}" if committed else f"{source}.dvc is not committed to git"
        version = (f"a NEW version not committed to git: md5 {md5} ({before}); commit {source}.dvc to make "
                   f"it the audited version of record")
        log.warning("%s: auditing %s", source, version)
    with atomic_directory(out_dir) as tmp:
        shutil.copyfile(source, tmp / source.name)
        write_json(
            tmp / MANIFEST_NAME,
            {
                "dataset": spec.name,
                "source": str(source),
                "file": source.name,
                "md5": md5,
                "committed_md5": committed,
                "sha256": sha256,
                "size": source.stat().st_size,
                "note": f"your own data: {source}, {version}; verified against {source}.dvc",
            },
        )
    return md5


def prepare_custom_stage(
    spec: CustomDatasetSpec, raw_dir: str | Path, out_path: str | Path
) -> tuple[PreparedData, dict[str, Any]]:
    """``prepare-custom@<name>``: :func:`prepare_custom` on the verified copy in ``raw_dir``; write the
    prepared ``out_path`` (``.npz``) and its provenance JSON (:func:`provenance_path`) atomically.

    The provenance names the user's file (``spec.path``), not the copy, its DVC md5 and the md5 that
    git's HEAD records (``committed_md5``; differs, or is null, when an uncommitted version is audited).
    """
    from dataclasses import replace

    from dpaudit.io import write_json

    copy = Path(raw_dir) / Path(spec.path).name
    if not copy.is_file():
        raise FileNotFoundError(f"{copy} does not exist: run `dvc repro download-custom@{spec.name}` first")
    prepared, provenance = prepare_custom(replace(spec, path=str(copy)))
    provenance = {**provenance, "file": str(spec.path), "verified_copy": str(copy),
                  "committed_md5": committed_record_md5(spec.path)}
    prepared.save(out_path)
    write_json(provenance_path(out_path), provenance)
    return prepared, provenance


# ------------------------------------------------------------------------------------ the check


@dataclass(frozen=True)
class DatasetSize:
    """A dataset's sizes as the prepare stage will produce them, known at ``check`` time: rows of the
    population, |D|, the evaluation set, the pool U \\ D (the rest), one input's shape, the classes."""

    rows: int
    train: int
    eval: int
    input_shape: tuple[int, ...]
    num_classes: int

    @property
    def pool(self) -> int:
        return self.rows - self.train - self.eval


def dataset_size(data: Any, name: str) -> DatasetSize | None:
    """The :class:`DatasetSize` of ``name`` under ``data`` (a validated
    :class:`~dpaudit.data.prepare.DataConfig`), before the download and prepare stages have run.

    A built-in dataset's population comes from :data:`dpaudit.data.parsers.POPULATIONS` and its sizes
    from ``data.prepare.<name>``; a custom dataset is loaded and encoded as the prepare stage would
    (:func:`prepare_custom`: the one-hot width depends on the pool's categories). None for any other
    name (a target model's dataset, prepared from its membership file).
    """
    from dpaudit.data.parsers import POPULATIONS

    if name in getattr(data, "custom", {}):
        spec = data.custom_spec(name)
        prepared, _ = prepare_custom(spec)
        return DatasetSize(len(prepared.X), len(prepared.train_idx), len(prepared.eval_idx),
                           tuple(prepared.input_shape), int(prepared.num_classes))
    if name not in DATASET_NAMES:
        return None
    pool = data.pool_for(name)
    shape = POPULATIONS[f"{name}:{pool}" if pool else name]
    sizes = data.prepare_for(name)
    return DatasetSize(shape.rows, sizes.train_size, sizes.eval_size, shape.input_shape, shape.num_classes)
