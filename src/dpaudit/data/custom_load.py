"""Reading the user's file (CSV, Parquet, NPZ) into a feature table and labels, with the column
checks that refuse junk before any training: empty files, a missing or single-class label, non-numeric
values in a numeric column, and date- or list-like columns that one-hot encoding would explode."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd

from dpaudit.data.custom_spec import (
    _DATE_LIKE,
    _LIST_LIKE,
    MANY_CATEGORIES,
    NUMERIC_LOOKING,
    CustomDataError,
    CustomDatasetSpec,
)
from dpaudit.io import NpzArrays, open_npz

log = logging.getLogger(__name__)


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
        with open_npz(path) as f:
            missing = [k for k in (spec.features, spec.label) if k not in f.files]
            if missing:
                raise CustomDataError(
                    f"{path}: no array {missing[0]!r} in the NPZ file (arrays present: {sorted(f.files)}); "
                    f"set 'features' and 'label' to the keys of the feature and label arrays"
                )
            X, y = _npz_array(f, spec, "features"), _npz_array(f, spec, "label")
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
    except Exception as exc:  # malformed files, a pickle instead of an NPZ archive, …
        detail = str(exc).removeprefix(f"{path}: ")  # dpaudit's own readers name the file already
        raise CustomDataError(
            f"{path}: cannot read as {spec.format} (data.custom.{spec.name}.path): {detail}"
        ) from exc
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


def _npz_array(f: NpzArrays, spec: CustomDatasetSpec, key: str) -> np.ndarray:
    """The array ``spec.<key>`` names; an object array (numpy would have to unpickle it) is refused
    naming the file, the array and the params key."""
    try:
        return f[getattr(spec, key)]
    except ValueError as exc:
        raise CustomDataError(
            f"{exc}; the array is 'data.custom.{spec.name}.{key}' = {getattr(spec, key)!r}. Save it as a "
            f"numeric array (e.g. np.savez(path, features=X.astype(float), labels=y))"
        ) from exc


def _refuse_nested(path: Path, table: pd.DataFrame, fmt: str) -> None:
    """A cell must hold one value: Parquet (and pickled CSV cells never, but object columns may) can
    store lists, arrays or mappings in a cell, which no encoding here turns into features."""
    nested = (list, tuple, dict, set, np.ndarray)
    for column in table.columns:
        values = table[column]
        if values.dtype != object:
            continue
        hit = values.map(lambda v: isinstance(v, nested)).to_numpy()
        if hit.any():
            position = int(np.flatnonzero(hit)[0])
            kind = type(values.iloc[position]).__name__
            raise CustomDataError(
                f"{path}: column {column!r} holds a {kind} at {_row(position, fmt)} ({int(hit.sum())} such "
                f"cells); each cell must be one number or category: expand it into one column per element"
            )


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
    that is absent, a list or array in a cell, missing labels, a single class, a missing feature
    value, non-numeric junk in a numeric column (column, row and value), a continuous (non-integer) label.
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
    _refuse_nested(path, table, fmt)
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
