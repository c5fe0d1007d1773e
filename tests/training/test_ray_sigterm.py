"""SIGTERM to a stage training on a local Ray, ten times, at different moments: every run exits 143
with one line and no partial output, and within 10 s no process of its Ray is left.

Each run is a real stage process (``run_stage`` and ``shards.run_trials`` with ``runner.kind: ray``,
the driver training too, as in ``params.yaml``), signalled with ``kill`` once its first Ray worker
process exists plus a delay that differs per run (0–3 s), so that the signal lands while Ray is still
starting (its driver connecting), just after it is up, and while its workers train. A run's processes
(the stage, Ray's GCS, raylet, agents and workers) are told apart from any other process on the
machine by an environment variable with a value unique to the run, which they all inherit. Marked
slow: each run imports TensorFlow and starts Ray, 10–25 s on two busy cores.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUNS = 10
#: Seconds after the stage exits by which none of its Ray processes may be left.
LEFTOVER_SECONDS = 10.0
#: The environment variable that marks the processes of one run (inherited by all of them).
MARK = "DPAUDIT_TEST_RAY_SIGTERM_RUN"
LINE = "ERROR dpaudit.stage: stage train@ray-sigterm interrupted (SIGTERM); partial outputs removed"

STAGE = """
import signal
import sys
from pathlib import Path

signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored

import numpy as np

from dpaudit.io import atomic_directory, write_npz
from dpaudit.pipeline import run_stage
from dpaudit.training import dpsgd, models, shards

out, params = Path(sys.argv[1]), sys.argv[2]
shards.LOCAL_RAY_MIN_SECONDS = 0.0  # start Ray after the driver's first shard, however short


def body(params):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 8)).astype(np.float32)
    y = rng.integers(0, 2, 60)
    mask = rng.random((64, 60)) < 0.6
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 4_000, normalizer=60.0)  # about 1 s a shard
    with shards.using(shards.RunnerConfig.from_params(params)), atomic_directory(out) as tmp:
        (tmp / "begun.txt").write_text("partial\\n")
        res = shards.run_trials(models.mlp("t", 8, 2, (4,)), X, y, mask, cfg, seed=1, chunk_size=1)
        write_npz(tmp / "params.npz", {"p0": res.params[0]})


run_stage("train@ray-sigterm", body, params_path=params)
"""


def _marked(psutil, marker: str) -> list:
    """This run's live processes (those whose environment holds ``MARK=marker``)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARK) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):  # gone, or another user's
            continue
    return found


def _cmdline(proc) -> list[str]:
    try:
        return proc.cmdline()
    except Exception:  # gone meanwhile
        return []


def _is_ray_worker(proc) -> bool:
    """A Ray worker process: ``ray::IDLE`` (or a task's name) once started, its script before."""
    cmdline = _cmdline(proc)
    return bool(cmdline) and (cmdline[0].startswith("ray::") or "default_worker.py" in " ".join(cmdline))


def _one_run(psutil, tmp: Path, delay: float) -> dict:
    """Start the stage, SIGTERM it ``delay`` s after its first Ray worker appears; what happened."""
    tmp.mkdir()
    (tmp / "stage.py").write_text(textwrap.dedent(STAGE))
    (tmp / "params.yaml").write_text("runner: {kind: ray, shard_chunks: 1}\n")
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "DPAUDIT_PROGRESS": "0", "DPAUDIT_LOG_LEVEL":
           "WARNING", "TF_CPP_MIN_LOG_LEVEL": "3", MARK: marker}  # fmt: skip
    env.pop("RAY_ADDRESS", None)
    began = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(tmp / "stage.py"), str(tmp / "out"), str(tmp / "params.yaml")],
        cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    result: dict = {"delay": delay}
    try:
        deadline = began + 150
        while proc.poll() is None and time.monotonic() < deadline:
            if any(_is_ray_worker(p) for p in _marked(psutil, marker)):
                result["worker_s"] = round(time.monotonic() - began, 1)
                break
            time.sleep(0.1)
        if "worker_s" not in result or proc.poll() is not None:
            result["error"] = "no Ray worker appeared while the stage ran"
            return result
        time.sleep(delay)
        result["ray_processes"] = len(_marked(psutil, marker)) - 1
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=90)
        exited = time.monotonic()
        result.update(status=proc.returncode, exit_s=round(exited - signalled, 1), stderr=stderr)
        left = _marked(psutil, marker)
        while left and time.monotonic() < exited + LEFTOVER_SECONDS:
            time.sleep(0.1)
            left = _marked(psutil, marker)
        result["left"] = [" ".join(_cmdline(p))[:80] for p in left]
        if not left:
            result["gone_s"] = round(time.monotonic() - exited, 1)
        result["outputs"] = sorted(p.name for p in tmp.iterdir() if p.name not in ("stage.py", "params.yaml"))
        return result
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for leftover in _marked(psutil, marker):  # this run's own processes only
            with contextlib.suppress(psutil.Error):
                leftover.kill()


def _problems(result: dict) -> list[str]:
    if "error" in result:
        return [result["error"]]
    stderr = result["stderr"]
    problems = []
    if result["status"] != 143:
        problems.append(f"exit status {result['status']}")
    if stderr.strip().splitlines() != [LINE]:
        problems.append(f"stderr {stderr[-1500:]!r}")
    if result["left"]:
        problems.append(f"left after {LEFTOVER_SECONDS:.0f} s: {result['left']}")
    if result["outputs"]:
        problems.append(f"outputs or temporaries left: {result['outputs']}")
    return problems


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_sigterm_during_ray_training_exits_143_and_leaves_no_ray_process(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("ray")
    results = []
    for i in range(RUNS):
        result = _one_run(psutil, tmp_path / f"run{i}", delay=round(3.0 * i / (RUNS - 1), 2))
        results.append((result, _problems(result)))
    summary = "\n".join(
        f"run {i}: delay {r['delay']} s, worker at {r.get('worker_s')} s, {r.get('ray_processes')} Ray "
        f"processes, status {r.get('status')} after {r.get('exit_s')} s, none left after "
        f"{r.get('gone_s')} s; {'; '.join(p) or 'ok'}"
        for i, (r, p) in enumerate(results)
    )
    print(summary)
    failed = [i for i, (_, p) in enumerate(results) if p]
    assert not failed, f"{len(failed)} of {RUNS} signalled runs failed:\n{summary}"
