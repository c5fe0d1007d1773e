"""The user's own dataset: a DVC-tracked CSV, Parquet or NPZ file → :class:`PreparedData`.

Three steps, each a pure function of the file and the spec, each failing with an error that names
the file and the problem before any training starts:

1. :func:`verify_against_dvc` checks the file against the digest ``dvc add`` recorded in
   ``<file>.dvc``, so an audit always runs on the data version that git + DVC describe.
2. :func:`load_custom` reads the file into a feature table and a label vector, detecting numeric and
   categorical columns, and rejects empty files, a missing label column, missing labels, a single
   class and non-numeric junk in a numeric column.
3. :func:`prepare_custom` draws D, the pool U \\ D and the evaluation set exactly as the built-in
   datasets do (:func:`dpaudit.data.prepare.draw_split`), then encodes features with scikit-learn's
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
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import sklearn
import yaml
from sklearn.compose import ColumnTransformer
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder

from dpaudit.config import require
from dpaudit.data.download import IntegrityError
from dpaudit.data.prepare import draw_split
from dpaudit.data.prepared import PreparedData
from dpaudit.data.registry import DATASET_NAMES
from dpaudit.sensitivity.measures import MEASURE_KINDS, MEASURES

#: File suffixes :func:`load_custom` reads, by format.
FORMATS: dict[str, str] = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npz": "npz"}

log = logging.getLogger(__name__)

#: Dissimilarity measures that apply to tabular data (the sensitivity search's choices).
TABULAR_MEASURES: tuple[str, ...] = tuple(m for m in MEASURES if "tabular" in MEASURE_KINDS[m])

#: An object column whose values parse as numbers at least this often is taken to be a numeric
#: column with junk in it (an error), not a categorical column.
NUMERIC_LOOKING = 0.9

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")

#: Values of an auto-detected categorical column that look like dates or like lists: one-hot
#: encoding them makes one feature per distinct date or list (a date column of 219 days became 219
#: columns), which is almost never what the user meant, so such a column must be declared.
_DATE_LIKE = re.compile(
    r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}([ T]\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?)?$"
    r"|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}$"
)
_LIST_LIKE = re.compile(r"^\s*(\[.*\]|\(.*,.*\)|\{.*\})\s*$")

#: A categorical column with more distinct values than this is reported in the log (one-hot gives
#: one feature per value).
MANY_CATEGORIES = 50


class CustomDataError(ValueError):
    """A custom dataset file cannot be used; the message names the file and the problem."""


class DvcDigestError(IntegrityError):
    """The file differs from the digest recorded in its ``.dvc`` file (or is not tracked at all)."""

    def __init__(self, file: str, expected: str | int, actual: str | int, fact: str = "md5") -> None:
        super().__init__(file, fact, expected, actual, f"{file}.dvc")
        self.args = (
            f"{file}: does not match its DVC record {file}.dvc: {fact} expected {expected}, actual "
            f"{actual}. If the change is intended, run `dvc add {file}` and commit {file}.dvc",
        )


@dataclass(frozen=True)
class CustomDatasetSpec:
    """One user dataset (a ``params.yaml`` entry; errors name the key within it).

    - ``path``: a CSV, Parquet or NPZ file tracked with ``dvc add`` (or ``dvc import-url``).
    - ``label``: the label column; for NPZ the key of the labels array (e.g. ``labels``).
    - ``features``: NPZ only, the key of the ``[n, d]`` feature array (named ``x0 … x{d-1}``).
    - ``categorical`` / ``numeric``: columns declared as such; other columns are auto-detected
      (numeric dtype → numeric; object, string, bool → categorical), except that a mostly-numeric
      object column with junk values is an error rather than a silently categorical column.
    - ``train_size`` / ``eval_size``: sizes of D and of the held-out evaluation set, as for the
      built-in datasets; the rest of the file is the pool U \\ D.
    - ``measure``: the tabular dissimilarity measure of the sensitivity search.
    - ``seed``: the split seed; ``None`` means the caller's (``data.seed``).
    - ``name``: the dataset's name in stage names and ``data/prepared/<name>.npz``.
    """

    path: str
    label: str
    train_size: int
    eval_size: int
    name: str = "custom"
    features: str = "features"
    categorical: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    measure: str = "manhattan"
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "categorical", tuple(self.categorical))
        object.__setattr__(self, "numeric", tuple(self.numeric))
        require(bool(_NAME.match(self.name)), "name", self.name,
                "must be letters, digits, '_' or '-' (it names stages and files)")
        require(self.name not in DATASET_NAMES, "name", self.name,
                f"is a built-in dataset; choose a name other than {list(DATASET_NAMES)}")
        suffix = Path(self.path).suffix.lower()
        require(suffix in FORMATS, "path", self.path, f"must end in one of {sorted(FORMATS)}")
        require(bool(self.label), "label", self.label, "must name the label column (or NPZ key)")
        require(self.train_size >= 1, "train_size", self.train_size, "must be >= 1")
        require(self.eval_size >= 0, "eval_size", self.eval_size, "must be >= 0")
        require(self.measure in TABULAR_MEASURES, "measure", self.measure,
                f"must be a tabular measure: one of {list(TABULAR_MEASURES)}")
        require(self.seed is None or self.seed >= 0, "seed", self.seed, "must be >= 0")
        for key in ("categorical", "numeric"):
            columns = getattr(self, key)
            require(len(set(columns)) == len(columns), key, list(columns), "must not repeat a column")
            require(self.label not in columns, key, list(columns),
                    f"must not contain the label column {self.label!r}")
        both = sorted(set(self.categorical) & set(self.numeric))
        require(not both, "numeric", list(self.numeric), f"{both} also declared categorical")
        if suffix == ".npz":
            require(not self.categorical, "categorical", list(self.categorical),
                    "must be empty for NPZ files (their features are one numeric array)")

    @property
    def format(self) -> str:
        return FORMATS[Path(self.path).suffix.lower()]


# ------------------------------------------------------------------------------------------ DVC


def _looks_binary(path: Path) -> bool:
    """DVC 2's text test (``dvc.utils.istextfile``): a NUL byte, or over 30% control bytes, in the
    first 512 bytes makes a file binary."""
    with path.open("rb") as handle:
        block = handle.read(512)
    if not block:
        return False
    if b"\x00" in block:
        return True
    text = bytes(range(32, 127)) + b"\n\r\t\f\b"
    nontext = block.translate(None, text)
    return len(nontext) / len(block) > 0.30


def _md5(path: Path, dos2unix: bool = False) -> str:
    """md5 of the file's bytes; with ``dos2unix`` of its bytes after CRLF → LF (DVC 2's text digest)."""
    if dos2unix:
        return hashlib.md5(path.read_bytes().replace(b"\r\n", b"\n"), usedforsecurity=False).hexdigest()
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify_against_dvc(path: str | Path) -> str:
    """Check ``path`` against the md5 in ``<path>.dvc``; return the digest.

    DVC 3 (``hash: md5`` in the record) stores the md5 of the file's bytes. Records written by DVC 2
    (no ``hash`` key) used md5 after CRLF → LF conversion for text files; both are honoured. The size,
    when recorded, is compared first. Raises :class:`CustomDataError` when the file or its ``.dvc``
    record is missing or unreadable, and :class:`DvcDigestError` (expected and actual digest, and the
    ``dvc add`` hint) when the content differs.
    """
    path = Path(path)
    record_path = path.with_name(path.name + ".dvc")
    if not path.is_file():
        raise CustomDataError(f"{path}: file does not exist (or is not a regular file)")
    if not record_path.is_file():
        raise CustomDataError(
            f"{path}: not tracked by DVC ({record_path} is missing). Run `dvc add {path}` and commit "
            f"{record_path}, so the audit is tied to this version of the data"
        )
    try:
        record = yaml.safe_load(record_path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CustomDataError(f"{record_path}: cannot read the DVC record: {exc}") from exc
    outs = record.get("outs") if isinstance(record, dict) else None
    if not isinstance(outs, list) or len(outs) != 1 or not isinstance(outs[0], dict):
        raise CustomDataError(f"{record_path}: expected one entry under 'outs' (as `dvc add` writes)")
    out = outs[0]
    if out.get("path") != path.name:
        raise CustomDataError(
            f"{record_path}: records {out.get('path')!r}, not {path.name!r}; run `dvc add {path}`"
        )
    expected = out.get("md5")
    if not isinstance(expected, str) or expected.endswith(".dir"):
        raise CustomDataError(f"{record_path}: no file md5 recorded (a directory?); track the file itself")
    size = path.stat().st_size
    if "size" in out and out["size"] != size:
        raise DvcDigestError(str(path), out["size"], size, fact="size")
    actual = _md5(path)
    if actual == expected:
        return actual
    if out.get("hash") != "md5" and not _looks_binary(path):
        legacy = _md5(path, dos2unix=True)
        if legacy == expected:
            return legacy
    raise DvcDigestError(str(path), expected, actual)


def committed_record_md5(path: str | Path) -> str | None:
    """The md5 that git's ``HEAD`` commit records for ``path`` in ``<path>.dvc``, or None when the
    record is not committed (or git is not available).

    ``dvc add`` of a changed file, and ``dvc repro``, which re-records a changed tracked file before
    running the stages that depend on it, both rewrite ``<path>.dvc`` in the working tree; the digest
    check then passes. Comparing with the committed record tells an audit of the committed data from
    an audit of an uncommitted new version, which the download stage logs and records.
    """
    path = Path(path)
    try:
        shown = subprocess.run(
            ["git", "show", f"HEAD:./{path.name}.dvc"],
            cwd=path.parent if str(path.parent) else ".",
            capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if shown.returncode != 0:
        return None
    try:
        record = yaml.safe_load(shown.stdout)
        md5 = record["outs"][0]["md5"]
    except (yaml.YAMLError, KeyError, IndexError, TypeError):
        return None
    return md5 if isinstance(md5, str) else None


# ----------------------------------------------------------------------------------------- loading


def _row(position: int, fmt: str) -> str:
    """A data row for messages: 1-based, plus the file line for CSV (the header is line 1)."""
    return f"row {position + 1} (line {position + 2})" if fmt == "csv" else f"row {position + 1}"


def _read_table(spec: CustomDatasetSpec) -> pd.DataFrame:
    path = Path(spec.path)
    try:
        if spec.format == "csv":
            return pd.read_csv(path, skipinitialspace=True)
        if spec.format == "parquet":
            return pd.read_parquet(path)
        with np.load(path, allow_pickle=False) as f:
            missing = [k for k in (spec.features, spec.label) if k not in f.files]
            if missing:
                raise CustomDataError(
                    f"{path}: no array {missing[0]!r} in the NPZ file (arrays present: {sorted(f.files)}); "
                    f"set 'features' and 'label' to the keys of the feature and label arrays"
                )
            X, y = f[spec.features], f[spec.label]
            for key, array in ((spec.features, X), (spec.label, y)):
                if np.iscomplexobj(array):
                    raise CustomDataError(
                        f"{path}: array {key!r} holds complex numbers ({array.dtype}); dpaudit would have to "
                        f"drop their imaginary parts. Store real features (e.g. real and imaginary parts "
                        f"as two columns)"
                    )
    except pd.errors.EmptyDataError as exc:
        raise CustomDataError(f"{path}: the file is empty (no header, no rows)") from exc
    except CustomDataError:
        raise
    except Exception as exc:  # malformed files, object arrays refused by allow_pickle=False, …
        raise CustomDataError(f"{path}: cannot read as {spec.format}: {exc}") from exc
    if X.ndim != 2:
        raise CustomDataError(
            f"{path}: array {spec.features!r} has shape {X.shape}; custom datasets need [n, d] features "
            f"(flatten images to rows)"
        )
    if y.ndim != 1 or len(y) != len(X):
        raise CustomDataError(
            f"{path}: array {spec.label!r} has shape {y.shape}; expected [{len(X)}] (one label per row)"
        )
    table = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    table[spec.label] = y
    return table


def _is_complex(values: pd.Series) -> bool:
    """Whether a column holds complex numbers (a complex dtype, or complex objects)."""
    if pd.api.types.is_complex_dtype(values):
        return True
    if values.dtype != object:
        return False
    return bool(values.map(lambda v: isinstance(v, complex | np.complexfloating)).any())


def _check_numeric(path: Path, column: str, values: pd.Series, fmt: str, declared: bool) -> pd.Series:
    """Convert to float64 or raise naming the column, the first bad row and its value.

    Refused besides non-numbers: complex numbers (converting would drop the imaginary part), infinite
    values, and a column whose range max − min overflows float64 (min-max scaling would map every value
    to the same number).
    """
    if _is_complex(values):
        raise CustomDataError(
            f"{path}: column {column!r} holds complex numbers; dpaudit would have to drop their imaginary "
            f"parts. Store real features (e.g. real and imaginary parts as two columns)"
        )
    text = values.where(values.isna(), values.astype(str).str.strip()) if values.dtype == object else values
    parsed = pd.to_numeric(text, errors="coerce")
    bad = parsed.isna() & values.notna()
    if bad.any():
        position = int(np.flatnonzero(bad.to_numpy())[0])
        why = "declared numeric" if declared else (
            f"looks numeric: {int((~bad & values.notna()).sum())} of {int(values.notna().sum())} values "
            f"are numbers"
        )
        raise CustomDataError(
            f"{path}: column {column!r} ({why}) has a non-numeric value {values.iloc[position]!r} at "
            f"{_row(position, fmt)} ({int(bad.sum())} such values); fix the file, or list the column "
            f"under 'categorical' if its values are categories"
        )
    numbers = parsed.astype(np.float64)
    infinite = ~np.isfinite(numbers.to_numpy()) & numbers.notna().to_numpy()
    if infinite.any():
        position = int(np.flatnonzero(infinite)[0])
        raise CustomDataError(
            f"{path}: column {column!r} has an infinite value {values.iloc[position]!r} at "
            f"{_row(position, fmt)} ({int(infinite.sum())} such values); the features are min-max scaled, "
            f"which needs finite numbers: replace or drop those rows"
        )
    present = numbers.dropna()
    if len(present) and not math.isfinite(float(present.max()) - float(present.min())):
        raise CustomDataError(
            f"{path}: column {column!r} spans [{present.min():.6g}, {present.max():.6g}]: its range "
            f"max − min overflows float64 (limit {np.finfo(np.float64).max:.6g}), so min-max scaling "
            f"would collapse the whole column to one value; rescale the column in the file"
        )
    return numbers


def _mostly_numeric(values: pd.Series) -> bool:
    present = values.dropna()
    if len(present) == 0 or pd.api.types.is_bool_dtype(values):
        return False
    as_text = present.astype(str).str.strip()
    parsed = pd.to_numeric(as_text, errors="coerce")
    return bool(parsed.notna().mean() >= NUMERIC_LOOKING)


def _refuse_implicit_category(path: Path, column: str, values: pd.Series) -> None:
    """Refuse an auto-detected categorical column of dates or lists (declare it to keep one-hot)."""
    if pd.api.types.is_datetime64_any_dtype(values) or pd.api.types.is_timedelta64_dtype(values):
        kind, example = "dates or times", values.dropna().iloc[0] if values.notna().any() else None
    else:
        present = values.dropna()
        if pd.api.types.is_bool_dtype(values) or len(present) == 0:
            return
        sample = present.astype(str).str.strip().drop_duplicates().head(500)
        if sample.str.match(_DATE_LIKE).mean() >= NUMERIC_LOOKING:
            kind = "dates"
        elif sample.str.match(_LIST_LIKE).mean() >= NUMERIC_LOOKING:
            kind = "lists"
        else:
            return
        example = sample.iloc[0]
    distinct = int(values.nunique())
    raise CustomDataError(
        f"{path}: column {column!r} holds {kind} (e.g. {example!r}, {distinct} distinct values); one-hot "
        f"encoding would make one feature per distinct value. Convert it to numbers in the file (e.g. days "
        f"since a reference date, or one column per list element), drop it, or list it under "
        f"'categorical' to one-hot encode it deliberately"
    )


def column_types(table: pd.DataFrame, spec: CustomDatasetSpec) -> tuple[list[str], list[str]]:
    """``(numeric, categorical)`` feature columns: declared ones, then auto-detected ones, file order."""
    features = [c for c in table.columns if c != spec.label]
    numeric, categorical = [], []
    for column in features:
        if column in spec.numeric:
            numeric.append(column)
        elif column in spec.categorical or pd.api.types.is_bool_dtype(table[column]):
            categorical.append(column)
        elif pd.api.types.is_timedelta64_dtype(table[column]):
            _refuse_implicit_category(Path(spec.path), column, table[column])
        elif pd.api.types.is_numeric_dtype(table[column]) or _is_complex(table[column]) or _mostly_numeric(
            table[column]
        ):
            numeric.append(column)
        else:
            _refuse_implicit_category(Path(spec.path), column, table[column])
            categorical.append(column)
    return numeric, categorical


def load_custom(spec: CustomDatasetSpec) -> tuple[pd.DataFrame, np.ndarray]:
    """Read the file: features (numeric columns as float64, categorical ones as strings) and raw labels.

    Every problem is a :class:`CustomDataError` naming the file: missing or empty file (0 bytes or a
    header without rows), a missing label column (the columns present are listed), a declared column
    that is absent, missing labels, a single class, a missing feature value, non-numeric junk in a
    numeric column (column, row and value), a continuous (non-integer) label.
    """
    path = Path(spec.path)
    if not path.is_file():
        raise CustomDataError(f"{path}: file does not exist (or is not a regular file)")
    if path.stat().st_size == 0:
        raise CustomDataError(f"{path}: the file is empty (0 bytes)")
    table = _read_table(spec)
    fmt = spec.format
    if spec.label not in table.columns:
        raise CustomDataError(
            f"{path}: no label column {spec.label!r}; columns present: {[str(c) for c in table.columns]}"
        )
    if len(table) == 0:
        raise CustomDataError(f"{path}: the file has a header but no rows")
    table.columns = [str(c) for c in table.columns]
    for key in ("categorical", "numeric"):
        absent = [c for c in getattr(spec, key) if c not in table.columns]
        if absent:
            raise CustomDataError(
                f"{path}: column {absent[0]!r} (declared in '{key}') is not in the file; "
                f"columns present: {list(table.columns)}"
            )
    labels = table[spec.label]
    if labels.isna().any():
        positions = np.flatnonzero(labels.isna().to_numpy())
        raise CustomDataError(
            f"{path}: label column {spec.label!r} is missing at {_row(int(positions[0]), fmt)} "
            f"({len(positions)} rows without a label); drop or label those rows"
        )
    if pd.api.types.is_float_dtype(labels) and not np.all(np.mod(labels.to_numpy(), 1) == 0):
        position = int(np.flatnonzero(np.mod(labels.to_numpy(), 1) != 0)[0])
        raise CustomDataError(
            f"{path}: label column {spec.label!r} holds a non-integer number {labels.iloc[position]!r} at "
            f"{_row(position, fmt)}: dpaudit audits classifiers; bin a continuous target into classes"
        )
    if _is_complex(labels):
        raise CustomDataError(
            f"{path}: label column {spec.label!r} holds complex numbers; labels must be classes"
        )
    classes = pd.unique(labels)
    if len(classes) > len(labels) / 2:
        raise CustomDataError(
            f"{path}: label column {spec.label!r} has {len(classes)} classes in {len(labels)} rows (limit: "
            f"at most {len(labels) // 2}, two rows per class on average); a column with (almost) one class "
            f"per row is an identifier or a continuous value, not a class label"
        )
    if len(classes) < 2:
        raise CustomDataError(
            f"{path}: label column {spec.label!r} has a single class ({classes[0]!r}); "
            f"a classifier needs at least two"
        )
    numeric, categorical = column_types(table, spec)
    if not numeric and not categorical:
        raise CustomDataError(f"{path}: no feature columns besides the label {spec.label!r}")
    features = pd.DataFrame(index=table.index)
    for column in table.columns:
        if column == spec.label:
            continue
        values = table[column]
        if column in numeric:
            values = _check_numeric(path, column, values, fmt, declared=column in spec.numeric)
        missing = values.isna()
        if missing.any():
            position = int(np.flatnonzero(missing.to_numpy())[0])
            raise CustomDataError(
                f"{path}: column {column!r} has a missing value at {_row(position, fmt)} "
                f"({int(missing.sum())} missing); fill or drop those rows"
            )
        features[column] = values if column in numeric else values.astype(str)
        if column not in numeric and values.nunique() > MANY_CATEGORIES:
            log.warning(
                "%s: categorical column %r has %d distinct values: one-hot encoding makes one feature per "
                "value; declare it under 'numeric' or preprocess it if that is not intended",
                path, column, int(values.nunique()),
            )
    return features, labels.to_numpy()


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

    The split is :func:`dpaudit.data.prepare.draw_split` over the file's rows with ``spec.seed`` (or
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
        "md5": _md5(Path(spec.path)),
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
