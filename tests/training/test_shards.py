"""Trials sharded over Ray: shards equal one process whoever trains them (the driver, Ray's
workers or both, from one queue), a killed task is retried, and the default (local) runner never
imports Ray.

One local Ray with 2 CPUs (no dashboard) serves the module and is shut down afterwards; the
trainings are tiny (a 2-layer MLP, 24 trials in 6 chunks of 4, 3 steps).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpaudit.config import ParamsError
from dpaudit.training import dpsgd, models, shards
from dpaudit.training.dpsgd.difference import di_observer

REPO = Path(__file__).resolve().parents[2]


def _problem() -> tuple:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    y = rng.integers(0, 2, 60)
    mask = rng.random((24, 60)) < 0.6
    model = models.mlp("tiny", 8, 2, (4,))
    cfg = dpsgd.DPSGDConfig(1.0, np.linspace(0.5, 2.0, 24), 0.3, 3, noise_scale="local", normalizer=60.0)
    kw = {"tracked": dpsgd.TrackedRecords((0, 1), (1.0, -1.0)), "chunk_size": 4}
    return model, X, y, mask, cfg, kw


def _assert_equal(a: dpsgd.TrainResult, b: dpsgd.TrainResult) -> None:
    assert len(a.params) == len(b.params)
    for p, q in zip(a.params, b.params, strict=True):
        assert np.array_equal(p, q)
    assert sorted(a.records) == sorted(b.records)
    for k in a.records:
        assert np.array_equal(a.records[k], b.records[k]), k


def test_chunks_concatenated_equal_one_call() -> None:
    model, X, y, mask, cfg, kw = _problem()
    whole = dpsgd.train_trials(model, X, y, mask, cfg, seed=5, observers={"di": di_observer()}, **kw)
    size, num_chunks = dpsgd.chunk_layout(model, mask, cfg, chunk_size=4)
    assert (size, num_chunks) == (4, 6)
    parts = [
        dpsgd.train_trials(model, X, y, mask, cfg, seed=5, observers={"di": di_observer()}, chunks=r, **kw)
        for r in shards.shard_ranges(num_chunks, 4)
    ]
    merged = dpsgd.TrainResult(
        params=[np.concatenate([p.params[i] for p in parts]) for i in range(len(whole.params))],
        records={k: np.concatenate([p.records[k] for p in parts]) for k in whole.records},
        config=cfg,
    )
    _assert_equal(whole, merged)
    with pytest.raises(ValueError, match="chunks"):
        dpsgd.train_trials(model, X, y, mask, cfg, chunks=range(5, 8), **kw)


def test_runner_config_is_validated() -> None:
    assert shards.RunnerConfig.from_params({}) == shards.RunnerConfig()
    cfg = shards.RunnerConfig.from_params({"runner": {"kind": "ray", "shard_chunks": 2}})
    assert (cfg.kind, cfg.address, cfg.shard_chunks, cfg.max_retries) == ("ray", None, 2, 3)
    assert cfg.driver_trains
    with pytest.raises(ParamsError, match="runner.driver_trains"):
        shards.RunnerConfig.from_params({"runner": {"kind": "ray", "driver_trains": "yes"}})
    with pytest.raises(ParamsError, match="runner.kind"):
        shards.RunnerConfig.from_params({"runner": {"kind": "dask"}})
    with pytest.raises(ParamsError, match="runner.shard_chunks"):
        shards.RunnerConfig.from_params({"runner": {"kind": "ray", "shard_chunks": 0}})
    with pytest.raises(ParamsError, match="runner.workers"):
        shards.RunnerConfig.from_params({"runner": {"workers": 2}})


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    os.environ.setdefault("PYTHONPATH", str(REPO / "src"))
    os.environ.setdefault("RAY_worker_niceness", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.timeout(300)
def test_two_ray_workers_equal_one_process(local_ray) -> None:
    model, X, y, mask, cfg, kw = _problem()
    obs = {"di": di_observer()}
    local = shards.run_trials(model, X, y, mask, cfg, seed=7, observers=obs, **kw)
    with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=2, driver_trains=False)):
        sharded = shards.run_trials(model, X, y, mask, cfg, seed=7, observers=obs, **kw)
    _assert_equal(local, sharded)
    assert sharded.params[0].shape[0] == 24
    assert shards.last_shard_owners == ["ray"] * 3


@pytest.mark.timeout(300)
def test_driver_and_ray_workers_share_the_queue_and_equal_one_process(
    local_ray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver trains shard 0, then holds its next shard until a Ray worker has finished one,
    so both own shards; the result is bit-identical to one local call."""
    model, X, y, mask, cfg, kw = _problem()
    obs = {"di": di_observer()}
    local = shards.run_trials(model, X, y, mask, cfg, seed=11, observers=obs, **kw)
    real = dpsgd.train_trials
    calls: list[range] = []

    def held(*args, **kwargs):  # the driver's thread only: workers import their own trainer
        calls.append(kwargs["chunks"])
        if len(calls) == 2:
            deadline = time.monotonic() + 240
            while "ray" not in shards._current_queue.owners.values() and time.monotonic() < deadline:
                time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(dpsgd, "train_trials", held)
    with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=1)):
        sharded = shards.run_trials(model, X, y, mask, cfg, seed=11, observers=obs, **kw)
    _assert_equal(local, sharded)
    assert calls[0] == range(0, 1)  # the driver started with the first shard
    assert set(shards.last_shard_owners) == {"driver", "ray"}, shards.last_shard_owners
    assert len(shards.last_shard_owners) == 6


def _dies_once(marker: Path, driver: int) -> dpsgd.Observer:
    """An observer that kills its Ray worker process the first time a worker traces it."""
    inner = di_observer()

    def observe(state: dpsgd.StepState) -> dict:
        if os.getpid() != driver and not marker.exists():
            marker.write_text("killed once\n")
            os._exit(1)
        return inner(state)

    return observe


@pytest.mark.timeout(300)
def test_a_killed_shard_is_retried(local_ray, tmp_path: Path) -> None:
    model, X, y, mask, cfg, kw = _problem()
    marker = tmp_path / "killed"
    obs = {"di": _dies_once(marker, os.getpid())}
    local = shards.run_trials(model, X, y, mask, cfg, seed=9, observers=obs, **kw)
    with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=3, max_retries=2, driver_trains=False)):
        sharded = shards.run_trials(model, X, y, mask, cfg, seed=9, observers=obs, **kw)
    assert marker.read_text() == "killed once\n"  # one worker died on its first attempt
    _assert_equal(local, sharded)


def test_default_run_does_not_import_ray(tmp_path: Path) -> None:
    script = r"""
import sys
import numpy as np
from dpaudit.config import load_params
from dpaudit.pipeline import check_params
from dpaudit.training import dpsgd, models, shards
check_params(load_params(sys.argv[1]))
with shards.using(shards.RunnerConfig.from_params(load_params(sys.argv[1]))):
    rng = np.random.default_rng(0)
    shards.run_trials(models.mlp("m", 4, 2, (3,)), rng.normal(size=(10, 4)), rng.integers(0, 2, 10),
                      np.ones((3, 10), bool), dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 2))
assert "ray" not in sys.modules, "the local runner imported ray"
print("no ray")
"""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DPAUDIT_PROGRESS": "0"}
    out = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "params.yaml")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "no ray" in out.stdout


def test_params_yaml_runner_is_the_local_default() -> None:
    from dpaudit.config import load_params

    assert shards.RunnerConfig.from_params(load_params(REPO / "params.yaml")) == shards.RunnerConfig()
    dvc_yaml = (REPO / "dvc.yaml").read_text()
    # A runner change never retrains (results are bit-identical), so no stage lists runner keys.
    assert re.search(r"^\s*-\s*runner", dvc_yaml, re.M) is None
