"""The user's own dataset as params.yaml declares it (:class:`CustomDatasetSpec`), the file formats
and column rules it is read with, and the errors that name the file and the problem."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from dpaudit.config import require
from dpaudit.data.download import IntegrityError
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
