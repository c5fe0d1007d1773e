"""Profile one-model DP-SGD training of the mnist CNN on CPU against a no-DP forward + backward of
the same model, and break both compiled loops down by op.

- ``dpaudit``: ``train_trials`` (4 trials, one model at a time on CPU), wall and process CPU time
  per model of 30 full-batch steps (CPU time is the steadier figure on a shared machine);
- ``no-DP``: the same model's forward + backward + SGD update, one model, 30 steps in a while loop
  (what the DP step adds is the difference);
- ``--ops``: per op type and per node, the time of one compiled call of 30 steps of each loop from
  ``RunMetadata`` step stats (a TF1 session on the same graph), each node's median execution times
  its count, so that preemption on a loaded machine does not dominate; ``--threads 1`` makes the
  sums CPU work. Both loops run each step as its own function, so oneDNN's graph pass rewrites
  every ``MaxPoolGrad`` to its own kernel: ≈ 0.1 ms a step each, against 1–3 ms for TensorFlow's
  kernel, which an inlined loop body drew in some processes.

Usage::

    python benchmarks/profile_cnn.py [--rounds 5] [--ops] [--threads 1]
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("DPAUDIT_PROGRESS", "0")

import numpy as np
import tensorflow as tf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_side_by_side import mnist100, no_dp_loop  # noqa: E402
from dpaudit.training import dpsgd, models  # noqa: E402
from dpaudit.training.dpsgd.cache import _get_step_function  # noqa: E402

CFG = dpsgd.DPSGDConfig(1.0, 1.0, 0.1, 30)


def nodp_loop(
    model: models.Model, X: np.ndarray, y: np.ndarray
) -> Callable[[list[tf.Tensor]], list[tf.Tensor]]:
    """The side-by-side benchmark's no-DP loop for one model, ``CFG.steps`` steps."""
    train, steps = no_dp_loop(model, X, y, CFG.learning_rate), tf.constant(CFG.steps)
    return lambda params: train(params, steps)


def _dp_graph(model: models.Model, X: np.ndarray, y: np.ndarray) -> list[tf.Tensor]:
    """The compiled DP-SGD loop (one model, ``CFG``) built into the current graph."""
    stepper = _get_step_function(
        model, CFG, 1, tracked_rows=(), has_difference=False, observers={}, jit_compile=False,
        injected=None, injector=None, gathered=False, released=None,
    )  # fmt: skip
    params = [tf.constant(p) for p in model.init(1, 0)]
    out, _ = stepper._loop(
        tf.constant(0, tf.int64), tf.constant(0, tf.int64), params, tf.constant(X),
        tf.constant(y.astype(np.int32)), tf.ones([1, len(X)]), tf.ones([1]),
        tf.constant([len(X)], tf.float32), tf.constant(0, tf.int64), tf.constant(CFG.steps),
        tf.zeros([1, 0]), {}, {},
    )  # fmt: skip
    return out


def _nodp_graph(model: models.Model, X: np.ndarray, y: np.ndarray) -> list[tf.Tensor]:
    """The no-DP loop of :func:`nodp_loop` built into the current graph."""
    train = no_dp_loop(model, X, y, CFG.learning_rate).python_function
    return train([tf.constant(p) for p in model.init(1, 0)], tf.constant(CFG.steps))


def op_breakdown(
    build: Callable, model: models.Model, X: np.ndarray, y: np.ndarray, top: int, threads: int = 0
) -> None:
    """Op time by op type over one call (30 steps) of a compiled loop, from ``RunMetadata`` step
    stats: each node's time is the median of its executions (robust to preemption on a loaded
    machine) times their count, summed over the runs of 3 traced calls and divided by 3."""
    g = tf.Graph()
    with g.as_default():
        out = build(model, X, y)
        config = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
        )
        metas = []
        with tf.compat.v1.Session(graph=g, config=config) as sess:
            sess.run(out)
            for _ in range(3):
                opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
                meta = tf.compat.v1.RunMetadata()
                sess.run(out, options=opts, run_metadata=meta)
                metas.append(meta)
    ops = {n.name: n.op for n in g.as_graph_def().node}
    runs: dict[str, list[float]] = collections.defaultdict(list)
    kinds: dict[str, str] = {}
    for meta in metas:
        for dev in meta.step_stats.dev_stats:
            for ns in dev.node_stats:
                name = ns.node_name.split(":")[0]
                runs[name].append(ns.op_end_rel_micros - ns.op_start_rel_micros)
                label = ns.timeline_label.split("=")[-1].split("(")[0].strip()
                kinds[name] = ops.get(name) or label or name
    # A step run as its own function appears as a call node besides its ops: count the ops only.
    calls = {n for n, k in kinds.items() if k in ("PartitionedCall", "StatefulPartitionedCall")}
    by_node = {n: statistics.median(v) * len(v) / len(metas) for n, v in runs.items() if n not in calls}
    by_type: dict[str, float] = collections.defaultdict(float)
    for name, us in by_node.items():
        by_type[kinds[name]] += us
    total = sum(by_type.values())
    print(f"{build.__name__}: {total / 1e3 / CFG.steps:.2f} ms summed op time per step")
    for kind, us in sorted(by_type.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {kind:44s} {us / 1e3 / CFG.steps:7.3f} ms/step  {100 * us / total:5.1f} %")
    print("costliest nodes:")
    for name, us in sorted(by_node.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {name[-70:]:70s} {us / 1e3 / CFG.steps:7.3f} ms/step")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--ops", action="store_true", help="print the op-type breakdown")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument(
        "--threads", type=int, default=0, help="intra- and inter-op threads (0: TensorFlow's default)"
    )
    args = parser.parse_args()
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    X, y, source = mnist100()
    model = models.model_for_dataset("mnist", (28, 28, 1), 10)
    print(f"mnist: {source}; load average {os.getloadavg()}", flush=True)
    mask = np.ones((args.trials, len(X)), bool)
    nodp = nodp_loop(model, X, y)
    init = [tf.constant(p[0]) for p in model.init(1, 0)]
    init = [p[None] for p in init]

    def run_dpaudit() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        dpsgd.train_trials(model, X, y, mask, CFG, seed=0)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return wall / args.trials * 1e3, cpu / args.trials * 1e3

    def run_nodp() -> tuple[float, float]:
        start, cpu = time.perf_counter(), time.process_time()
        [p.numpy() for p in nodp(init)]
        return (time.perf_counter() - start) * 1e3, (time.process_time() - cpu) * 1e3

    run_dpaudit(), run_nodp()  # warm-up (tracing)
    times: dict[str, list[tuple[float, float]]] = {"dpaudit": [], "nodp": []}
    for _ in range(args.rounds):
        times["dpaudit"].append(run_dpaudit())
        times["nodp"].append(run_nodp())
    med = {k: [statistics.median(x[i] for x in v) for i in (0, 1)] for k, v in times.items()}
    for k, v in times.items():
        print(
            f"{k:8s} ms/model wall min {min(x[0] for x in v):7.1f} median {med[k][0]:7.1f}; "
            f"CPU median {med[k][1]:7.1f}"
        )
    print(
        f"dpaudit / no-DP (medians): wall {med['dpaudit'][0] / med['nodp'][0]:.2f}, "
        f"CPU {med['dpaudit'][1] / med['nodp'][1]:.2f}; load {os.getloadavg()}"
    )
    if args.ops:
        for build in (_dp_graph, _nodp_graph):
            op_breakdown(build, model, X, y, args.top, args.threads)


if __name__ == "__main__":
    main()
