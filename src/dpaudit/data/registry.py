"""The dataset registry: where each dataset's official files live, how to check them, how to parse them.

Every downloadable file carries integrity facts (sha256 where published, else md5 and size, or the
git blob id for Purchase-100, whose only published fact is ``git hash-object``'s output). The
download stage verifies each file against all facts it has before anything downstream reads it.

adult ships in the repository (``data/vendor/adult/``, see its README for the CC BY 4.0 licence),
digits is scikit-learn's bundled copy, so the default pipeline needs no network.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dpaudit.data import parsers
from dpaudit.data.parsers import ParsedData
from dpaudit.data.prepared import Kind

#: Name of the small provenance file the download stage writes next to the verified files.
MANIFEST_NAME = "manifest.json"

#: Repository root (``src/dpaudit/data/registry.py`` → three levels up) for the vendored files.
REPO_ROOT = Path(__file__).resolve().parents[3]

MNIST_POOLS = ("train", "test", "all")


@dataclass(frozen=True)
class FileSpec:
    """One official file: its name on disk, the URLs that serve it and the facts that identify it."""

    name: str
    urls: tuple[str, ...] = ()
    sha256: str | None = None
    md5: str | None = None
    size: int | None = None
    git_blob: str | None = None
    #: Where the official file lives when ``urls`` is empty (vendored copies), for provenance only.
    origin: str = ""

    def __post_init__(self) -> None:
        if not (self.sha256 or self.md5 or self.git_blob):
            raise ValueError(f"{self.name}: a registry file needs a sha256, md5 or git blob id")

    def expected(self) -> dict[str, str | int]:
        """The integrity facts that are known for this file, by name."""
        facts: dict[str, str | int | None] = {
            "size": self.size,
            "sha256": self.sha256,
            "md5": self.md5,
            "git_blob": self.git_blob,
        }
        return {k: v for k, v in facts.items() if v is not None}


@dataclass(frozen=True)
class DatasetSpec:
    """A dataset: its files, where they come from, and how raw files become features and labels."""

    name: str
    kind: Kind
    num_classes: int
    homepage: str
    license: str
    files: tuple[FileSpec, ...]
    #: ``parse(raw_dir, pool)`` → :class:`ParsedData`; ``pool`` is ``None`` for datasets without pools.
    parse: Callable[[Path, str | None], ParsedData]
    #: Folder (relative to the repository root) holding vendored copies of ``files``, if any.
    vendor: str | None = None
    #: Official splits that may form the population (mnist); empty when the whole dataset is used.
    pools: tuple[str, ...] = ()
    default_pool: str | None = None
    #: Which files each pool needs (by file name); missing pools need all files.
    pool_files: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def files_for(self, pool: str | None = None) -> tuple[FileSpec, ...]:
        """The files needed for ``pool`` (all files for datasets without pools)."""
        pool = self.check_pool(pool)
        if pool is None or pool not in self.pool_files:
            return self.files
        wanted = self.pool_files[pool]
        return tuple(f for f in self.files if f.name in wanted)

    def check_pool(self, pool: str | None) -> str | None:
        """Resolve ``pool`` to the dataset's default and reject pools it does not have."""
        if not self.pools:
            if pool is not None:
                raise ValueError(f"dataset {self.name!r} has no pool option (got pool={pool!r})")
            return None
        pool = self.default_pool if pool is None else pool
        if pool not in self.pools:
            raise ValueError(f"dataset {self.name!r}: pool {pool!r} is not one of {list(self.pools)}")
        return pool

    @property
    def vendor_dir(self) -> Path | None:
        """The vendored copy: under the working directory (a stage runs in its repository's root, which
        may be a copy of this one), else under the repository this package was installed from."""
        if self.vendor is None:
            return None
        here = Path.cwd() / self.vendor
        return here if here.is_dir() else REPO_ROOT / self.vendor


def _parse_adult(raw_dir: Path, pool: str | None) -> ParsedData:
    return parsers.parse_adult(raw_dir / "adult.data.gz", raw_dir / "adult.test.gz")


def _parse_digits(raw_dir: Path, pool: str | None) -> ParsedData:
    return parsers.parse_digits()


def _parse_mnist(raw_dir: Path, pool: str | None) -> ParsedData:
    return parsers.parse_mnist(raw_dir, pool or "test")


def _parse_purchase100(raw_dir: Path, pool: str | None) -> ParsedData:
    return parsers.parse_purchase100(raw_dir / "dataset_purchase.tgz")


def _parse_cifar10(raw_dir: Path, pool: str | None) -> ParsedData:
    return parsers.parse_cifar10(raw_dir / "cifar-10-python.tar.gz")


_UCI_ADULT = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
_MNIST_BASES = (
    "http://yann.lecun.com/exdb/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
)


def _mnist_file(name: str, size: int, md5: str, sha256: str) -> FileSpec:
    urls = tuple(base + name for base in _MNIST_BASES)
    return FileSpec(name=name, urls=urls, sha256=sha256, md5=md5, size=size)


DATASETS: dict[str, DatasetSpec] = {
    "adult": DatasetSpec(
        name="adult",
        kind="tabular",
        num_classes=2,
        homepage="https://archive.ics.uci.edu/dataset/2/adult",
        license="CC BY 4.0",
        vendor="data/vendor/adult",
        files=(
            FileSpec(
                name="adult.data.gz",
                sha256="fb986d3609cdf068a1c234ed2695603b74c66c4be723467d9d69542024847442",
                size=439_363,
                origin=_UCI_ADULT + "adult.data (gzip of md5 5d7c39d7b8804f071cdd1f2a7c460872)",
            ),
            FileSpec(
                name="adult.test.gz",
                sha256="74aa81a0e0880467a50de97be6ba8130df14a3ef8c0c3a14de2a9a997d068fbf",
                size=220_798,
                origin=_UCI_ADULT + "adult.test (gzip of md5 35238206dfdf7f1fe215bbb874adecdc)",
            ),
            FileSpec(
                name="adult.names.gz",
                sha256="1e8ee543cb81fc9590b1a20392e41f28eab971ac9dbe519269cdf7d4658b62f2",
                size=2_641,
                origin=_UCI_ADULT + "adult.names (gzip of md5 1a7cdb3ff7a1b709968b1c7a11def63e)",
            ),
        ),
        parse=_parse_adult,
    ),
    "digits": DatasetSpec(
        name="digits",
        kind="image",
        num_classes=10,
        homepage="https://scikit-learn.org/stable/modules/generated/sklearn.datasets.load_digits.html",
        license="CC BY 4.0 (UCI Optical Recognition of Handwritten Digits, bundled with scikit-learn)",
        files=(),
        parse=_parse_digits,
    ),
    "mnist": DatasetSpec(
        name="mnist",
        kind="image",
        num_classes=10,
        homepage="http://yann.lecun.com/exdb/mnist/",
        license="CC BY-SA 3.0 (as stated by the distributors of the official files)",
        files=(
            _mnist_file(
                "train-images-idx3-ubyte.gz",
                9_912_422,
                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            ),
            _mnist_file(
                "train-labels-idx1-ubyte.gz",
                28_881,
                "d53e105ee54ea40749a09fcbcd1e9432",
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            ),
            _mnist_file(
                "t10k-images-idx3-ubyte.gz",
                1_648_877,
                "9fb629c4189551a2d022fa330f9573f3",
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            ),
            _mnist_file(
                "t10k-labels-idx1-ubyte.gz",
                4_542,
                "ec29112dd5afa0611ce80d1b7f02629c",
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
            ),
        ),
        parse=_parse_mnist,
        pools=MNIST_POOLS,
        default_pool="test",
        pool_files=parsers.MNIST_SPLIT_FILES,
    ),
    "purchase100": DatasetSpec(
        name="purchase100",
        kind="tabular",
        num_classes=100,
        homepage="https://github.com/privacytrustlab/datasets",
        license="research use (Shokri et al. 2017, from Kaggle's Acquire Valued Shoppers Challenge)",
        files=(
            FileSpec(
                name="dataset_purchase.tgz",
                urls=(
                    "https://www.comp.nus.edu.sg/~reza/files/dataset_purchase.tgz",
                    "https://github.com/privacytrustlab/datasets/raw/master/dataset_purchase.tgz",
                ),
                git_blob="3efa7476ad5ed7ac3e558d28585a186b38fc5f19",
            ),
        ),
        parse=_parse_purchase100,
    ),
    "cifar10": DatasetSpec(
        name="cifar10",
        kind="image",
        num_classes=10,
        homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
        license="no licence stated; cite Krizhevsky (2009)",
        files=(
            FileSpec(
                name="cifar-10-python.tar.gz",
                urls=("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",),
                md5="c58f30108f718f92721af3b95e74349a",
                size=170_498_071,
            ),
        ),
        parse=_parse_cifar10,
    ),
}

DATASET_NAMES: tuple[str, ...] = tuple(DATASETS)


def get_dataset(name: str) -> DatasetSpec:
    """The registry entry of ``name``; an unknown name is an error listing the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASET_NAMES)}") from None


def raw_files(name: str, pool: str | None = None) -> list[str]:
    """File names the download stage writes into ``data/raw/<name>/`` (data files, then the manifest)."""
    return [f.name for f in get_dataset(name).files_for(pool)] + [MANIFEST_NAME]
