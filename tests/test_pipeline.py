"""End to end: `dvc repro` of the data stages in a temporary copy of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpaudit.data.prepared import PreparedData

REPO = Path(__file__).resolve().parents[1]
COPIED = [
    "dvc.yaml",
    "params.yaml",
    "pyproject.toml",
    ".dvc/config",
    ".dvcignore",
    "stages",
    "src",
    "data/vendor",
    "models",
    "examples",
]


def copy_repository(destination: Path) -> Path:
    """A git + DVC working copy of the project's sources (no outputs, no environment)."""
    for name in COPIED:
        source = REPO / name
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, target)
    env = pipeline_env()
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "copy"]):
        subprocess.run(command, cwd=destination, check=True, env=env)
    return destination


def pipeline_env() -> dict[str, str]:
    """The environment a user has after activating the project's virtualenv."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env.update(
        DPAUDIT_PROGRESS="0",
        TF_CPP_MIN_LOG_LEVEL="2",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    return env


def dvc(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "dvc"), *args],
        cwd=workdir,
        env=pipeline_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_dvc_repro_prepares_default_datasets(tmp_path):
    work = copy_repository(tmp_path / "repo")
    result = dvc(work, "repro", "prepare@adult", "prepare@digits")
    assert result.returncode == 0, result.stdout + result.stderr

    adult = PreparedData.load(work / "data/prepared/adult.npz")
    assert adult.kind == "tabular" and adult.num_classes == 2
    assert len(adult.train_idx) == 1000 and len(adult.eval_idx) == 5000
    # 30,162 + 15,060 complete rows of adult.data and adult.test form the population.
    assert len(adult.X) == 45222
    assert len(adult.pool_idx) == 45222 - 1000 - 5000
    assert adult.X.dtype == np.float32 and np.isfinite(adult.X).all()

    digits = PreparedData.load(work / "data/prepared/digits.npz")
    assert digits.kind == "image" and digits.X.shape == (1797, 8, 8, 1) and digits.num_classes == 10
    assert len(digits.train_idx) == 100 and digits.X.min() >= 0.0 and digits.X.max() <= 1.0

    again = dvc(work, "status", "prepare@adult", "prepare@digits")
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout


@pytest.mark.slow
def test_failed_download_leaves_no_output(tmp_path):
    """A corrupted mirror file stops download@mnist with the file named and nothing written."""
    mirror = tmp_path / "mirror" / "mnist"
    mirror.mkdir(parents=True)
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        (mirror / name).write_bytes(b"not the official file")
    work = copy_repository(tmp_path / "repo")
    params = (work / "params.yaml").read_text()
    params = params.replace("datasets: [adult, digits]", "datasets: [adult, digits, mnist]")
    (work / "params.yaml").write_text(params)
    env_mirror = {"DPAUDIT_DATA_MIRROR": str(tmp_path / "mirror")}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "dvc"), "repro", "download@mnist"],
        cwd=work,
        env={**pipeline_env(), **env_mirror},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "t10k-images-idx3-ubyte.gz" in result.stdout + result.stderr
    assert not (work / "data/raw/mnist").exists()


# ----------------------------------------------------------------------------------------------
# The check stage (issue 11, item 2): every parameter of the whole file before any work.

REPO_PARAMS = REPO / "params.yaml"


def _params_with(path: str, value: object) -> dict:
    """The repository's params with the dotted key ``path`` set to ``value`` (``None`` deletes it)."""
    import copy

    import yaml

    params = copy.deepcopy(yaml.safe_load(REPO_PARAMS.read_text()))
    *parents, last = path.split(".") if not path.startswith("audits.") else ["audits", path[len("audits.") :]]
    node = params
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return params


INF = float("inf")


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "identifiability.datasets.adult.learning_rate",
            INF,
            "'identifiability.datasets.adult.learning_rate' = inf",
        ),
        (
            "identifiability.datasets.adult.learning_rate",
            -1,
            "'identifiability.datasets.adult.learning_rate' = -1",
        ),
        ("identifiability.datasets.digits.trials", 0, "'identifiability.datasets.digits.trials' = 0"),
        ("identifiability.datasets.digits.trials", -5, "'identifiability.datasets.digits.trials' = -5"),
        ("identifiability.train.trials", 12, r"'identifiability.train.trials' = 12 .* per world"),
        ("identifiability.train.learning_rate", float("nan"), "'identifiability.train.learning_rate' = nan"),
        ("identifiability.datasets.digits.hidden", [], r"'identifiability.datasets.digits.hidden' = \[\] is"),
        ("identifiability.bounds.confidnce", 0.9, "unknown key 'identifiability.bounds.confidnce'"),
        ("data.prepare.adult.eval_size", 0, "'data.prepare.adult.eval_size' = 0 is invalid: must be >= 1"),
        ("membership.train.dpsgd.epochs", INF, "'membership.train.dpsgd.epochs' = inf must be a finite"),
        (
            "membership.train.dpsgd.sampling_rate",
            1e-9,
            r"'membership.train.dpsgd.sampling_rate' = .*1e\+10 steps",
        ),
        ("membership.train.baselines.sampling_rate", 1e-7, r"'membership.train.baselines.sampling_rate'"),
        ("membership.attack.fprr", 0.01, "unknown key 'membership.attack.fprr'"),
        ("membership.datasets.adult", None, "missing key 'membership.datasets.adult'"),
        ("sensitivity.measures.digits", "jaccard", "'sensitivity.measures.digits' = 'jaccard'"),
        ("data.datasets", ["adult", "digits", "imagenet"], r"'data.datasets\[2\]' = 'imagenet'"),
        (
            "audits.adult-foo",
            {"dataset": "adult", "experiment": "foo"},
            "'audits.adult-foo.experiment' = 'foo'",
        ),
        (
            "audits.mnist-membership",
            {"dataset": "mnist", "experiment": "membership"},
            r"'audits.mnist-membership.dataset' = 'mnist'.*data.datasets",
        ),
        (
            "audits.my-audit",
            {"dataset": "digits", "experiment": "membership"},
            r"'audits.my-audit' = 'my-audit'.*digits-membership",
        ),
        ("report.title", " ", "'report.title'"),
    ],
)
def test_check_names_every_bad_key_and_value(path: str, value: object, message: str) -> None:
    from dpaudit.config import ParamsError
    from dpaudit.pipeline import check_params

    with pytest.raises(ParamsError, match=message) as info:
        check_params(_params_with(path, value))
    assert str(info.value).count("identifiability.datasets") <= 1  # no doubled key paths


def test_check_stage_fails_first_and_caches_nothing(tmp_path: Path) -> None:
    """A typo in a late section stops `dvc repro` at the check stage: no download, no training."""
    import time

    import yaml

    work = copy_repository(tmp_path / "repo")
    params = _params_with("membership.attack.fpr", 1.5)
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    started = time.perf_counter()
    result = dvc(work, "repro")
    assert result.returncode != 0
    assert "'membership.attack.fpr' = 1.5 is invalid" in result.stdout + result.stderr
    assert time.perf_counter() - started < 120
    for out in ("data/check", "data/raw", "data/prepared", "data/train", "metrics", "dvc.lock"):
        assert not (work / out).exists(), out
    assert not list((work / ".dvc" / "cache").rglob("*")) if (work / ".dvc" / "cache").exists() else True


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"dataset": "adult"}, "missing key 'audits.adult-foo.experiment'"),
        ("oops", "'audits.adult-foo' must be a mapping"),
        ({"dataset": "adult", "experiment": "foo"}, "'audits.adult-foo.experiment' = 'foo' is invalid"),
    ],
)
def test_make_run_names_a_malformed_audit_before_dvc_reads_dvc_yaml(
    tmp_path: Path, entry: object, message: str
) -> None:
    """An audit entry without an experiment stops DVC while it reads dvc.yaml (``Could not find
    'item.experiment'``, naming no key of params.yaml), so ``make run`` runs the check first: its
    ``--validate-only`` mode names the key and writes nothing."""
    import yaml

    makefile = (REPO_PARAMS.parent / "Makefile").read_text()
    run_recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    assert "python stages/check.py --validate-only && dvc repro" in run_recipe

    params = _params_with("audits.adult-foo", entry)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**pipeline_env(), "PYTHONPATH": str(REPO_PARAMS.parent / "src")}
    result = subprocess.run(
        [sys.executable, str(REPO_PARAMS.parent / "stages" / "check.py"), "--validate-only"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1
    assert message in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]  # nothing written
