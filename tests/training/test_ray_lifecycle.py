"""Ray's life in a stage process: started once and reused by every sharded training, shut down at
exit, and a signal during a sharded run ends the stage like a local one (one line, exit 143 or 130,
no partial output, no Ray process left behind).

The trainings are tiny (a 2-layer MLP on 60 rows, 16 trials in chunks of 4; the signal stage uses
chunks of 1, so that the driver's first shard is short and a Ray worker soon joins). The signal tests run a
stage in a subprocess and are marked slow: importing TensorFlow and starting Ray there takes 15–30 s
on two busy cores.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dpaudit.training import dpsgd, models, ray_session, shards

REPO = Path(__file__).resolve().parents[2]

ray = pytest.importorskip("ray")


def _problem(steps: int = 3) -> tuple:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    y = rng.integers(0, 2, 60)
    mask = rng.random((16, 60)) < 0.6
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, steps, normalizer=60.0)
    return models.mlp("tiny", 8, 2, (4,)), X, y, mask, cfg


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch):
    """No Ray running before the test, none left after it; workers import this checkout."""
    if ray.is_initialized():
        pytest.skip("a Ray started elsewhere in this process is running")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    monkeypatch.setenv("RAY_worker_niceness", "0")
    yield
    shards.shutdown_ray(wait=240)  # waits for a start still under way
    if ray.is_initialized():
        ray.shutdown()


@pytest.mark.timeout(300)
def test_ray_starts_once_per_process_and_keeps_signal_handlers(no_ray, monkeypatch) -> None:
    calls: list[str | None] = []
    real_init = ray.init

    def counting_init(*args, **kwargs):
        calls.append(kwargs.get("address"))
        return real_init(*args, **kwargs)

    monkeypatch.setattr(ray, "init", counting_init)
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        model, X, y, mask, cfg = _problem()
        local = dpsgd.train_trials(model, X, y, mask, cfg, seed=3, chunk_size=4)
        with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=2, driver_trains=False)):
            first = shards.run_trials(model, X, y, mask, cfg, seed=3, chunk_size=4)
            assert ray.is_initialized()  # kept for the next training of this process
            second = shards.run_trials(model, X, y, mask, cfg, seed=3, chunk_size=4)
        assert calls == [None]  # one local Ray for both trainings
        # The model is put into the object store once, so each worker unpickles (and traces) it once.
        assert [entry[0] for entry in ray_session._model_refs.values()] == [model]
        for res in (first, second):
            for p, q in zip(local.params, res.params, strict=True):
                assert np.array_equal(p, q)
        # ray.init replaces SIGTERM's handler (Ray's aborts with a C++ stack trace); ours is back.
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        assert seen == [signal.SIGTERM]
        with pytest.raises(ValueError, match="runner.address 'ray://elsewhere:10001'"):
            shards.ensure_ray("ray://elsewhere:10001")
    finally:
        signal.signal(signal.SIGTERM, previous)
    shards.shutdown_ray()
    assert not ray.is_initialized()


@pytest.mark.timeout(300)
def test_the_driver_trains_while_ray_starts(no_ray, monkeypatch) -> None:
    """A slow Ray start (held until the test lets it go): the driver trains every shard at once,
    before Ray is up, and the result is bit-identical to one local call; Ray is started once, in
    the background, and the call does not wait for it."""
    gate, began = threading.Event(), []
    real_init = ray.init

    def slow_init(*args, **kwargs):
        assert gate.wait(240)
        began.append(time.monotonic())
        return real_init(*args, **kwargs)

    real_train, trained = dpsgd.train_trials, []

    def recording(*args, **kwargs):
        deadline = time.monotonic() + 60
        while len(trained) == 1 and ray_session._start is None and time.monotonic() < deadline:
            time.sleep(0.01)  # after its first shard the driver goes on once Ray's start has begun
        res = real_train(*args, **kwargs)
        trained.append((kwargs["chunks"], time.monotonic()))
        return res

    monkeypatch.setattr(ray, "init", slow_init)
    monkeypatch.setattr(shards, "LOCAL_RAY_MIN_SECONDS", 0.0)  # start Ray after the first shard
    model, X, y, mask, cfg = _problem()
    local = dpsgd.train_trials(model, X, y, mask, cfg, seed=4, chunk_size=4)
    monkeypatch.setattr(dpsgd, "train_trials", recording)
    with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=1)):
        sharded = shards.run_trials(model, X, y, mask, cfg, seed=4, chunk_size=4)
    assert not ray.is_initialized()  # returned while Ray was still starting
    for p, q in zip(local.params, sharded.params, strict=True):
        assert np.array_equal(p, q)
    assert shards.last_shard_owners == ["driver"] * 4
    assert sorted(r.start for r, _ in trained) == [0, 1, 2, 3]
    gate.set()
    shards.shutdown_ray(wait=240)
    assert began and max(t for _, t in trained) < began[0]  # all trained before ray.init ran
    assert not ray.is_initialized()


def test_a_short_call_never_starts_a_local_ray(no_ray, monkeypatch) -> None:
    """When the driver's first shard shows that the rest takes less than LOCAL_RAY_MIN_SECONDS, the
    driver trains everything and Ray is not started (its start-up would only slow the driver)."""
    calls: list = []
    monkeypatch.setattr(ray, "init", lambda *a, **k: calls.append(k))
    monkeypatch.setattr(shards, "LOCAL_RAY_MIN_SECONDS", 1e9)
    model, X, y, mask, cfg = _problem()
    local = dpsgd.train_trials(model, X, y, mask, cfg, seed=6, chunk_size=4)
    with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=1)):
        sharded = shards.run_trials(model, X, y, mask, cfg, seed=6, chunk_size=4)
    assert calls == []
    assert shards.last_shard_owners == ["driver"] * 4
    for p, q in zip(local.params, sharded.params, strict=True):
        assert np.array_equal(p, q)


def test_shards_of_a_released_run_follow_its_own_chunks(no_ray, monkeypatch) -> None:
    """Sharding plans with every argument that decides a call's chunks (``LAYOUT_KEYWORDS``): a
    released run whose trials share θ (threat model F's) batches up to 1024 trials a chunk, not the
    small chunks of an ordinary call, and its shards, trained by the driver, equal one call."""
    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray started for a short call"))
    monkeypatch.setattr(shards, "LOCAL_RAY_MIN_SECONDS", 1e9)
    model, X, y, _, _ = _problem()
    T = 2000
    mask = np.ones((T, len(X)), bool)
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.0, 2, sampling_rate=0.2)
    kw = {
        "init_params": [np.repeat(p, T, axis=0) for p in model.init(1, 2)],
        "released": [0, 5, model.num_params - 1],
        "observers": {"s": dpsgd.privatized_sum_observer([0, 5, model.num_params - 1])},
    }
    assert dpsgd.chunk_layout(model, mask, cfg, init_params=kw["init_params"], released=kw["released"]) == (
        1000, 2
    )
    local = dpsgd.train_trials(model, X, y, mask, cfg, seed=3, **kw)
    with shards.using(shards.RunnerConfig(kind="ray", shard_chunks=1)):
        sharded = shards.run_trials(model, X, y, mask, cfg, seed=3, **kw)
    assert shards.last_shard_owners == ["driver"] * 2
    assert np.array_equal(local.records["s"], sharded.records["s"])


@pytest.mark.timeout(300)
def test_a_ray_started_by_the_caller_is_left_running(no_ray) -> None:
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    model, X, y, mask, cfg = _problem()
    with shards.using(shards.RunnerConfig(kind="ray")):
        shards.run_trials(model, X, y, mask, cfg, seed=1, chunk_size=8)
    shards.shutdown_ray()  # not ours to stop
    assert ray.is_initialized()


STAGE = """
import os
import signal
import sys
from pathlib import Path

# A terminal's Ctrl-C reaches a foreground job, whose SIGINT is never ignored; a test run started in
# the background without job control (nohup, `&` in a script) hands its children an ignored SIGINT.
signal.signal(signal.SIGINT, signal.default_int_handler)

import numpy as np

from dpaudit.io import atomic_directory, write_npz
from dpaudit.pipeline import run_stage
from dpaudit.training import dpsgd, models, shards

out, marker, params = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
driver = os.getpid()
shards.LOCAL_RAY_MIN_SECONDS = 0.0  # start Ray after the driver's first shard, however short


def started():
    # An observer that marks the moment a Ray worker starts training.
    def observe(state):
        if os.getpid() != driver and not marker.exists():
            marker.write_text("training\\n")
        return {}
    return observe


def body(params):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    y = rng.integers(0, 2, 60)
    mask = rng.random((16, 60)) < 0.6
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 50_000, normalizer=60.0)
    with shards.using(shards.RunnerConfig.from_params(params)), atomic_directory(out) as tmp:
        (tmp / "begun.txt").write_text("partial\\n")
        res = shards.run_trials(models.mlp("t", 8, 2, (4,)), X, y, mask, cfg, seed=1,
                                chunk_size=1, observers={"started": started()})
        write_npz(tmp / "params.npz", {"p0": res.params[0]})


run_stage("train@ray-signal", body, params_path=params)
"""


@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.parametrize(
    ("signame", "status", "whole_group"),
    [("SIGTERM", 143, False), ("SIGTERM", 143, True), ("SIGINT", 130, True)],
    ids=["sigterm", "sigterm-group", "ctrl-c-group"],
)
def test_a_signal_stops_a_ray_stage_cleanly(
    tmp_path: Path, signame: str, status: int, whole_group: bool
) -> None:
    """``kill``/``timeout``/Ctrl-C during sharded training: one line, 128 + signal, nothing partial.

    ``whole_group`` signals the stage's process group (as ``timeout`` and a terminal's Ctrl-C do),
    which includes Ray's own processes, else only the stage process.
    """
    psutil = pytest.importorskip("psutil")
    script, marker, out = tmp_path / "stage.py", tmp_path / "started", tmp_path / "out"
    script.write_text(textwrap.dedent(STAGE))
    (tmp_path / "params.yaml").write_text("runner: {kind: ray, shard_chunks: 1}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DPAUDIT_PROGRESS": "0", "DPAUDIT_LOG_LEVEL":
           "WARNING", "TF_CPP_MIN_LOG_LEVEL": "3", "RAY_worker_niceness": "0"}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out), str(marker), str(tmp_path / "params.yaml")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, f"the stage ended before it was signalled: {proc.communicate()}"
        assert marker.exists(), "no Ray worker started training in time"
        ray_processes = psutil.Process(proc.pid).children(recursive=True)
        assert ray_processes, "the stage started no Ray processes"
        sig = getattr(signal, signame)
        if whole_group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        # Ray's shutdown after a group Ctrl-C took over 60 s on 2 busy AMD EPYC cores
        _, stderr = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = stderr.strip().splitlines()
    assert proc.returncode == status, stderr[-3000:]
    assert lines == [
        f"ERROR dpaudit.stage: stage train@ray-signal interrupted ({signame}); partial outputs removed"
    ], stderr[-3000:]
    assert "Traceback" not in stderr
    assert not out.exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no temporaries
    gone, alive = psutil.wait_procs(ray_processes, timeout=20)
    assert not alive, f"Ray processes left running: {[p.pid for p in alive]}"
