"""Training does not depend on the number of intra-op threads (issue 11.1).

Eigen splits the inner dimension of a long matmul differently for 1 and 2 threads, which changed
the last bits of the clipped sums (and then everything downstream). The trainer contracts over
examples and positions in fixed blocks (``models.CONTRACT_BLOCK``); this test trains the same
small problems in two subprocesses with 1 and 2 intra-op threads and asserts bit-identical output.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SCRIPT = r"""
import sys
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(int(sys.argv[1]))
from dpaudit.training import dpsgd, models
rng = np.random.default_rng(0)
X = rng.normal(size=(1200, 64)).astype(np.float32)
y = rng.integers(0, 10, 1200)
mask = rng.random((12, 1200)) < 0.7
mlp = models.mlp("d", 64, 10, (32,))
out = []
for q in (1.0, 0.3):
    cfg = dpsgd.DPSGDConfig(1.0, 1.0, 0.5, 4, sampling_rate=q)
    r = dpsgd.train_trials(mlp, X, y, mask, cfg, seed=3, tracked=dpsgd.TrackedRecords((0, 5), (1.0, -1.0)))
    out += [p.ravel() for p in r.params]
adult = models.mlp("a", 104, 2, (6, 6))
Xa = (rng.random((1001, 104)) < 0.12).astype(np.float32)
cfg = dpsgd.DPSGDConfig(3.0, 2.0, 0.1, 3)
tracked = dpsgd.TrackedRecords((0, 1000), (1.0, -1.0))
r = dpsgd.train_trials(adult, Xa, y[:1001] % 2, np.ones((150, 1001), bool), cfg, tracked=tracked)
out += [p.ravel() for p in r.params]
cnn = models.cnn("c", (20, 20, 1), 3, (4, 4))
Xc = rng.normal(size=(30, 20, 20, 1)).astype(np.float32)
for strategy in ("single", "trials"):
    r = dpsgd.train_trials(cnn, Xc, y[:30] % 3, np.ones((2, 30), bool), dpsgd.DPSGDConfig(1.0, 1.0, 0.3, 2),
                           strategy=strategy)
    out += [p.ravel() for p in r.params]
np.save(sys.argv[2], np.concatenate(out))
"""


def start(threads: int, path: Path) -> subprocess.Popen:
    """Train the problems above in a fresh process with ``threads`` intra-op threads, saving to ``path``."""
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": str(threads), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2] / "src"), env.get("PYTHONPATH", "")]
    )
    return subprocess.Popen([sys.executable, "-c", SCRIPT, str(threads), str(path)], env=env)


def test_training_is_bit_identical_with_one_and_two_threads(tmp_path: Path) -> None:
    # Both processes run at once: each fixes its own thread count, so sharing the cores changes only
    # the wall time, never the bits.
    paths = {threads: tmp_path / f"{threads}.npy" for threads in (1, 2)}
    processes = {threads: start(threads, path) for threads, path in paths.items()}
    try:
        for threads, process in processes.items():
            assert process.wait(timeout=600) == 0, f"the {threads}-thread run failed"
    finally:
        for process in processes.values():
            process.kill()
    one, two = (np.load(path) for path in paths.values())
    assert one.size > 10_000
    np.testing.assert_array_equal(one, two)
