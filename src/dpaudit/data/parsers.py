"""Parsers: official dataset files → float32 features, int64 labels, feature names.

Pure functions of the files they are given (no downloads, no params). Each checks the format it
expects (field counts, IDX magic numbers, array shapes, label ranges) and raises a ``ValueError``
naming the file and what was wrong, so a damaged or unexpected file never turns into silent garbage.
"""

from __future__ import annotations

import gzip
import io
import logging
import pickle
import struct
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from dpaudit.data.prepared import Kind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParsedData:
    """A whole population before the D / pool / eval split (PreparedData without the indices)."""

    kind: Kind
    X: np.ndarray
    y: np.ndarray
    num_classes: int
    feature_names: tuple[str, ...]


# --------------------------------------------------------------------------------------------- adult

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
)
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
ADULT_CATEGORICAL = tuple(c for c in ADULT_COLUMNS[:-1] if c not in ADULT_NUMERIC)
ADULT_LABELS = {"<=50K": 0, ">50K": 1}


def read_adult_table(path: str | Path) -> pd.DataFrame:
    """Read one UCI Adult file (``adult.data`` or ``adult.test``, plain or gzip) and drop incomplete rows.

    Handles the test file's quirks: its first line ``|1x3 Cross validator`` (any line starting with
    ``|`` is skipped) and the trailing dot on its labels (``>50K.``). Rows with a ``?`` in any field
    are dropped. Numeric columns become int64, ``income`` becomes the binary label (``>50K`` → 1).
    """
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="latin-1") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read adult file: {exc}") from exc
    rows: list[list[str]] = []
    n_missing = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(ADULT_COLUMNS):
            raise ValueError(f"{path}:{lineno}: expected {len(ADULT_COLUMNS)} fields, found {len(fields)}")
        if "?" in fields:
            n_missing += 1
            continue
        fields[-1] = fields[-1].rstrip(".")
        if fields[-1] not in ADULT_LABELS:
            raise ValueError(f"{path}:{lineno}: unknown income label {fields[-1]!r}")
        rows.append(fields)
    if not rows:
        raise ValueError(f"{path}: no complete rows")
    table = pd.DataFrame(rows, columns=list(ADULT_COLUMNS))
    for column in ADULT_NUMERIC:
        values = pd.to_numeric(table[column], errors="coerce")
        if values.isna().any():
            bad = table[column][values.isna()].iloc[0]
            raise ValueError(f"{path}: column {column!r} has a non-numeric value {bad!r}")
        table[column] = values.astype(np.int64)
    table["income"] = table["income"].map(ADULT_LABELS).astype(np.int64)
    log.debug("%s: %d complete rows, %d rows with missing values dropped", path, len(table), n_missing)
    return table


def encode_adult(table: pd.DataFrame) -> ParsedData:
    """One-hot categoricals, min-max scaled numerics, binary label.

    Numerics are min-max scaled to [0, 1] over the given rows (the whole population), so every
    feature — numeric or one-hot — lies in [0, 1]. Categories are the values present in the rows,
    sorted, giving feature names such as ``workclass=Private``; a category that occurs only in rows
    with missing values (e.g. ``workclass=Never-worked``) therefore gets no column.
    """
    columns: list[np.ndarray] = []
    names: list[str] = []
    for column in ADULT_NUMERIC:
        values = table[column].to_numpy(dtype=np.float64)
        low, high = values.min(), values.max()
        span = high - low
        columns.append((values - low) / span if span > 0 else np.zeros_like(values))
        names.append(column)
    for column in ADULT_CATEGORICAL:
        values = table[column].to_numpy(dtype=object)
        for category in sorted(set(values)):
            columns.append((values == category).astype(np.float64))
            names.append(f"{column}={category}")
    X = np.stack(columns, axis=1).astype(np.float32)
    y = table["income"].to_numpy(dtype=np.int64)
    return ParsedData(kind="tabular", X=X, y=y, num_classes=2, feature_names=tuple(names))


def parse_adult(data_path: str | Path, test_path: str | Path) -> ParsedData:
    """The Adult population: complete rows of ``adult.data`` followed by those of ``adult.test``."""
    table = pd.concat([read_adult_table(data_path), read_adult_table(test_path)], ignore_index=True)
    return encode_adult(table)


# --------------------------------------------------------------------------------------------- mnist

IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension
MNIST_SPLIT_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """Read a (gzip) IDX file of unsigned bytes, checking its magic number and its size against its header.

    Hand-written: the format is four header bytes (0, 0, type 0x08, number of dimensions), one
    big-endian uint32 per dimension, then the data; no installed library reads it without TensorFlow
    Datasets or torchvision.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4:
        raise ValueError(f"{path}: too short to be an IDX file ({len(data)} bytes)")
    found = int.from_bytes(data[:4], "big")
    if found != magic:
        raise ValueError(f"{path}: IDX magic number 0x{found:08x}, expected 0x{magic:08x}")
    ndim = data[3]
    header = 4 + 4 * ndim
    dims = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(dims))
    if len(data) - header != expected:
        found_bytes = len(data) - header
        raise ValueError(f"{path}: header says shape {dims} ({expected} bytes) but holds {found_bytes} bytes")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)


def read_mnist_split(raw_dir: str | Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Images ``uint8 [n, 28, 28]`` and labels ``uint8 [n]`` of the official ``train`` or ``test`` split."""
    raw_dir = Path(raw_dir)
    images_name, labels_name = MNIST_SPLIT_FILES[split]
    for name in (images_name, labels_name):
        if not (raw_dir / name).exists():
            raise FileNotFoundError(f"{raw_dir / name} does not exist (mnist split {split!r} needs it)")
    images = read_idx(raw_dir / images_name, IDX_IMAGES_MAGIC)
    labels = read_idx(raw_dir / labels_name, IDX_LABELS_MAGIC)
    if images.shape[1:] != (28, 28):
        raise ValueError(f"{raw_dir / images_name}: images are {images.shape[1:]}, expected 28 x 28")
    if len(images) != len(labels):
        raise ValueError(f"{raw_dir}: {len(images)} {split} images but {len(labels)} labels")
    if labels.max(initial=0) > 9:
        raise ValueError(f"{raw_dir / labels_name}: label {labels.max()} outside 0..9")
    return images, labels


def image_feature_names(shape: tuple[int, int, int]) -> tuple[str, ...]:
    """Names ``r{row}c{col}ch{channel}`` for the pixels of an ``[h, w, c]`` image, in ``X``'s memory order."""
    h, w, c = shape
    return tuple(f"r{i}c{j}ch{k}" for i in range(h) for j in range(w) for k in range(c))


def parse_mnist(raw_dir: str | Path, pool: str = "test") -> ParsedData:
    """MNIST population from the official split(s) chosen by ``pool``: ``train``, ``test`` or ``all``.

    Only the files of the selected splits are read, so ``pool="test"`` works without the large
    training images. Pixels are scaled to [0, 1]: ``X`` is ``float32 [n, 28, 28, 1]``.
    """
    splits = {"train": ("train",), "test": ("test",), "all": ("train", "test")}.get(pool)
    if splits is None:
        raise ValueError(f"mnist pool {pool!r} is not one of ['train', 'test', 'all']")
    parts = [read_mnist_split(raw_dir, split) for split in splits]
    images = np.concatenate([p[0] for p in parts])
    labels = np.concatenate([p[1] for p in parts])
    X = (images.astype(np.float32) / 255.0)[..., None]
    return ParsedData(
        kind="image",
        X=X,
        y=labels.astype(np.int64),
        num_classes=10,
        feature_names=image_feature_names((28, 28, 1)),
    )


# ---------------------------------------------------------------------------------------- purchase100

PURCHASE_MEMBER = "dataset_purchase"
PURCHASE_FEATURES = 600


def parse_purchase100(path: str | Path) -> ParsedData:
    """Purchase-100 (Shokri et al. 2017): rows ``label,f1..f600`` in the tarball's ``dataset_purchase``.

    Labels 1..100 become 0..99; the 600 features must be binary.
    """
    path = Path(path)
    try:
        with tarfile.open(path, "r:gz") as archive:
            members = [m for m in archive.getmembers() if m.isfile() and Path(m.name).name == PURCHASE_MEMBER]
            if not members:
                raise ValueError(f"{path}: no file named {PURCHASE_MEMBER!r} in the archive")
            handle = archive.extractfile(members[0])
            assert handle is not None  # a regular file member always has content
            try:
                table = pd.read_csv(handle, header=None, dtype=np.int16)
            except (ValueError, pd.errors.ParserError) as exc:
                raise ValueError(f"{path}: {PURCHASE_MEMBER} is not comma-separated integers: {exc}") from exc
    except (tarfile.TarError, OSError) as exc:
        raise ValueError(f"{path}: cannot read the Purchase-100 tarball: {exc}") from exc
    values = table.to_numpy()
    if values.shape[1] != PURCHASE_FEATURES + 1:
        raise ValueError(f"{path}: rows have {values.shape[1]} fields, expected {PURCHASE_FEATURES + 1}")
    labels = values[:, 0].astype(np.int64)
    if labels.min() < 1 or labels.max() > 100:
        raise ValueError(f"{path}: labels span {labels.min()}..{labels.max()}, expected 1..100")
    features = values[:, 1:]
    if features.min() < 0 or features.max() > 1:
        raise ValueError(f"{path}: features are not all 0 or 1")
    return ParsedData(
        kind="tabular",
        X=features.astype(np.float32),
        y=labels - 1,
        num_classes=100,
        feature_names=tuple(f"f{i}" for i in range(PURCHASE_FEATURES)),
    )


# -------------------------------------------------------------------------------------------- cifar10

CIFAR_DIR = "cifar-10-batches-py"
CIFAR_BATCHES = (*(f"data_batch_{i}" for i in range(1, 6)), "test_batch")


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickler that builds only dicts, lists, bytes and numpy arrays: a batch cannot run code."""

    ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset({
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("_codecs", "encode"),  # how Python 3 writes bytes in protocol-2 pickles
    })

    def find_class(self, module: str, name: str) -> type:
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a CIFAR-10 batch")
        return super().find_class(module, name)


def read_cifar_batch(raw: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """One pickled CIFAR-10 batch → ``uint8 [n, 32, 32, 3]`` images and labels."""
    try:
        batch = _NumpyOnlyUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise ValueError(f"{where}: not a CIFAR-10 batch: {exc}") from exc
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise ValueError(f"{where}: a CIFAR-10 batch must be a dict with b'data' and b'labels'")
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
        raise ValueError(f"{where}: data {data.shape} with {len(labels)} labels; want [n, 3072] and n labels")
    if labels.min(initial=0) < 0 or labels.max(initial=0) > 9:
        raise ValueError(f"{where}: labels outside 0..9")
    # Each row is the red, green, then blue 32 x 32 plane in row-major order.
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def parse_cifar10(path: str | Path) -> ParsedData:
    """CIFAR-10 population: ``data_batch_1..5`` then ``test_batch`` of the official python tarball.

    ``X`` is ``float32 [n, 32, 32, 3]`` in [0, 1]. Batches are unpickled with an allow-list (numpy
    arrays only), after the download stage verified the tarball's md5 and size.
    """
    path = Path(path)
    images: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    try:
        with tarfile.open(path, "r:gz") as archive:
            for batch in CIFAR_BATCHES:
                member = f"{CIFAR_DIR}/{batch}"
                try:
                    handle = archive.extractfile(member)
                except KeyError:
                    handle = None
                if handle is None:
                    raise ValueError(f"{path}: the archive has no file {member!r}")
                x, y = read_cifar_batch(handle.read(), f"{path}:{member}")
                images.append(x)
                labels.append(y)
    except (tarfile.TarError, OSError) as exc:
        raise ValueError(f"{path}: cannot read the CIFAR-10 tarball: {exc}") from exc
    X = np.concatenate(images).astype(np.float32) / 255.0
    return ParsedData(
        kind="image",
        X=X,
        y=np.concatenate(labels),
        num_classes=10,
        feature_names=image_feature_names((32, 32, 3)),
    )


# --------------------------------------------------------------------------------------------- digits


def parse_digits() -> ParsedData:
    """scikit-learn's bundled 8 x 8 digits (1,797 images, values 0..16) as ``float32 [n, 8, 8, 1]`` / 16."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    X = (np.asarray(bunch.images, dtype=np.float32) / 16.0)[..., None]
    return ParsedData(
        kind="image",
        X=X,
        y=np.asarray(bunch.target, dtype=np.int64),
        num_classes=10,
        feature_names=image_feature_names((8, 8, 1)),
    )


@dataclass(frozen=True)
class PopulationShape:
    """What a built-in dataset's parser returns, known before any file is read: the number of rows
    of the population, the shape of one input and the number of classes. The ``check`` stage uses
    these to refuse sizes that do not fit before the download and prepare stages have run."""

    rows: int
    input_shape: tuple[int, ...]
    num_classes: int


#: The parsers' output per built-in dataset (mnist per ``data.prepare.mnist.pool``). adult keeps the
#: 45,222 rows without missing values of the official 48,842 (train + test files) and one-hot encodes
#: them to 104 features; digits is scikit-learn's 1,797 8×8 images; MNIST has 60,000 training and
#: 10,000 test images; Purchase-100 197,324 rows of 600 binary features; CIFAR-10 the 50,000 + 10,000
#: images of its six batches. ``tests/test_input_reliability.py`` checks adult and digits against the
#: parsers themselves (the other three need the network).
POPULATIONS: dict[str, PopulationShape] = {
    "adult": PopulationShape(45_222, (104,), 2),
    "digits": PopulationShape(1_797, (8, 8, 1), 10),
    "mnist:train": PopulationShape(60_000, (28, 28, 1), 10),
    "mnist:test": PopulationShape(10_000, (28, 28, 1), 10),
    "mnist:all": PopulationShape(70_000, (28, 28, 1), 10),
    "purchase100": PopulationShape(197_324, (PURCHASE_FEATURES,), 100),
    "cifar10": PopulationShape(60_000, (32, 32, 3), 10),
}
