"""The training_audit experiment: the user's own DP training function audited in the pipeline.

- the check stage refuses a bad entry before any training, naming the key (module, function, signature,
  option, declaration against the data, δ, runs, runner);
- a user function in a module of its own (outside dpaudit and examples/) on a custom dataset runs
  through the stages with no change to dpaudit, writing the verdict's numbers, the per-step plots and
  the report section; two runs pool into one verdict (local runner);
- the summary metrics carry caught, epsilon_lower, epsilon_claimed (and epsilon_detectable when finite).
"""

from __future__ import annotations

import copy
import hashlib
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from sklearn.datasets import load_breast_cancer

from dpaudit import pipeline
from dpaudit.config import ParamsError, load_params
from dpaudit.data.custom import DatasetSize
from dpaudit.experiments.training_audit.config import check_limits, config_from_params

REPO = Path(__file__).resolve().parents[2]
SIZE = DatasetSize(rows=1797, train=100, eval=500, input_shape=(64,), num_classes=10)


def section(**train: Any) -> dict[str, Any]:
    """The repository's training_audit section with ``train`` keys replaced (``declared`` merged)."""
    raw = copy.deepcopy(load_params(REPO / "params.yaml")["training_audit"])
    declared = train.pop("declared", {})
    raw["train"].update(train)
    raw["train"]["declared"].update(declared)
    return raw


def refusal(raw: dict[str, Any], dataset: str = "digits") -> str:
    with pytest.raises(ParamsError) as info:
        check_limits(config_from_params({"training_audit": raw}), dataset, SIZE)
    return str(info.value)


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user's package ``my_training`` in a folder of its own (the working directory of the stages)."""
    pkg = tmp_path / "my_training"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "fit.py").write_text(
        textwrap.dedent(
            """
            from examples.dp_training.digits_keras import train as _train

            def fit(dataset, audit, *, epochs=1, bug="none", optimizer="hand_written"):
                return _train(
                    dataset, audit, epochs=epochs, bug=bug, optimizer=optimizer, batch_size=16, hidden=4
                )

            def two_args(dataset):
                return None
            """
        )
    )
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(tmp_path)
    return "my_training.fit"


def test_the_default_entry_passes() -> None:
    check_limits(config_from_params({"training_audit": section()}), "digits", SIZE)


@pytest.mark.parametrize(
    ("train", "key"),
    [
        ({"function": "no_such_module_xyz:train"}, "training_audit.train.function"),
        ({"function": "examples.dp_training.digits_keras:nope"}, "training_audit.train.function"),
        ({"function": "examples.dp_training.digits_keras"}, "training_audit.train.function"),
        ({"options": {"learning_rat": 0.1}}, "training_audit.train.options.learning_rat"),
        ({"declared": {"batch_size": 2000}}, "training_audit.train.declared.batch_size"),
        ({"declared": {"dataset_size": 999}}, "training_audit.train.declared.dataset_size"),
        ({"declared": {"epochs": 10, "steps": 100}}, "training_audit.train.declared.epochs"),
        ({"declared": {"epochs": None, "steps": None}}, "training_audit.train.declared.epochs"),
        ({"declared": {"steps": 0, "epochs": None}}, "training_audit.train.declared.steps"),
        ({"declared": {"delta": 1.5}}, "training_audit.train.declared.delta"),
        ({"declared": {"delta": 0.0}}, "training_audit.train.declared.delta"),
        ({"runs": 0}, "training_audit.train.runs"),
        ({"runner": "slurm"}, "training_audit.train.runner"),
        ({"canaries": 5}, "training_audit.train.canaries"),
    ],
)
def test_check_refuses_a_bad_entry_naming_the_key(train: dict[str, Any], key: str) -> None:
    assert key in refusal(section(**train))


def test_check_refuses_a_function_that_cannot_take_dataset_and_audit(user_module: str) -> None:
    message = refusal(section(function=f"{user_module}:two_args", options={}))
    assert "training_audit.train.function" in message and "dataset, audit" in message


def test_check_refuses_train_size_beyond_the_data() -> None:
    raw = section()
    raw["datasets"]["digits"] = {"train_size": 5000}
    assert "training_audit.datasets.digits.train_size" in refusal(raw)


def test_the_pipeline_check_refuses_before_any_training(tmp_path: Path) -> None:
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    params["training_audit"]["train"]["declared"]["batch_size"] = 5000
    out = tmp_path / "params.ok"
    with pytest.raises(ParamsError, match="training_audit.train.declared.batch_size"):
        pipeline.run_check(params, out_path=out, records_dir=tmp_path / "models")
    assert not out.exists()


def _tracked_cancer(path: Path) -> Path:
    frame = load_breast_cancer(as_frame=True).frame.head(260).copy()
    frame.to_csv(path, index=False)
    data = path.read_bytes()
    out = {"md5": hashlib.md5(data).hexdigest(), "size": len(data), "hash": "md5", "path": path.name}
    record = {"outs": [out]}
    path.with_name(path.name + ".dvc").write_text(yaml.safe_dump(record))
    return path


@pytest.fixture
def custom_params(tmp_path: Path, user_module: str) -> tuple[Path, dict[str, Any]]:
    """A custom dataset ``cancer`` (100 training records) prepared under ``tmp_path`` and params with one
    training audit of ``my_training.fit:fit`` on it (m = 20, one epoch)."""
    from dpaudit.data.custom import download_custom, prepare_custom_stage
    from dpaudit.data.prepare import DataConfig

    path = _tracked_cancer(tmp_path / "cancer.csv")
    params = copy.deepcopy(load_params(REPO / "params.yaml"))
    params["data"]["datasets"] = []
    params["data"]["custom"] = {
        "cancer": {
            "path": str(path),
            "label": "target",
            "train_size": 100,
            "eval_size": 60,
            "measure": "euclidean",
        }
    }
    params["audits"] = {"cancer-training_audit": {"dataset": "cancer", "experiment": "training_audit"}}
    ta = params["training_audit"]
    ta["train"].update({"function": f"{user_module}:fit", "options": {"epochs": 1}, "canaries": 20})
    ta["train"]["declared"].update({"batch_size": 16, "epochs": 1, "noise_multiplier": 1.61})
    ta["datasets"]["cancer"] = {"train_size": None}
    pipeline.check_params(params)
    spec = DataConfig.from_params(params).custom_spec("cancer")
    raw = tmp_path / "data" / "raw" / "cancer"
    download_custom(spec, raw)
    prepare_custom_stage(spec, raw, tmp_path / "data" / "prepared" / "cancer.npz")
    return tmp_path, params


def _run_stages(root: Path, params: dict[str, Any], name: str) -> dict[str, Any]:
    from dpaudit.io import read_json

    for run in (pipeline.run_train, pipeline.run_losses, pipeline.run_attack, pipeline.run_bounds):
        run(params, name, root=root)
    return read_json(root / "results" / f"{name}.json")


def test_a_user_function_on_a_custom_dataset_runs_through_the_stages(
    custom_params: tuple[Path, dict[str, Any]],
) -> None:
    from dpaudit.report.inputs import find_sections
    from dpaudit.report.summary import summary_metrics

    root, params = custom_params
    metrics = _run_stages(root, params, "cancer-training_audit")
    verdict = metrics["verdict"]
    assert verdict["caught"] in (0.0, 1.0) and verdict["runs"] == 1 and verdict["canaries"] == 20
    assert verdict["epsilon_claimed"] > 0 and verdict["epsilon_lower"] >= 0
    expected = {"steps", "noise_present", "signal_to_noise_high", "clipped_sum_residual"}
    assert expected <= set(metrics["checks"])
    assert all("status" in c and "level" in c for c in metrics["checks"].values())
    plots = root / "plots" / "cancer-training_audit"
    snr = pd.read_csv(plots / "signal_to_noise.csv")
    assert {"step", "observed", "declared", "band_low", "band_high"} <= set(snr.columns)
    noise = pd.read_csv(plots / "noise_scale.csv")
    assert len(noise) == 7 and (noise["band_low"] < noise["band_high"]).all()  # ceil(100/16) steps
    assert (plots / "residual.csv").is_file()

    sections = find_sections(root, ["cancer-training_audit"])
    summary = summary_metrics(sections)["cancer-training_audit"]
    assert {"caught", "epsilon_lower", "epsilon_claimed"} <= set(summary)
    assert summary["caught"] == verdict["caught"]
    assert summary["epsilon_claimed"] == pytest.approx(verdict["epsilon_claimed"], rel=1e-2)
    loaded = sections[0].section
    titles = [t.title for t in loaded.tables]
    assert "Checks of the training against its declaration" in titles
    checks = next(t for t in loaded.tables if t.id.endswith("-checks"))
    assert {row[2] for row in checks.rows} <= {"passed", "rejected", "skipped", "not applicable"}
    assert {row[1] for row in checks.rows} <= {"mismatch", "warning"}
    assert "Training audit of my_training.fit:fit" in loaded.title


def test_two_runs_pool_into_one_verdict(custom_params: tuple[Path, dict[str, Any]]) -> None:
    root, params = custom_params
    params["training_audit"]["train"]["runs"] = 2
    metrics = _run_stages(root, params, "cancer-training_audit")
    assert metrics["verdict"]["runs"] == 2 and metrics["verdict"]["canaries"] == 40
    # every run's checks enter the verdict: the per-run checks appear once per run
    assert "steps" in metrics["checks"] and "steps_2" in metrics["checks"]


def test_the_check_record_follows_the_function_file_and_the_library(tmp_path: Path) -> None:
    """train@<audit> depends on its check record: the user's module file and the training audit
    library are in it by md5, so editing either reruns this audit (and no other audit)."""
    from dpaudit.experiments.training_audit.config import code_record

    pkg = tmp_path / "mine"
    pkg.mkdir()
    (pkg / "fit.py").write_text("def fit(dataset, audit):\n    return None\n")
    config = config_from_params({"training_audit": section(function="mine.fit:fit", options={})})
    before = code_record(config, tmp_path)
    assert before["function_source"]["path"] == "mine/fit.py"
    assert "dpaudit/training_audit/verdict.py" in before["library"]
    assert "dpaudit/bounds/onerun.py" in before["library"]
    (pkg / "fit.py").write_text("def fit(dataset, audit):\n    return 1\n")
    after = code_record(config, tmp_path)
    assert after["function_source"]["md5"] != before["function_source"]["md5"]
    assert after["library"] == before["library"]


@pytest.mark.slow
def test_two_runs_pool_into_one_verdict_on_ray(custom_params: tuple[Path, dict[str, Any]]) -> None:
    """runner: ray trains the runs in Ray workers (the user's module importable there too) and pools
    them as the local runner does."""
    root, params = custom_params
    params["training_audit"]["train"].update(runs=2, runner="ray")
    metrics = _run_stages(root, params, "cancer-training_audit")
    assert metrics["verdict"]["runs"] == 2 and metrics["verdict"]["canaries"] == 40
    assert "steps" in metrics["checks"] and "steps_2" in metrics["checks"]


@pytest.mark.parametrize(
    "optimizer, bug, caught",
    [
        ("hand_written", "none", 0.0),
        ("hand_written", "noise_div10", 1.0),
        ("tf_privacy", "none", 0.0),
        ("tf_privacy", "noise_div10", 1.0),
    ],
)
def test_the_bug_switch_flips_the_verdict(
    custom_params: tuple[Path, dict[str, Any]], optimizer: str, bug: str, caught: float
) -> None:
    """The worked example's one-line switch, with its hand-written step and with TF Privacy's optimizer:
    correct code is not caught, noise/10 is (the signal-to-noise check sees ten times the declared
    signal-to-noise ratio), through the stages and the summary."""
    from dpaudit.experiments.training_audit.bounds import STATUS_CODES
    from dpaudit.report.inputs import find_sections
    from dpaudit.report.summary import summary_metrics

    root, params = custom_params
    options = {"epochs": 2, "bug": bug, "optimizer": optimizer}
    params["training_audit"]["train"].update(options=options, canaries=100)
    params["training_audit"]["train"]["declared"]["epochs"] = 2
    metrics = _run_stages(root, params, "cancer-training_audit")
    assert metrics["verdict"]["caught"] == caught, metrics["verdict"]["status"]
    if caught:
        rejected = STATUS_CODES["rejected"]
        assert metrics["checks"]["signal_to_noise_high"]["status"] == rejected
    summary = summary_metrics(find_sections(root, ["cancer-training_audit"]))["cancer-training_audit"]
    assert summary["caught"] == caught
