"""A stage killed mid-write leaves no temporary behind: SIGTERM and Ctrl-C unwind, SIGKILL is swept later.

Each test runs a real Python process in a temporary repository. It writes through the same atomic
writers as the train and bounds stages (a model directory under ``data/train/``, a metrics file, a
plots directory), slowly, until it is signalled.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dpaudit.io import atomic_directory, write_json

SRC = Path(__file__).resolve().parents[1] / "src"
DESTINATIONS = ("data/train/toy/membership", "metrics/toy-membership.json", "plots/toy-membership")

# A stage body that opens all three outputs, announces it, then appends chunks until signalled.
STAGE = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path
    from dpaudit.io import atomic_directory, atomic_path
    from dpaudit.pipeline import run_stage

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored

    def body(params):
        with (
            atomic_directory(Path("data/train/toy/membership")) as model,
            atomic_path(Path("metrics/toy-membership.json")) as metrics,
            atomic_directory(Path("plots/toy-membership")) as plots,
        ):
            metrics.write_text("{")
            (plots / "curve.csv").write_text("x,y\\n")
            print("writing", flush=True)
            while True:
                with open(model / "weights.bin", "ab") as handle:
                    handle.write(b"w" * 65536)
                time.sleep(0.01)

    run_stage("train@toy-membership", body)
    """
)


def _temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp"))


def _start_writer(repo: Path) -> subprocess.Popen[str]:
    """Start the stage in ``repo`` and return once it is inside all three writers."""
    (repo / "params.yaml").write_text("{}\n")
    env = {**os.environ, "PYTHONPATH": str(SRC), "DPAUDIT_PROGRESS": "0", "DPAUDIT_LOG_LEVEL": "INFO"}
    pipe = subprocess.PIPE
    command = [sys.executable, "-c", STAGE]
    process = subprocess.Popen(command, cwd=repo, env=env, stdout=pipe, stderr=pipe, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # blocks until the writers are open (or the process died)
    assert line == "writing\n", process.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while not list((repo / "data" / "train" / "toy").glob(".membership.*.tmp/weights.bin")):
        assert time.monotonic() < deadline, "the writer never wrote a chunk"
        time.sleep(0.01)
    return process


#: A line of TensorFlow's native (C++) logger: timestamp, then a severity letter and a source location.
TF_NATIVE_LOG = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+: [IWEF] \S+\] ")


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signalled_stage_removes_its_temporaries_and_says_so_in_one_line(tmp_path, signum, status):
    process = _start_writer(tmp_path)
    assert len(_temps(tmp_path)) == 3  # the test can fail: the temporaries exist mid-write
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == status, stderr
    name = signal.Signals(signum).name
    message = f"stage train@toy-membership interrupted ({name}); partial outputs removed"
    # TensorFlow's C++ runtime may log its own start-up lines ("2026-… E external/…] Unable to register
    # cuDNN factory …") when the stage imports it; everything else on stderr must be the one message.
    ours = [line for line in stderr.strip().splitlines() if not TF_NATIVE_LOG.match(line)]
    assert ours == [f"ERROR dpaudit.stage: {message}"], stderr
    assert _temps(tmp_path) == []
    assert all(not (tmp_path / dest).exists() for dest in DESTINATIONS)
    assert not (tmp_path / "data" / "timing").exists()  # an interrupted stage records no duration


def test_temporaries_left_by_sigkill_are_swept_by_the_next_writer(tmp_path):
    process = _start_writer(tmp_path)
    process.kill()
    process.communicate(timeout=30)
    left = _temps(tmp_path)
    assert len(left) == 3 and all(f".{process.pid}." in name for name in left)  # SIGKILL cannot be caught
    # The next run of the stage writes the same destinations and first removes the dead writer's files.
    with atomic_directory(tmp_path / DESTINATIONS[0]) as model:
        (model / "weights.bin").write_bytes(b"w")
    write_json(tmp_path / DESTINATIONS[1], {"epsilon": 1.0})
    with atomic_directory(tmp_path / DESTINATIONS[2]) as plots:
        (plots / "curve.csv").write_text("x,y\n")
    assert _temps(tmp_path) == []
    assert all((tmp_path / dest).exists() for dest in DESTINATIONS)
